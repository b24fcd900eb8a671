// Package gcra is the generic cell rate algorithm, in memory.
//
// A limit of capacity C and rate R per second is kept as the emission
// interval T = 1/R (rounded to the nanosecond) and, per key, one number: the
// theoretical arrival time TAT, the time at which the key would be back to
// full quota. A request of cost n at time t is admitted when
//
//	max(TAT, t) + n*T - t <= C*T
//
// and then TAT becomes max(TAT, t) + n*T. A fresh key has TAT <= t. Nothing
// refills and nothing needs a timer: the distance TAT - t is the debt, and
// it shrinks as t moves on.
//
// GCRA is the token bucket written with one timestamp instead of a token
// count and a refill time: with the same C and R, this package, tokenbucket
// and leakybucket give the same decisions on any trace whose times do not go
// backwards. A time before the latest one seen is decided as given: its
// debt TAT - t is larger, so it is stricter than the buckets, which stand
// still at their last refill; it never mints quota.
//
// A limit of N per W with a burst of B is C = B (N when B is zero) and
// T = W/N: limiters.PerSecond(10) admits 10 at once, then one every 100ms.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t leaves TAT_r = max(TAT, t) + e*T, its At plus its
// ResetAfter. A refund of r units at s gives back what of the
// reservation's last r units the key still owes: TAT decreases by
// min(r*T, TAT_r - s) (nothing once TAT_r has passed) and never below s,
// so it is exactly as if the request had cost r less, for every decision
// after s. A charge of k units at s is TAT = max(TAT, s) + k*T, with no
// cap: past C*T the key is in debt, and denied until it is paid.
//
// Worst case: a key idle long enough may spend C at once, so any interval of
// length w admits at most C + floor(w*R) of cost; there is no window edge to
// exploit.
//
// Memory: 8 bytes of state per key plus an 8-byte key hash, in a table kept
// between 62% and 87% full: about 20-26 bytes per key. Keys are forgotten
// once TAT has passed (their quota is full again).
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New, and Close when done.
package gcra

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
	tat int64 // Unix nanoseconds
}

func idleAt(s *state) int64 { return s.tat }

// Limiter is an in-memory GCRA limiter over many keys.
type Limiter struct {
	keys   keytable.Keys[state]
	tab    *keytable.Table[state]
	policy *limiters.Policy
	c      int   // C
	t      int64 // T, ns
	ct     int64 // C*T, ns
	byT    qdiv.Divisor
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a limiter that holds limit.Quota() for each key, refilled at
// limit.N per limit.Per.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.GCRA); err != nil {
		return nil, fmt.Errorf("gcra: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("gcra: %w", err)
	}
	c, t := limit.Quota(), int64(limit.Interval())
	l := &Limiter{policy: limiters.NewPolicy(limit), c: c, t: t, ct: int64(c) * t, byT: qdiv.New(t)}
	l.tab = keytable.New(c, l.policy, idleAt, o)
	l.keys = keytable.NewKeys(l, "gcra", l.tab, l.peek, l.decide, l.settle)
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

// allow decides n events for key at now into d. The decision is written
// through a pointer, field by field, on purpose: a five-field struct passed
// back by value through each call level costs a store-forwarding stall per
// level, which was a quarter of a decision.
func (l *Limiter) allow(d *limiters.Decision, key string, now int64, n int) {
	h := l.tab.Hash(key)
	if n == 1 && l.tab.Denied(d, h, now) {
		return
	}
	sh := l.tab.LockHash(h)
	p := sh.Find(h, now)
	tat := now
	if p != nil {
		tat = max(p.tat, now)
	}
	ok := l.admits(tat, now, n)
	if ok {
		tat += int64(n) * l.t
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		p.tat = tat
		sh.ForgetDenial(h)
	}
	if !ok && n == 1 {
		l.describe(d, ok, tat, now, n)
		sh.CacheDenial(h, now, d)
		sh.Unlock()
		return
	}
	sh.Unlock()
	l.describe(d, ok, tat, now, n)
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(s *state, now int64, n int) (d limiters.Decision) {
	tat := now
	if s != nil {
		tat = max(s.tat, now)
	}
	l.describe(&d, l.admits(tat, now, n), tat, now, n)
	return d
}

// decide is allow, returning the decision.
func (l *Limiter) decide(key string, now int64, n int) (d limiters.Decision) {
	l.allow(&d, key, now, n)
	return d
}

// settle gives back refund units and charges charge at now to the state
// p (nil for a key not held), for a reservation decided at at with a
// ResetAfter of resetAfter (see the package doc), and returns the state
// after and whether it changed. (A settle that changes nothing leaves the
// key as it was: written at now, it would decide a later call at an
// earlier time differently, and unlike Redis.)
func (l *Limiter) settle(p *state, at, resetAfter, now int64, refund, charge int) (state, bool) {
	was := now
	if p != nil {
		was = max(p.tat, now)
	}
	tat := was
	if p != nil && refund > 0 {
		tat = max(tat-min(keytable.Units(refund, l.t), max(at+resetAfter-now, 0)), now)
	}
	tat = now + min(tat-now+keytable.Units(charge, l.t), keytable.MaxDebt)
	return state{tat: tat}, tat != was
}

// admits reports whether n events fit at now when the TAT, brought up to
// now, is tat.
func (l *Limiter) admits(tat, now int64, n int) bool {
	return n >= 1 && n <= l.c && tat+int64(n)*l.t-now <= l.ct
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, tat being the TAT after it.
func (l *Limiter) describe(d *limiters.Decision, ok bool, tat, now int64, n int) {
	debt := tat - now
	d.Allowed = ok
	d.Limit = l.c
	d.Remaining = 0
	if debt < l.ct {
		d.Remaining = int(l.byT.Div(l.ct - debt))
	}
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && n <= l.c {
			d.RetryAfter = time.Duration(debt + int64(n)*l.t - l.ct)
		}
	}
	d.ResetAfter = time.Duration(debt)
}
