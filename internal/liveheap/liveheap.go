// Package liveheap measures the heap still in use: what the memory runs
// and the memory benchmarks weigh a limiter's keys by.
package liveheap

import "runtime"

// Bytes is the heap still in use after two collections (the second takes
// what the first left to finalizers and cleanups).
func Bytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
