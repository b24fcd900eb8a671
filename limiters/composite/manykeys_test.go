package composite_test

import (
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

var manyKeys = flag.Int("manykeys", 0, "distinct keys for TestManyKeys (make memcheck: 10,000,000); 0 means make test's 600,000")

// liveHeap is the heap still in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // twice: what earlier tests left to cleanups goes too
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestManyKeys sends one request for each of many distinct keys, 100,000
// new keys a second of simulated time (a million with -manykeys of ten
// million or more, so that a cap of a million binds), through GCRA and the
// sliding log
// (10 in a second), and measures the live heap as the keys pass. A key is
// forgotten once its quota has been full again for a second (as the table
// grows, and at each sweep): with no cap the limiter holds the keys of
// the last few seconds, whatever the keys sent, and with WithMaxKeys no
// more than the cap.
func TestManyKeys(t *testing.T) {
	n := *manyKeys
	if n == 0 {
		n = 600_000
	}
	cap := n / 10
	checkpoints := []int{n / 3, 2 * n / 3, n}
	apart := 10 * time.Microsecond
	if n >= 10_000_000 {
		checkpoints = []int{1_000_000, 5_000_000, 10_000_000}
		cap, apart = 1_000_000, time.Microsecond
	}
	// Without a cap: a second for a key's quota to be full again (the
	// limit's window, or a bucket's refill), a second more before it is
	// forgotten, and the table's growth or the sweep to come round.
	held := int(3 * time.Second / apart)
	for _, a := range []limiters.Algorithm{limiters.GCRA, limiters.SlidingLog} {
		for _, v := range []struct {
			name  string
			opts  []limiters.Option
			sweep bool
		}{
			{"no cap", []limiters.Option{limiters.WithSweepInterval(-1)}, false},
			{"no cap, swept", []limiters.Option{limiters.WithSweepInterval(-1)}, true},
			{fmt.Sprintf("WithMaxKeys(%d)", cap), []limiters.Option{limiters.WithSweepInterval(-1), limiters.WithMaxKeys(cap)}, false},
		} {
			t.Run(string(a)+"/"+v.name, func(t *testing.T) {
				base := liveHeap()
				l, err := composite.New(a, []limiters.Limit{limiters.PerSecond(10)}, v.opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				t0 := time.Unix(1_800_000_000, 0)
				buf := make([]byte, 0, 32)
				next := 0
				var at []float64
				for i := 1; i <= n; i++ {
					buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
					now := t0.Add(time.Duration(i) * apart)
					if d, _ := l.Decide(t.Context(), limiters.Request{Key: string(buf), N: 1, At: now}); !d.Allowed {
						t.Fatalf("key %d, new, denied", i)
					}
					if v.sweep && i%int(time.Second/apart) == 0 { // a sweep a second
						l.Sweep(now)
					}
					if next < len(checkpoints) && i == checkpoints[next] {
						live := float64(liveHeap())
						heap := live - float64(base)
						st := l.Stats()
						at = append(at, live)
						t.Logf("%9d keys sent: %8.1f MB live, %9d held, %6.1f bytes a key sent", i, heap/1e6, st.Keys, heap/float64(i))
						next++
					}
				}
				most := held
				if len(v.opts) == 2 {
					most = cap
				}
				if st := l.Stats(); st.Keys > most {
					t.Errorf("%d keys held after %d sent: want at most %d", st.Keys, n, most)
				}
				// Bounded: the last third of the keys adds nothing live, give
				// or take the collector's slack (4 MB and a twentieth). A leak
				// of 64 bytes a key would add 12.8 MB over 200,000 keys. The
				// whole live heap is compared, not its growth since the start:
				// with the tests shuffled, what an earlier test left may be
				// freed meanwhile, and that growth can be negative.
				if last := at[len(at)-1]; last-at[1] > 4e6+at[1]/20 {
					t.Errorf("live heap grew from %.1f MB to %.1f MB: want it bounded", at[1]/1e6, last/1e6)
				}
			})
		}
	}
}
