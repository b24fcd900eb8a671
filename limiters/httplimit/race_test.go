//go:build race

package httplimit

// raceEnabled reports whether the race detector is on: it makes sync.Pool
// drop a quarter of what is put in it, so allocations are not counted.
const raceEnabled = true
