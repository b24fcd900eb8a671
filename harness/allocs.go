package harness

import (
	"context"
	"runtime"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// steadyAllocsAt returns the heap allocations per decision of d, which has
// just decided w once, over a second pass of w: the first pass made the
// keys and grew the tables, so this is what a decision costs in steady
// state. A key idle long enough for the limiter to forget it (many-users'
// rare users) is made again, as it would be in service. The second pass is w shifted
// by whole windows past its end, so that it meets the limiter's windows as
// the first did. The count is the whole process's (runtime.MemStats), and
// when a shard's table grows depends on its random seed, so where keys
// are made again (many-users) it moves a little from run to run: the gate
// allows 5% or 0.001 a decision.
func steadyAllocsAt(w *workloads.Workload, d limiters.Limiter, window time.Duration) float64 {
	if len(w.Arrivals) == 0 {
		return 0
	}
	end := w.Arrivals[len(w.Arrivals)-1].T + window
	shift := (end/window + 1) * window
	keys := keysOf(w)
	return allocsPer(len(w.Arrivals), func() {
		for _, a := range w.Arrivals {
			decideAt(d, keys[a.User], time.Unix(0, int64(a.T+shift)), int(a.N))
		}
	})
}

// steadyAllocs is steadyAllocsAt for a limiter on its own clock: the
// second pass goes as fast as it can.
func steadyAllocs(ctx context.Context, w *workloads.Workload, l limiters.Limiter) (float64, error) {
	keys := keysOf(w)
	var err error
	a := allocsPer(len(w.Arrivals), func() {
		for _, a := range w.Arrivals {
			if _, err = l.AllowN(ctx, keys[a.User], int(a.N)); err != nil {
				return
			}
		}
	})
	return a, err
}

// allocsPer returns the heap allocations f makes, over n.
func allocsPer(n int, f func()) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(max(n, 1))
}
