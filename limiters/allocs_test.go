package limiters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// inMemory is what every in-memory algorithm's Limiter is.
type inMemory interface {
	limiters.Settler
	limiters.Peeker
	Close() error
}

// newAlgorithm returns algorithm a's own limiter, not through a composite.
func newAlgorithm(a limiters.Algorithm, l limiters.Limit, opts ...limiters.Option) (inMemory, error) {
	return composite.NewAlgorithm(a, l, opts...)
}

// The hot path allocates nothing: deciding for a key the limiter holds,
// admitted or denied, at an explicit time or at now, and peeking.
func TestHotPathAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := newAlgorithm(a, limiters.PerSecond(100))
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
					l.Decide(ctx, limiters.Request{Key: k, N: 1, At: now})
				}
				now = now.Add(step)
			}
			i := 0
			admitted := 0
			allow := testing.AllocsPerRun(2000, func() {
				if d, _ := l.Decide(ctx, limiters.Request{Key: keys[i%len(keys)], N: 1, At: now}); d.Allowed {
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
				l.Decide(ctx, limiters.Request{Key: keys[0], N: 200, At: now}) // above the limit
				l.Decide(ctx, limiters.Request{Key: keys[1], N: 100, At: now}) // spent already
			})
			clocked := testing.AllocsPerRun(1000, func() {
				l.AllowN(ctx, keys[2], 1)
				l.Peek(ctx, limiters.Request{Key: keys[3], N: 1})
				l.Peek(ctx, limiters.Request{Key: keys[4], N: 1, At: now})
			})
			// Reserving and settling (a cancel, a refund, nothing to
			// settle) on the keys held, once their rings are as large as
			// they get.
			settle := testing.AllocsPerRun(1000, func() {
				k := keys[5+i%100]
				i++
				for actual := range 3 {
					if r, _ := l.Reserve(ctx, limiters.Request{Key: k, N: 1, At: now}); r.Allowed() {
						l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: actual, At: now})
					}
				}
			})
			if allow != 0 || deny != 0 || clocked != 0 || settle != 0 {
				t.Errorf("allocations per call: admitted %v, denied %v, AllowN/Peek %v, reserve and settle %v; want 0", allow, deny, clocked, settle)
			}
		})
	}
}
