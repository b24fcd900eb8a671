// Package tokenbucket is the token bucket, in memory.
//
// Each key has a bucket of capacity C that starts full and refills lazily at
// R tokens per second, never above C. A request of cost n at time t first
// refills,
//
//	tokens = min(C, tokens + R*(t - last)),  last = t
//
// and is admitted when tokens >= n, which then loses n. Nothing runs between
// requests: the refill is computed from the time since the last one.
//
// A limiters.Limit of N per W with a burst of B is C = B (N when B is
// zero) and R = N/W: limiters.Limit{N: 1, Per: time.Second, Burst: 5} is a
// bucket of five refilled at one a second.
//
// The state per key is the token count and the time of the last refill. The
// tokens are kept in integer nanoseconds of refill (one token is T = 1/R
// rounded to the nanosecond), so there is no floating-point drift and the
// arithmetic is exactly that of leakybucket and gcra: with the same C and R
// the three give the same decisions on any trace whose times do not go
// backwards.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t leaves the key with e fewer tokens; the time until it is full again is its
// ResetAfter, so it is due full again at due = At + ResetAfter. A refund
// of r units at s gives back what of the reservation's last r units the
// key has not yet refilled: min(r*T, due - s) of refill (nothing once due has
// passed), never above C. A charge of k units at s takes k tokens, below zero if need be, past what a
// full quota holds: the key is in debt, and denied until it is paid.
// With the same C and R, settling keeps this package, leakybucket and gcra
// deciding alike.
//
// Worst case: a key idle for C/R seconds may spend C at once, so any interval
// of length w admits at most C + floor(w*R) of cost; there is no window edge
// to exploit. A time earlier than the key's last refill is taken as that
// refill's time: a clock that steps back refills nothing.
//
// Memory: 16 bytes of state plus an 8-byte key hash per key, in a table kept
// between 62% and 87% full: about 28-38 bytes per key. A key is forgotten
// once its bucket is full again.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package tokenbucket

//go:generate go run ../internal/forward

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
	"github.com/ratelab/ratelab/limiters/internal/qdiv"
)

type state struct {
	tokens int64 // in nanoseconds of refill: tokens*T
	last   int64 // Unix nanoseconds of the last refill
}

// Limiter is an in-memory token bucket limiter over many keys.
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

// New returns a limiter giving each key a bucket of b.Capacity tokens,
// refilled at b.Rate per second.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.TokenBucket); err != nil {
		return nil, fmt.Errorf("tokenbucket: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("tokenbucket: %w", err)
	}
	c, t := limit.Quota(), int64(limit.Interval())
	ct := int64(c) * t
	l := &Limiter{policy: limiters.NewPolicy(limit), c: c, t: t, ct: ct, byT: qdiv.New(t)}
	// The bucket is full again once the missing tokens have refilled.
	l.tab = keytable.New(c, l.policy, func(s *state) int64 { return s.last + ct - s.tokens }, o)
	l.keys = keytable.NewKeys(l, "tokenbucket", l.tab, l.peek, l.decide, l.settle)
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
	l.allow(&d, r.Key, now, r.N)
	if r.N < 1 {
		err = l.keys.CostError(r.N)
	}
	return d, err
}

// AllowN is Decide of n events for key now, the clock read once.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (d limiters.Decision, err error) {
	l.allow(&d, key, l.tab.Now(), n)
	if n < 1 {
		err = l.keys.CostError(n)
	}
	return d, err
}

// allow decides n events for key at now into d (through a pointer, see
// gcra's allow for why).
func (l *Limiter) allow(d *limiters.Decision, key string, now int64, n int) {
	h := l.tab.Hash(key)
	if n == 1 && l.tab.Denied(d, h, now) {
		return
	}
	sh := l.tab.LockHash(h)
	p := sh.Find(h, now)
	s := l.refill(p, now)
	ok := n >= 1 && n <= l.c && s.tokens >= int64(n)*l.t
	if ok {
		s.tokens -= int64(n) * l.t
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		*p = s
		sh.ForgetDenial(h)
	}
	if !ok && n == 1 {
		l.describe(d, ok, s, now, n)
		sh.CacheDenial(h, now, d)
		sh.Unlock()
		return
	}
	sh.Unlock()
	l.describe(d, ok, s, now, n)
}

// refill returns the bucket s (nil for a fresh, full one) refilled up to
// now. A now before the last refill refills nothing.
func (l *Limiter) refill(p *state, now int64) state {
	if p == nil {
		return state{tokens: l.ct, last: now}
	}
	s := *p
	if now > s.last {
		s.tokens = min(l.ct, s.tokens+(now-s.last))
		s.last = now
	}
	return s
}

// decide is allow, returning the decision.
func (l *Limiter) decide(key string, now int64, n int) (d limiters.Decision) {
	l.allow(&d, key, now, n)
	return d
}

// settle gives back refund units and charges charge at now to the state
// p (nil for a key not held), for a reservation decided at at with a
// ResetAfter of resetAfter (see the package doc), and returns the state
// after and whether it changed (see gcra's settle).
func (l *Limiter) settle(p *state, at, resetAfter, now int64, refund, charge int) (state, bool) {
	r := l.refill(p, now)
	tokens := r.tokens
	if p != nil && refund > 0 {
		tokens = min(tokens+min(keytable.Units(refund, l.t), max(at+resetAfter-r.last, 0)), l.ct)
	}
	tokens = l.ct - min(l.ct-tokens+keytable.Units(charge, l.t), keytable.MaxDebt)
	changed := tokens != r.tokens
	r.tokens = tokens
	return r, changed
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	s := l.refill(p, now)
	l.describe(&d, n >= 1 && n <= l.c && s.tokens >= int64(n)*l.t, s, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, s being the bucket after it.
func (l *Limiter) describe(d *limiters.Decision, ok bool, s state, now int64, n int) {
	d.Allowed = ok
	d.Limit = l.c
	d.Remaining = int(l.byT.Div(max(s.tokens, 0))) // below 0 in debt
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && n <= l.c {
			// s.last >= now: the missing tokens refill from s.last on.
			d.RetryAfter = time.Duration(s.last + int64(n)*l.t - s.tokens - now)
		}
	}
	d.ResetAfter = time.Duration(s.last + l.ct - s.tokens - now)
}
