//go:build !race

package limiters_test

const raceEnabled = false
