//go:build !race

package redislimit_test

const raceEnabled = false
