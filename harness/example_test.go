package harness_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
)

// firstHit is a limiter of your own: a fixed window per key that starts at
// the key's first request, as go-limiter's and ulule/limiter's do. It
// decides at the explicit times of its requests (Request.At), so the lab
// measures it in simulated time, exactly.
type firstHit struct {
	w    limiters.Limit
	mu   sync.Mutex
	keys map[string]*window
}

type window struct {
	start time.Time
	count int
}

func (l *firstHit) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	t := r.At
	if t.IsZero() {
		t = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[r.Key]
	if k == nil || !t.Before(k.start.Add(l.w.Per)) {
		if k == nil {
			k = &window{start: t}
			l.keys[r.Key] = k
		}
		for !t.Before(k.start.Add(l.w.Per)) { // the windows since
			k.start = k.start.Add(l.w.Per)
		}
		k.count = 0
	}
	if k.count+r.N > l.w.N {
		return limiters.Decision{Limit: l.w.N}, nil
	}
	k.count += r.N
	return limiters.Decision{Allowed: true, Limit: l.w.N, Remaining: l.w.N - k.count}, nil
}

func (l *firstHit) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return l.Decide(ctx, limiters.Request{Key: key, N: n})
}

// Close has nothing to stop: firstHit runs no goroutine.
func (l *firstHit) Close() error { return nil }

// Your own limiter in the lab, beside ratelab's GCRA: on the boundary
// attack, aimed at the epoch's window edges, it looks exact, since its
// windows start elsewhere; the anchored attack, aimed at each key's own
// window edges, gets twice the limit through it.
func ExampleNewSubject() {
	mine, err := harness.NewSubject("first-hit", func(w limiters.Limit) (limiters.Limiter, error) {
		return &firstHit{w: w, keys: map[string]*window{}}, nil
	})
	if err != nil {
		panic(err)
	}
	f, err := harness.Lab(context.Background(), harness.Config{
		Quick: true, Attackers: 5, Simulated: 10 * time.Second,
		Limiters:  []string{"gcra"},
		Workloads: []string{"boundary-attack", "anchored-attack"},
		Modes:     []string{"simulated"},
		Extra:     []harness.Subject{mine},
	}, nil)
	if err != nil {
		panic(err)
	}
	for _, r := range f.Rows {
		a, _ := r.AccuracyOf()
		fmt.Printf("%-9s %-15s admitted %5d of %5d, false allows %4d, most in any W %.2f\n",
			r.Limiter, r.Workload, a.Admitted, r.Count(results.Decisions), a.FalseAllow, a.MaxWindowRatio)
	}
	// Output:
	// gcra      boundary-attack admitted  4505 of  9000, false allows   45, most in any W 1.01
	// first-hit boundary-attack admitted  4500 of  9000, false allows    0, most in any W 1.00
	// gcra      anchored-attack admitted  2025 of  4005, false allows   20, most in any W 1.01
	// first-hit anchored-attack admitted  4005 of  4005, false allows 2000, most in any W 2.00
}
