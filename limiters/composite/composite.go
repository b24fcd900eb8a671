// Package composite enforces one limit or several on each key, in memory,
// with an algorithm chosen at run time: "10 per second and 100 per minute
// and 1,000 per hour". A request is admitted only when every limit admits
// it, and then it consumes from every limit; a request that any limit
// denies consumes from none, so a client refused by its hourly limit does
// not also spend its per-second quota.
//
// Each limit is kept by an in-memory limiter of the algorithm (any of the
// six). A decision holds one lock for its key (one of 256, by a hash of
// the key) across all its limits: it asks every limit but the last what it
// would decide without consuming (Peek), lets the last decide, and only
// when all admit does it charge the others, so concurrent callers never
// see one limit consumed and another not, and a denial charges none even
// when a key is evicted or swept between the calls. With one limit, a
// decision is that limit's own.
//
// The decision reports the most restrictive limit's quota (the least
// Remaining, and that limit's Limit; of equal Remaining, the smaller
// Limit), the longest RetryAfter (the time when every limit admits the
// request again) and the longest ResetAfter; its Policy names the limits
// and its Denied says which denied.
//
// A reservation (Reserve) is decided all or nothing as any request is;
// settling it (Settle) refunds or charges every limit, each as its
// algorithm's package says, under the key's lock, and reports the
// combined state after. Under several limits a reservation allocates, one
// duration a limit; a plain decision allocates nothing.
//
// Memory: each limit holds the key, so a key costs the sum of its limits'
// (see each algorithm's package). A Limiter is safe for concurrent use;
// the zero value is not usable: call New, and Close when done.
package composite

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/fixedwindow"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
	"github.com/ratelab/ratelab/limiters/internal/reservation"
	"github.com/ratelab/ratelab/limiters/leakybucket"
	"github.com/ratelab/ratelab/limiters/slidingcounter"
	"github.com/ratelab/ratelab/limiters/slidinglog"
	"github.com/ratelab/ratelab/limiters/tokenbucket"
)

// MaxLimits is the most limits one composite takes. (A decision keeps one
// Decision a limit on its stack, and Denials tells eight apart.)
const MaxLimits = 8

// Limiter enforces one or several limits on each key, all or nothing.
type Limiter struct {
	policy *limiters.Policy
	inner  []Algorithm
	clock  limiters.Clock
	// keyNames is whether the limits keep their keys, which Walk needs.
	keyNames bool
	seed     maphash.Seed
	locks    [256]struct {
		sync.Mutex
		_ [56]byte // one lock a cache line: neighbours do not contend
	}
}

// Algorithm is what every in-memory algorithm's Limiter is (gcra.Limiter,
// tokenbucket.Limiter and the others).
type Algorithm interface {
	limiters.Settler
	limiters.Peeker
	limiters.Resetter
	limiters.Walker
	Stats() limiters.Stats
	Sweep(t time.Time)
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a limiter that enforces every one of limits, with algorithm
// a, on each key. A limit with a burst needs a bucket algorithm. The
// options apply to each limit's limiter; WithClock also sets the time a
// request without one is decided at.
func New(a limiters.Algorithm, limits []limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := Check(a, limits); err != nil {
		return nil, err
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("composite: %w", err)
	}
	l := &Limiter{policy: limiters.NewPolicy(limits...), clock: o.Clock, keyNames: o.KeepKeyNames, seed: maphash.MakeSeed()}
	for i, lim := range l.policy.Limits {
		in, err := NewAlgorithm(a, lim, opts...)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("composite: limit %d (%s): %w", i+1, lim.Name, err)
		}
		l.inner = append(l.inner, in)
	}
	return l, nil
}

// NewAlgorithm returns algorithm a's own in-memory limiter of limit
// (gcra.New for GCRA, and so on), unwrapped: what New combines, for one
// who picks the algorithm at run time but wants no composite around it.
func NewAlgorithm(a limiters.Algorithm, limit limiters.Limit, opts ...limiters.Option) (Algorithm, error) {
	switch a {
	case limiters.FixedWindow:
		return checked(fixedwindow.New(limit, opts...))
	case limiters.SlidingLog:
		return checked(slidinglog.New(limit, opts...))
	case limiters.SlidingCounter:
		return checked(slidingcounter.New(limit, opts...))
	case limiters.TokenBucket:
		return checked(tokenbucket.New(limit, opts...))
	case limiters.LeakyBucket:
		return checked(leakybucket.New(limit, opts...))
	case limiters.GCRA:
		return checked(gcra.New(limit, opts...))
	}
	_, err := limiters.ParseAlgorithm(string(a))
	return nil, err
}

