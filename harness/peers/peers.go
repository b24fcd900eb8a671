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
	// New returns the library's limiter for l: N per W read as a fixed
	// window of N per W, or as a bucket of capacity N refilled over W. It
	// decides at its own clock: a request with an explicit time is an
	// error.
	New func(l limiters.Limit) (limiters.Limiter, error)
	// NewAt returns the same deciding at the explicit times of its
	// requests, for simulated time; nil when the library reads its own
	// clock and takes none (go-limiter). Requests must not go back in time
	// by much (the peers do not all handle it) and must come from one
	// goroutine (throttled's time is set per call).
	NewAt func(l limiters.Limit) (limiters.Limiter, error)
}

// errOwnClock is what a peer that reads its own clock says of a request at
// an explicit time.
func errOwnClock(name string) error {
	return fmt.Errorf("%s: %w: it decides at its own clock and takes no explicit time", name, limiters.ErrInvalidParameter)
}

// All returns the peers, in the order tables list them.
func All() []Peer {
	return []Peer{
		{Name: "x/time/rate", Module: "golang.org/x/time v0.16.0", Algorithm: limiters.TokenBucket, New: newXRate,
			NewAt: func(l limiters.Limit) (limiters.Limiter, error) { return nonNil(newXRateAt(l, true)) }},
		{Name: "go-limiter", Module: "github.com/sethvargo/go-limiter v0.7.1", Algorithm: limiters.FixedWindow, New: newGoLimiter},
		{Name: "throttled", Module: "github.com/throttled/throttled/v2 v2.15.0", Algorithm: limiters.GCRA, New: newThrottled,
			NewAt: func(l limiters.Limit) (limiters.Limiter, error) { return nonNil(newThrottledAt(l)) }},
	}
}

// xrate is x/time/rate with one limiter per key in a map behind a mutex.
type xrate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	r     rate.Limit
	burst int
	at    bool // decides at the requests' explicit times
}

func newXRate(l limiters.Limit) (limiters.Limiter, error) {
	x, err := newXRateAt(l, false)
	if err != nil {
		return nil, err
	}
	return x, nil
}

func newXRateAt(l limiters.Limit, at bool) (*xrate, error) {
	if err := l.Validate(limiters.TokenBucket); err != nil {
		return nil, err
	}
	return &xrate{m: map[string]*rate.Limiter{}, r: rate.Limit(float64(l.N) / l.Per.Seconds()), burst: l.Quota(), at: at}, nil
}

func (x *xrate) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return x.Decide(ctx, limiters.Request{Key: key, N: n})
}

func (x *xrate) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	t := r.At
	switch {
	case t.IsZero():
		t = time.Now()
	case !x.at:
		return limiters.Decision{Limit: x.burst}, errOwnClock("x/time/rate")
	}
	x.mu.Lock()
	l, ok := x.m[r.Key]
	if !ok {
		l = rate.NewLimiter(x.r, x.burst)
		x.m[r.Key] = l
	}
	x.mu.Unlock()
	return limiters.Decision{Allowed: l.AllowN(t, r.N), Limit: x.burst}, nil
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

func newGoLimiter(l limiters.Limit) (limiters.Limiter, error) {
	if err := l.Validate(limiters.FixedWindow); err != nil {
		return nil, err
	}
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.N), Interval: l.Per})
	if err != nil {
		return nil, err
	}
	return &goLimiter{s: s, limit: l.N}, nil
}

func (g *goLimiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return g.Decide(ctx, limiters.Request{Key: key, N: n})
}

func (g *goLimiter) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if !r.At.IsZero() {
		return limiters.Decision{Limit: g.limit}, errOwnClock("go-limiter")
	}
	_, remaining, _, ok, err := g.s.Take(ctx, r.Key)
	return limiters.Decision{Allowed: ok, Limit: g.limit, Remaining: int(min(remaining, math.MaxInt32))}, err
}

func (g *goLimiter) Close() error { return g.s.Close(context.Background()) }

// throttledGCRA is throttled's GCRA over its unbounded map store.
type throttledGCRA struct {
	l     *throttled.GCRARateLimiterCtx
	limit int
	at    bool      // decides at the requests' explicit times
	now   time.Time // then: the store's clock reads it
}

func newThrottled(l limiters.Limit) (limiters.Limiter, error) {
	t, err := newThrottledStore(l, nil)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func newThrottledAt(l limiters.Limit) (*throttledGCRA, error) {
	t := &throttledGCRA{at: true}
	return newThrottledStore(l, t)
}

// newThrottledStore builds throttled's limiter into into (a new one if
// nil); into's store reads into.now as its clock when into was given.
func newThrottledStore(lim limiters.Limit, into *throttledGCRA) (*throttledGCRA, error) {
	if err := lim.Validate(limiters.GCRA); err != nil {
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
		MaxRate:  throttled.PerDuration(lim.N, lim.Per),
		MaxBurst: lim.Quota() - 1,
	})
	if err != nil {
		return nil, fmt.Errorf("throttled: %w", err)
	}
	t.l, t.limit = l, lim.Quota()
	return t, nil
}

func (t *throttledGCRA) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return t.Decide(ctx, limiters.Request{Key: key, N: n})
}

// Decide decides r; made by NewAt, at r.At, and calls must then come from
// one goroutine.
func (t *throttledGCRA) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	switch {
	case t.at:
		t.now = r.At
	case !r.At.IsZero():
		return limiters.Decision{Limit: t.limit}, errOwnClock("throttled")
	}
	limited, res, err := t.l.RateLimitCtx(ctx, r.Key, r.N)
	return limiters.Decision{Allowed: !limited, Limit: t.limit, Remaining: max(res.Remaining, 0)}, err
}

func (t *throttledGCRA) Close() error { return nil }

// nonNil returns a nil limiters.Limiter, not a typed nil, on error.
func nonNil[L limiters.Limiter](l L, err error) (limiters.Limiter, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
