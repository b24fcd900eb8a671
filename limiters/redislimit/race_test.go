//go:build race

package redislimit_test

// raceEnabled reports whether the race detector is on: under it sync.Pool
// drops some of what it is given, so pooled calls are allocated anew.
const raceEnabled = true
