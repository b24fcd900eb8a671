package limiters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// The hot path allocates nothing: deciding for a key the limiter holds,
// admitted or denied, at an explicit time or at now, and peeking.
func TestHotPathAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			s := limiters.Spec{
				Algorithm: a,
				Window:    limiters.Window{Limit: 100, Length: time.Second},
				Bucket:    limiters.Bucket{Capacity: 100, Rate: 100},
			}
			l, err := memory.New(s)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%011d", i)
			}
			// Steady state at exactly the limit's rate: every request is
			// admitted, and the sliding log's ring has reached the size it
			// keeps.
			now := time.Unix(1e9, 0)
			step := time.Second / 100
			for range 300 {
				for _, k := range keys {
					l.AllowAt(k, now, 1)
				}
				now = now.Add(step)
			}
			i := 0
			admitted := 0
			allow := testing.AllocsPerRun(2000, func() {
				if l.AllowAt(keys[i%len(keys)], now, 1).Allowed {
					admitted++
				}
				i++
				if i%len(keys) == 0 {
					now = now.Add(step)
				}
			})
			if admitted == 0 {
				t.Fatalf("fixture: no request admitted in the steady state")
			}
			deny := testing.AllocsPerRun(1000, func() {
				l.AllowAt(keys[0], now, 200) // above the limit
				l.AllowAt(keys[1], now, 100) // spent already
			})
			clocked := testing.AllocsPerRun(1000, func() {
				l.AllowN(ctx, keys[2], 1)
				l.Peek(ctx, keys[3])
				l.PeekAt(keys[4], now)
			})
			// Reserving and settling (a cancel, a refund, nothing to
			// settle) on the keys held, once their rings are as large as
			// they get.
			settle := testing.AllocsPerRun(1000, func() {
				k := keys[5+i%100]
				i++
				for actual := range 3 {
					if r := l.ReserveAt(k, now, 1); r.Allowed {
						l.SettleAt(r, now, actual)
					}
				}
			})
			if allow != 0 || deny != 0 || clocked != 0 || settle != 0 {
				t.Errorf("allocations per call: admitted %v, denied %v, AllowN/Peek/PeekAt %v, reserve and settle %v; want 0", allow, deny, clocked, settle)
			}
		})
	}
}