// checked returns a nil algorithm, not a typed nil, on error.
func checked[L Algorithm](l L, err error) (Algorithm, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Check reports what New would refuse in limits for algorithm a, without
// making anything: their number, a name given twice, a limit a cannot
// enforce.
func Check(a limiters.Algorithm, limits []limiters.Limit) error {
	if _, err := limiters.ParseAlgorithm(string(a)); err != nil {
		return fmt.Errorf("composite: %w", err)
	}
	if len(limits) == 0 || len(limits) > MaxLimits {
		return fmt.Errorf("composite: %w: want 1 to %d limits, got %d", limiters.ErrInvalidParameter, MaxLimits, len(limits))
	}
	seen := map[string]int{}
	for i, lim := range limits {
		lim = lim.Named()
		if j, dup := seen[lim.Name]; dup {
			return fmt.Errorf("composite: %w: limits %d and %d are both named %q", limiters.ErrInvalidParameter, j+1, i+1, lim.Name)
		}
		seen[lim.Name] = i
		if err := lim.Validate(a); err != nil {
			return fmt.Errorf("composite: limit %d (%s): %v for %s: %w", i+1, lim.Name, lim, a, err)
		}
	}
	return nil
}

// Limits returns the limits, named (a copy).
func (l *Limiter) Limits() []limiters.Limit { return slices.Clone(l.policy.Limits) }

func (l *Limiter) lock(key string) *sync.Mutex {
	return &l.locks[maphash.String(l.seed, key)%uint64(len(l.locks))].Mutex
}

// at returns the time to decide r at: r.At, or the clock's now.
func (l *Limiter) at(t time.Time) time.Time {
	switch {
	case !t.IsZero():
		return t
	case l.clock != nil:
		return l.clock.Now()
	}
	return time.Now()
}

// AllowN is Decide of n events for key now.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return l.Decide(ctx, limiters.Request{Key: key, N: n})
}

// Decide reports whether r may happen under every limit, and consumes its
// cost from each if so. The error is non-nil only for r.N < 1.
func (l *Limiter) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if len(l.inner) == 1 { // one limit decides alone, under its own locks
		return l.inner[0].Decide(ctx, r)
	}
	return l.decide(ctx, r, nil)
}

// decide decides r under every limit and, when each has room for one
// Decision a limit, fills it with what each limit decided: for an admitted
// request, its quota after it; for a denied one, a denying limit's denial
// of it and a non-denying limit's state (Allowed, nothing consumed).
func (l *Limiter) decide(ctx context.Context, r limiters.Request, each []limiters.Decision) (limiters.Decision, error) {
	r.At = l.at(r.At)
	if r.N < 1 {
		d, _ := l.Peek(ctx, limiters.Request{Key: r.Key, N: 1, At: r.At})
		d.Allowed, d.RetryAfter, d.Denied = false, limiters.Never, 0
		return d, fmt.Errorf("composite: %w, got %d", limiters.ErrInvalidCost, r.N)
	}
	var buf [MaxLimits]limiters.Decision
	per := buf[:len(l.inner)]
	mu := l.lock(r.Key)
	mu.Lock()
	// Every limit but the last says, without consuming, what it would
	// decide; if all would admit, the last decides for real, and only if
	// it admits are the others charged. A denial charges none.
	last := len(l.inner) - 1
	admit := true
	for i, in := range l.inner[:last] {
		per[i], _ = in.Peek(ctx, r)
		admit = admit && per[i].Allowed
	}
	if admit {
		per[last], _ = l.inner[last].Decide(ctx, r)
		if admit = per[last].Allowed; admit {
			for i, in := range l.inner[:last] {
				per[i], _ = in.Decide(ctx, r)
			}
		}
	} else {
		per[last], _ = l.inner[last].Peek(ctx, r)
	}
	mu.Unlock()
	copy(each, per)
	return l.combine(per, admit), nil
}

// combine makes one decision of the limits' decisions.
func (l *Limiter) combine(per []limiters.Decision, admit bool) limiters.Decision {
	d := per[0]
	d.Allowed, d.Policy, d.Denied = admit, l.policy, 0
	by := -1
	for i, p := range per {
		if p.Remaining < d.Remaining || p.Remaining == d.Remaining && p.Limit < d.Limit {
			d.Remaining, d.Limit = p.Remaining, p.Limit
		}
		if !admit && !p.Allowed && (by < 0 || p.RetryAfter > d.RetryAfter) {
			d.RetryAfter, by = p.RetryAfter, i
		}
		d.ResetAfter = max(d.ResetAfter, p.ResetAfter)
	}
	if admit {
		d.RetryAfter = 0
		return d
	}
	for i, p := range per {
		if !p.Allowed {
			d.Denied = d.Denied.Deny(i, i == by)
		}
	}
	return d
}

