package harness

import (
	"context"
	"runtime"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
	"github.com/ratelab/ratelab/workloads"
)

// MemoryResult is what a memory run measured.
type MemoryResult struct {
	// BytesPerUser is the live heap the limiter holds per key it tracks,
	// after garbage collection, the key's own bytes included when the
	// limiter keeps the key.
	BytesPerUser float64
	// Tracked is how many keys the limiter holds: what it reports, or the
	// number of users when it cannot tell (the peers keep every key).
	Tracked int
}

// MeasureMemory gives a new limiter one request from each of users users,
// keys of 16 bytes allocated afresh for it (so that a limiter that keeps a
// key pays for it, and one that hashes it does not), and measures the live
// heap it then holds. The limit should keep every key from being full again
// while this runs (a window of an hour, say), or a limiter that forgets idle
// keys may be caught forgetting.
func MeasureMemory(ctx context.Context, s Subject, limit limiters.Window, users int) (MemoryResult, error) {
	before := liveHeap()
	l, stop, err := s.New(limit)
	if err != nil {
		return MemoryResult{}, err
	}
	for i := range users {
		if i%4096 == 0 && ctx.Err() != nil {
			stop()
			return MemoryResult{}, ctx.Err()
		}
		if _, err := l.AllowN(ctx, workloads.UserKey(i), 1); err != nil {
			stop()
			return MemoryResult{}, err
		}
	}
	after := liveHeap()
	r := MemoryResult{Tracked: users}
	if m, ok := l.(memory.Limiter); ok {
		r.Tracked = m.Stats().Keys
	}
	runtime.KeepAlive(l)
	stop()
	if r.Tracked > 0 {
		r.BytesPerUser = float64(int64(after)-int64(before)) / float64(r.Tracked)
	}
	return r, nil
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
