package harness

import (
	"context"
	"math"
	"runtime"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// steadyAllocsAt returns the heap allocations per decision of d, which has
// just decided w once, over further passes of w: the first pass made the
// keys and grew the tables, so this is what a decision costs in steady
// state. A key idle long enough for the limiter to forget it (many-users'
// rare users) is made again, as it would be in service. The second pass is w shifted
// by whole windows past its end, so that it meets the limiter's windows as
// the first did. When a shard's table grows depends on its random seed,
// so where keys are made again (many-users) it moves a little from run to
// run: the gate allows 5% or 0.001 a decision.
func steadyAllocsAt(w *workloads.Workload, d limiters.Limiter, window time.Duration) float64 {
	if len(w.Arrivals) == 0 {
		return 0
	}
	end := w.Arrivals[len(w.Arrivals)-1].T + window
	shift := (end/window + 1) * window
	keys := keysOf(w)
	return fewestAllocs(len(w.Arrivals), func(pass int) {
		for _, a := range w.Arrivals {
			decideAt(d, keys[a.User], time.Unix(0, int64(a.T+time.Duration(pass)*shift)), int(a.N))
		}
	})
}

// steadyAllocs is steadyAllocsAt for a limiter on its own clock: the
// second pass goes as fast as it can.
func steadyAllocs(ctx context.Context, w *workloads.Workload, l limiters.Limiter) (float64, error) {
	keys := keysOf(w)
	var err error
	a := fewestAllocs(len(w.Arrivals), func(int) {
		if err != nil {
			return
		}
		for _, a := range w.Arrivals {
			if _, err = l.AllowN(ctx, keys[a.User], int(a.N)); err != nil {
				return
			}
		}
	})
	return a, err
}

// allocPasses is how many times fewestAllocs runs a pass.
const allocPasses = 3

// fewestAllocs returns the fewest heap allocations a pass of f makes
// (passes 1, 2 and 3), over n. The count is the whole process's
// (runtime.MemStats): another goroutine's allocation during a pass (a
// timer, the progress log, the collector's own) adds to it and never
// takes from it, so the fewest is the nearest to the pass's own. With one
// pass, an unchanged tree once read 0.0039 a decision where 0 is right
// (8 allocations among 2,000 decisions), and the gate failed it.
func fewestAllocs(n int, f func(pass int)) float64 {
	fewest := uint64(math.MaxUint64)
	for pass := 1; pass <= allocPasses; pass++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f(pass)
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	return float64(fewest) / float64(max(n, 1))
}
