// Package leakybucket is the leaky bucket as a meter, in memory, with a
// shaping Wait.
//
// Each key has a bucket of capacity C that starts empty and leaks at R per
// second. A request of cost n at time t first leaks,
//
//	level = max(0, level - R*(t - last)),  last = t
//
// and is admitted when level + n <= C, which then adds n. The state per key
// is the water level and the time of the last leak, kept in integer
// nanoseconds of leaking (one unit of water is T = 1/R rounded to the
// nanosecond).
//
// A limiters.Limit of N per W with a burst of B is C = B (N when B is
// zero) and R = N/W, as for the token bucket.
//
// As a meter (Decide, AllowN) the leaky bucket is the token bucket seen
// from the other side, level = C - tokens: with the same C and R this
// package, tokenbucket and gcra give the same decisions on any trace whose
// times do not go backwards.
// As a shaper (Wait) the bucket is a queue drained at R: Wait admits exactly
// what AllowN would, then holds each request until the water ahead of it has
// drained, so requests leave evenly spaced at the rate R.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t leaves the key e fuller; the time until it is full again is its
// ResetAfter, so it is due full again at due = At + ResetAfter. A refund
// of r units at s gives back what of the reservation's last r units the
// key has not yet drained: min(r*T, due - s) of refill (nothing once due has
// passed), never below empty. A charge of k units at s adds k, above C if need be, past what a
// full quota holds: the key is in debt, and denied until it is paid.
// With the same C and R, settling keeps this package, tokenbucket and gcra
// deciding alike.
//
// Worst case: an empty bucket takes C at once, so any interval of length w
// admits at most C + floor(w*R) of cost. A time earlier than the key's last
// leak is taken as that leak's time: a clock that steps back drains nothing.
//
// Memory: 16 bytes of state plus an 8-byte key hash per key, in a table kept
// between 62% and 87% full: about 28-38 bytes per key. A key is forgotten
// once its bucket is empty again.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package leakybucket

//go:generate go run ../internal/forward

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
	"github.com/ratelab/ratelab/limiters/internal/qdiv"
)

type state struct {
	level int64 // in nanoseconds of leaking: level*T
	last  int64 // Unix nanoseconds of the last leak
}

// idleAt is when the bucket is empty again.
func idleAt(s *state) int64 { return s.last + s.level }

// Limiter is an in-memory leaky bucket over many keys.
type Limiter struct {
	keys   keytable.Keys[state]
	tab    *keytable.Table[state]
	policy *limiters.Policy
	c      int   // C
	t      int64 // T, ns
	ct     int64 // C*T: a full bucket
	byT    qdiv.Divisor
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a limiter giving each key a bucket of b.Capacity, leaking at
// b.Rate per second.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.LeakyBucket); err != nil {
		return nil, fmt.Errorf("leakybucket: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("leakybucket: %w", err)
	}
	c, t := limit.Quota(), int64(limit.Interval())
	l := &Limiter{policy: limiters.NewPolicy(limit), c: c, t: t, ct: int64(c) * t, byT: qdiv.New(t)}
	l.tab = keytable.New(c, l.policy, idleAt, o)
	l.keys = keytable.NewKeys(l, "leakybucket", l.tab, l.peek, l.decide, l.settle)
	return l, nil
}

// Limit returns the limit, named.
func (l *Limiter) Limit() limiters.Limit { return l.policy.Limits[0] }

// Decide reports whether r may happen, and consumes its cost if so. The
// error is non-nil only for r.N < 1.
func (l *Limiter) Decide(ctx context.Context, r limiters.Request) (d limiters.Decision, err error) {
	// The time is read here, not in a helper: a generic method is not
	// inlined, and the call costs a hot decision about 4%.
	var now int64
	if r.At.IsZero() {
		now = l.tab.Now()
	} else {
		now = r.At.UnixNano()
	}
	l.allow(&d, r.Key, now, r.N, math.MaxInt64)
	if r.N < 1 {
		err = l.keys.CostError(r.N)
	}
	return d, err
}

// AllowN is Decide of n events for key now, the clock read once.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (d limiters.Decision, err error) {
	l.allow(&d, key, l.tab.Now(), n, math.MaxInt64)
	if n < 1 {
		err = l.keys.CostError(n)
	}
	return d, err
}

