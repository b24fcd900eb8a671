// Package peers drives the Go rate limiters people use today through the
// limiters.Limiter interface, so that the lab measures them beside ratelab's
// own, in the same run and with the same workloads.
//
// Each adapter does what a typical user of that library does and no more:
// one limiter per key behind a map for x/time/rate, the memory store of
// sethvargo/go-limiter, and throttled's GCRA over its map store. On Redis,
// go-redis/redis_rate (NewRedisRate) is the reference beside ratelab's
// limiters kept there.
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
	// NewAt returns the same deciding at explicit times, for simulated
	// time; nil when the library reads its own clock and takes none
	// (go-limiter).
	NewAt func(w limiters.Window) (AtLimiter, error)
}

// AtLimiter is a peer's limiter deciding at an explicit time. Calls must
// not go back in time by much (the peers do not all handle it) and must
// come from one goroutine (throttled's time is set per call).
type AtLimiter interface {
	AllowAt(key string, t time.Time, n int) limiters.Decision
}

// Limiter is a peer's limiter; Close releases what it runs.
type Limiter interface {
	limiters.Limiter
	Close() error
}

// All returns the peers, in the order tables list them.
func All() []Peer {
	return []Peer{
		{Name: "x/time/rate", Module: "golang.org/x/time v0.16.0", Algorithm: limiters.TokenBucket, New: newXRate,
			NewAt: func(w limiters.Window) (AtLimiter, error) { return nonNil(newXRateAt(w)) }},
		{Name: "go-limiter", Module: "github.com/sethvargo/go-limiter v0.7.1", Algorithm: limiters.FixedWindow, New: newGoLimiter},
		{Name: "throttled", Module: "github.com/throttled/throttled/v2 v2.15.0", Algorithm: limiters.GCRA, New: newThrottled,
			NewAt: func(w limiters.Window) (AtLimiter, error) { return nonNil(newThrottledAt(w)) }},
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
	x, err := newXRateAt(w)
	if err != nil {
		return nil, err
	}
	return x, nil
}

func newXRateAt(w limiters.Window) (*xrate, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &xrate{m: map[string]*rate.Limiter{}, r: rate.Limit(float64(w.Limit) / w.Length.Seconds()), burst: w.Limit}, nil
}

func (x *xrate) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return x.AllowAt(key, time.Now(), n), nil
}

func (x *xrate) AllowAt(key string, t time.Time, n int) limiters.Decision {
	x.mu.Lock()
	l, ok := x.m[key]
	if !ok {
		l = rate.NewLimiter(x.r, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return limiters.Decision{Allowed: l.AllowN(t, n), Limit: x.burst}
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
	now   time.Time // for AllowAt: the store's clock reads it
}

func newThrottled(w limiters.Window) (Limiter, error) {
	t, err := newThrottledStore(w, nil)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func newThrottledAt(w limiters.Window) (*throttledGCRA, error) {
	t := new(throttledGCRA)
	return newThrottledStore(w, t)
}

// newThrottledStore builds throttled's limiter into into (a new one if
// nil); into's store reads into.now as its clock when into was given.
func newThrottledStore(w limiters.Window, into *throttledGCRA) (*throttledGCRA, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	ms, err := memstore.New(0)
	if err != nil {
		return nil, err
	}
	t := into
	if t == nil {
		t = new(throttledGCRA)
	} else {
		ms.SetTimeNow(func() time.Time { return t.now })
	}
	st := throttled.WrapStoreWithContext(ms)
	// throttled counts a burst as the requests beyond the first.
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(w.Limit, w.Length),
		MaxBurst: w.Limit - 1,
	})
	if err != nil {
		return nil, fmt.Errorf("throttled: %w", err)
	}
	t.l, t.limit = l, w.Limit
	return t, nil
}

func (t *throttledGCRA) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	limited, res, err := t.l.RateLimitCtx(ctx, key, n)
	return limiters.Decision{Allowed: !limited, Limit: t.limit, Remaining: max(res.Remaining, 0)}, err
}

// AllowAt decides at t; calls must come from one goroutine.
func (t *throttledGCRA) AllowAt(key string, at time.Time, n int) limiters.Decision {
	t.now = at
	d, _ := t.AllowN(context.Background(), key, n)
	return d
}

func (t *throttledGCRA) Close() error { return nil }

// nonNil returns a nil AtLimiter, not a typed nil, on error.
func nonNil[L AtLimiter](l L, err error) (AtLimiter, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
