package harness

import (
	"context"
	"fmt"
	"runtime"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// memoryMode measures, once, what each subject holds per user at scale:
// the live heap of the process after one decision for each of the many
// users' keys, or what a subject kept in a server weighs itself.
type memoryMode struct{}

func (memoryMode) name() string { return ModeMemory }
func (memoryMode) once() bool   { return true }

func (memoryMode) steps(c Config, subjects []Subject) int { return 4 * len(subjects) }

func (memoryMode) measure(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	var out []results.Run
	for _, s := range subjects {
		weigh := func() (MemoryResult, error) {
			return MeasureMemory(ctx, s, l.c.memoryLimit(), l.c.ManyUsers)
		}
		switch {
		case s.failed() != "":
			out = append(out, skipped(s, "many-users", "", s.failed()))
			continue
		case s.Weigh != nil:
			weigh = func() (MemoryResult, error) { return s.Weigh(ctx, l.c.memoryLimit()) }
		case !s.inProcess():
			continue
		}
		l.p.step(fmt.Sprintf("memory of %s", s.Name), 4)
		m, err := weigh()
		if err != nil {
			return nil, fmt.Errorf("harness: memory of %s: %w", s.Name, err)
		}
		r := run(s, "many-users", ModeMemory)
		r.Users, r.Decisions, r.BytesPerUser, r.Note = m.Users, int64(m.Users), m.BytesPerUser, m.Note
		out = append(out, r)
	}
	return out, nil
}

// MemoryResult is what a memory run measured.
type MemoryResult struct {
	// Users is how many keys the limiter was given; Note, if set, says
	// how it was weighed, where not as the others were.
	Users int
	Note  string
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
func MeasureMemory(ctx context.Context, s Subject, limit limiters.Limit, users int) (MemoryResult, error) {
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
	r := MemoryResult{Users: users, Tracked: users}
	if m, ok := l.(interface{ Stats() limiters.Stats }); ok {
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