// Reserve decides r under every limit, as Decide does, and returns the
// reservation to settle. The error is non-nil only for r.N < 1.
func (l *Limiter) Reserve(ctx context.Context, r limiters.Request) (limiters.Reservation, error) {
	if len(l.inner) == 1 {
		return l.inner[0].Reserve(ctx, r)
	}
	r.At = l.at(r.At)
	each := make([]limiters.Decision, len(l.inner))
	d, err := l.decide(ctx, r, each)
	f := reservation.Fields[limiters.Decision]{Owner: l, Key: r.Key, At: r.At.UnixNano(), Cost: r.N, Decision: d}
	if err != nil {
		f.Cost = 0
	}
	f.Resets = make([]time.Duration, len(each))
	for i, e := range each {
		f.Resets[i] = e.ResetAfter
	}
	return reservation.Make[limiters.Reservation](f), err
}

// Settle settles a reservation at its actual cost under every limit, and
// returns the key's state after, combined.
func (l *Limiter) Settle(ctx context.Context, s limiters.Settlement) (limiters.Decision, error) {
	if len(l.inner) == 1 {
		return l.inner[0].Settle(ctx, s)
	}
	r := reservation.Get[limiters.Reservation, limiters.Decision](s.Reservation)
	if _, _, err := keytable.Settlement(r, l, s.Actual); err != nil {
		return limiters.Decision{}, fmt.Errorf("composite: %w", err)
	}
	s.At = l.at(s.At)
	var per [MaxLimits]limiters.Decision
	admit := true
	mu := l.lock(r.Key)
	mu.Lock()
	defer mu.Unlock()
	for i, in := range l.inner {
		each := reservation.Make[limiters.Reservation](reservation.Fields[limiters.Decision]{
			Owner: in, Key: r.Key, At: r.At, Cost: r.Cost,
			Decision: limiters.Decision{Allowed: true, ResetAfter: r.Resets[i]},
		})
		d, err := in.Settle(ctx, limiters.Settlement{Reservation: each, Actual: s.Actual, At: s.At})
		if err != nil { // each limit admitted it: only a malformed reservation says otherwise
			return limiters.Decision{}, fmt.Errorf("composite: limit %s: %w", l.policy.Limits[i].Name, err)
		}
		per[i] = d
		admit = admit && d.Allowed
	}
	return l.combine(per[:len(l.inner)], admit), nil
}

// Peek reports what Decide(ctx, r) would decide under every limit,
// consuming nothing, combined as a decision is. The error is non-nil only
// for r.N < 1.
func (l *Limiter) Peek(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if len(l.inner) == 1 {
		return l.inner[0].Peek(ctx, r)
	}
	r.At = l.at(r.At)
	var per [MaxLimits]limiters.Decision
	admit := true
	var err error
	mu := l.lock(r.Key)
	mu.Lock()
	for i, in := range l.inner {
		per[i], err = in.Peek(ctx, r)
		admit = admit && per[i].Allowed
	}
	mu.Unlock()
	if err != nil {
		err = fmt.Errorf("composite: %w, got %d", limiters.ErrInvalidCost, r.N)
	}
	return l.combine(per[:len(l.inner)], admit), err
}

// Reset forgets key under every limit.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	mu := l.lock(key)
	mu.Lock()
	defer mu.Unlock()
	for _, in := range l.inner {
		if err := in.Reset(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// ResetAll forgets every key under every limit.
func (l *Limiter) ResetAll(ctx context.Context) error {
	for i := range l.locks {
		l.locks[i].Lock()
	}
	defer func() {
		for i := range l.locks {
			l.locks[i].Unlock()
		}
	}()
	for _, in := range l.inner {
		if err := in.ResetAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Walk calls fn with each key any limit holds and what a Peek of one unit
// reports for it, until fn returns false. Under several limits it needs
// the limiter made WithKeyNames: the limits keep only hashes otherwise,
// and Walk says so.
func (l *Limiter) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	if len(l.inner) == 1 {
		return l.inner[0].Walk(ctx, fn)
	}
	if !l.keyNames {
		return fmt.Errorf("composite: Walk needs the keys: make the limiter WithKeyNames")
	}
	now := l.at(time.Time{})
	seen := map[string]bool{}
	for _, in := range l.inner {
		var keys []string
		err := in.Walk(ctx, func(key string, _ limiters.Decision) bool {
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
			return true
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, _ := l.Peek(ctx, limiters.Request{Key: k, N: 1, At: now})
			if !fn(k, d) {
				return nil
			}
		}
	}
	return nil
}

// Stats reports what the limits hold, added up.
func (l *Limiter) Stats() limiters.Stats {
	var st limiters.Stats
	for _, in := range l.inner {
		s := in.Stats()
		st.Keys += s.Keys
		st.Slots += s.Slots
		st.Evicted += s.Evicted
	}
	return st
}

// Sweep forgets, under every limit, the keys whose quota has been full
// again, as of t, for at least a second.
func (l *Limiter) Sweep(t time.Time) {
	for _, in := range l.inner {
		in.Sweep(t)
	}
}

// Close stops every limit's background sweeper.
func (l *Limiter) Close() error {
	for _, in := range l.inner {
		in.Close()
	}
	return nil
}
