//go:build race

package limiters_test

// raceEnabled reports whether the race detector is on: it slows the
// randomized tests tenfold, so they run fewer traces under it.
const raceEnabled = true
