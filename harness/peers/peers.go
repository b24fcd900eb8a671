// Package peers drives the Go rate limiters people use today through the
// limiters.Limiter interface, so that the lab measures them beside ratelab's
// own, in the same run and with the same workloads.
//
// Each adapter does what a typical user of that library does and no more:
// one limiter per key behind a map for x/time/rate, the memory store of
// sethvargo/go-limiter, and throttled's GCRA over its map store.
package peers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"golang.org/x/time/rate"
)

// Peer is a library under comparison.
type Peer struct {
	// Name is how tables and benchmarks call it.
	Name string
	// Module is the Go module and version measured.
	Module string
	// Algorithm is what the library does, which is not always what it is
	// called: go-limiter, for one, is a fixed window.
	Algorithm limiters.Algorithm
	// New returns the library's limiter for w: N per W read as a fixed
	// window of N per W, or as a bucket of capacity N refilled over W.
	New func(w limiters.Window) (Limiter, error)
}

// Limiter is a peer's limiter; Close releases what it runs.
type Limiter interface {
	limiters.Limiter
	Close() error
}

// All returns the peers, in the order tables list them.
func All() []Peer {
	return []Peer{
		{Name: "x/time/rate", Module: "golang.org/x/time v0.16.0", Algorithm: limiters.TokenBucket, New: newXRate},
		{Name: "go-limiter", Module: "github.com/sethvargo/go-limiter v0.7.1", Algorithm: limiters.FixedWindow, New: newGoLimiter},
		{Name: "throttled", Module: "github.com/throttled/throttled/v2 v2.15.0", Algorithm: limiters.GCRA, New: newThrottled},
	}
}

// xrate is x/time/rate with one limiter per key in a map behind a mutex.
type xrate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	r     rate.Limit
	burst int
}

func newXRate(w limiters.Window) (Limiter, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &xrate{m: map[string]*rate.Limiter{}, r: rate.Limit(float64(w.Limit) / w.Length.Seconds()), burst: w.Limit}, nil
}

func (x *xrate) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	x.mu.Lock()
	l, ok := x.m[key]
	if !ok {
		l = rate.NewLimiter(x.r, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return limiters.Decision{Allowed: l.AllowN(time.Now(), n), Limit: x.burst}, nil
}

// Len is the number of keys held.
func (x *xrate) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}

func (x *xrate) Close() error { return nil }

// goLimiter is sethvargo/go-limiter's memory store: a fixed window per key,
// anchored at the key's first request. It takes one token a call, whatever
// the cost.
type goLimiter struct {
	s     limiter.Store
	limit int
}

func newGoLimiter(w limiters.Window) (Limiter, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(w.Limit), Interval: w.Length})
	if err != nil {
		return nil, err
	}
	return &goLimiter{s: s, limit: w.Limit}, nil
}

func (g *goLimiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	_, remaining, _, ok, err := g.s.Take(ctx, key)
	return limiters.Decision{Allowed: ok, Limit: g.limit, Remaining: int(min(remaining, math.MaxInt32))}, err
}

func (g *goLimiter) Close() error { return g.s.Close(context.Background()) }

// throttledGCRA is throttled's GCRA over its unbounded map store.
type throttledGCRA struct {
	l     *throttled.GCRARateLimiterCtx
	limit int
}

func newThrottled(w limiters.Window) (Limiter, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	st, err := memstore.NewCtx(0)
	if err != nil {
		return nil, err
	}
	// throttled counts a burst as the requests beyond the first.
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(w.Limit, w.Length),
		MaxBurst: w.Limit - 1,
	})
	if err != nil {
		return nil, fmt.Errorf("throttled: %w", err)
	}
	return &throttledGCRA{l: l, limit: w.Limit}, nil
}

func (t *throttledGCRA) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	limited, res, err := t.l.RateLimitCtx(ctx, key, n)
	return limiters.Decision{Allowed: !limited, Limit: t.limit, Remaining: max(res.Remaining, 0)}, err
}

func (t *throttledGCRA) Close() error { return nil }