// Wait puts n events for key into the bucket if AllowN would admit them,
// and then waits until the water ahead of them has drained, so that what
// Wait lets through leaves at the rate R.
//
// When the bucket has no room for n, Wait returns at once with a denial
// (Allowed false, RetryAfter until there is room) and a nil error, as AllowN
// would. When there is room but the request's turn would come after ctx's
// deadline, Wait does not queue it: it returns a denial whose RetryAfter is
// when the turn would have come, and an error wrapping
// context.DeadlineExceeded. If ctx ends while the request waits, Wait
// returns ctx's error and the request keeps its place in the bucket (the
// water is not taken back), so the bucket never lets through more than its
// rate.
func (l *Limiter) Wait(ctx context.Context, key string, n int) (limiters.Decision, error) {
	var d limiters.Decision
	if err := ctx.Err(); err != nil {
		return d, err
	}
	if n < 1 {
		return d, fmt.Errorf("leakybucket: %w, got %d", limiters.ErrInvalidCost, n)
	}
	budget := int64(math.MaxInt64)
	if deadline, ok := ctx.Deadline(); ok {
		budget = int64(time.Until(deadline))
	}
	wait := l.allow(&d, key, l.tab.Now(), n, budget)
	switch {
	case !d.Allowed && d.Remaining < n: // no room
		return d, nil
	case !d.Allowed: // room, but not time enough
		d.RetryAfter = time.Duration(wait)
		return d, fmt.Errorf("leakybucket: waiting %v for key %q would pass the context's deadline: %w", time.Duration(wait), key, context.DeadlineExceeded)
	case wait <= 0:
		return d, nil
	}
	timer := time.NewTimer(time.Duration(wait))
	defer timer.Stop()
	select {
	case <-timer.C:
		return d, nil
	case <-ctx.Done():
		return d, ctx.Err()
	}
}

// allow decides n events for key at now into d (through a pointer, see
// gcra's allow for why), admitting them only if the water ahead of them
// drains within budget nanoseconds. It returns how long that water takes
// to drain.
func (l *Limiter) allow(d *limiters.Decision, key string, now int64, n int, budget int64) (wait int64) {
	h := l.tab.Hash(key)
	if n == 1 && l.tab.Denied(d, h, now) {
		return 0
	}
	sh := l.tab.LockHash(h)
	p := sh.Find(h, now)
	s := l.leak(p, now)
	wait = s.last + s.level - now
	fits := n >= 1 && n <= l.c && s.level+int64(n)*l.t <= l.ct
	ok := fits && wait <= budget
	if ok {
		s.level += int64(n) * l.t
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		*p = s
		sh.ForgetDenial(h)
	}
	if !fits && n == 1 {
		// Only a full bucket is a denial worth remembering; a wait
		// refused for its deadline is not.
		l.describe(d, ok, s, now, n)
		sh.CacheDenial(h, now, d)
		sh.Unlock()
		return wait
	}
	sh.Unlock()
	l.describe(d, ok, s, now, n)
	return wait
}

// leak returns the bucket s (nil for a fresh, empty one) leaked down to
// now. A now before the last leak drains nothing.
func (l *Limiter) leak(p *state, now int64) state {
	if p == nil {
		return state{last: now}
	}
	s := *p
	if now > s.last {
		s.level = max(0, s.level-(now-s.last))
		s.last = now
	}
	return s
}

// decide is allow as a meter, returning the decision.
func (l *Limiter) decide(key string, now int64, n int) (d limiters.Decision) {
	l.allow(&d, key, now, n, math.MaxInt64)
	return d
}

// settle gives back refund units and charges charge at now to the state
// p (nil for a key not held), for a reservation decided at at with a
// ResetAfter of resetAfter (see the package doc), and returns the state
// after and whether it changed (see gcra's settle).
func (l *Limiter) settle(p *state, at, resetAfter, now int64, refund, charge int) (state, bool) {
	r := l.leak(p, now)
	level := r.level
	if p != nil && refund > 0 {
		level = max(level-min(keytable.Units(refund, l.t), max(at+resetAfter-r.last, 0)), 0)
	}
	level = min(level+keytable.Units(charge, l.t), keytable.MaxDebt)
	changed := level != r.level
	r.level = level
	return r, changed
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	s := l.leak(p, now)
	l.describe(&d, n >= 1 && n <= l.c && s.level+int64(n)*l.t <= l.ct, s, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, s being the bucket after it.
func (l *Limiter) describe(d *limiters.Decision, ok bool, s state, now int64, n int) {
	d.Allowed = ok
	d.Limit = l.c
	d.Remaining = 0
	if s.level < l.ct {
		d.Remaining = int(l.byT.Div(l.ct - s.level))
	}
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && n <= l.c {
			// s.last >= now: the excess drains from s.last on.
			d.RetryAfter = time.Duration(max(s.last+s.level+int64(n)*l.t-l.ct-now, 0)) // 0 only for a deadline refusal, which Wait fills in
		}
	}
	d.ResetAfter = time.Duration(s.last + s.level - now)
}
