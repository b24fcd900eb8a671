// Package slidingcounter is the sliding window counter, in memory: the
// weighted two-window estimate Cloudflare describes.
//
// Time is cut into windows [kW, (k+1)W) aligned to the Unix epoch, as for
// the fixed window, and each key counts what it spent in the current window
// (curr) and in the one before (prev). The count over the last W is
// estimated by assuming prev was spread evenly over its window: at time t,
// e = t - kW into window k, a request of cost n is admitted when
//
//	prev * (1 - e/W) + curr + n <= N
//
// and then adds n to curr. The estimate is computed exactly, in 128-bit
// integers, as prev*(W-e) + (curr+n)*W <= N*W: no floating-point rounding
// decides a request.
//
// N and W are a limiters.Limit's N and Per; it takes no burst.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t is counted in t's window. A refund of r units at s takes r
// off that window's count while the estimate still uses it (as curr in
// that window, as prev in the next), never below zero; later the window
// weighs nothing and there is nothing to give back. A charge of k units
// at s adds k to curr, past N if need be (at most 2^32-1): the key is in
// debt, denied until the estimate falls back under N, and the debt is
// forgotten with the window, two windows on, as every count is.
//
// Worst case: the estimate is exact when traffic is even and wrong when it
// is not. A client that spends N at the very end of one window sees its
// spend weighted down as the next window goes on; at the midpoint of the next
// window prev counts for N/2, so N/2 more pass, and over the W ending there
// 1.5N were admitted. It never admits 2N in a window as the fixed window
// does. Cloudflare measured 0.003% of requests wrongly allowed or denied on
// real traffic. A time in a window before the key's current one is counted
// at the start of the current one: a clock that steps back mints nothing.
//
// Memory: 16 bytes of state (the window index and two 32-bit counts) plus an
// 8-byte key hash per key, in a table kept between 62% and 87% full: about
// 28-38 bytes per key. A key is forgotten once both its windows have passed.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package slidingcounter

//go:generate go run ../internal/forward

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
	"github.com/ratelab/ratelab/limiters/internal/qdiv"
)

type state struct {
	window     int64  // k: the current window is [k*W, (k+1)*W)
	prev, curr uint32 // spent in windows k-1 and k
}

// Limiter is an in-memory sliding window counter over many keys.
type Limiter struct {
	keys   keytable.Keys[state]
	tab    *keytable.Table[state]
	policy *limiters.Policy
	n      int64 // N
	len    int64 // W, ns
	byW    qdiv.Divisor
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a limiter admitting about w.Limit per sliding w.Length for
// each key.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.SlidingCounter); err != nil {
		return nil, fmt.Errorf("slidingcounter: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("slidingcounter: %w", err)
	}
	l := &Limiter{policy: limiters.NewPolicy(limit), n: int64(limit.N), len: int64(limit.Per), byW: qdiv.New(int64(limit.Per))}
	length := l.len
	// A key is back to full quota when nothing it spent is weighted any
	// more: at the end of the window after its last spending.
	l.tab = keytable.New(limit.N, l.policy, func(s *state) int64 {
		switch {
		case s.curr > 0:
			return (s.window + 2) * length
		case s.prev > 0:
			return (s.window + 1) * length
		}
		return math.MinInt64
	}, o)
	l.keys = keytable.NewKeys(l, "slidingcounter", l.tab, l.peek, l.decide, l.settle)
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
	s, e := l.roll(p, now)
	weighted := l.weighted(s.prev, e)
	ok := n >= 1 && int64(n) <= l.n-int64(s.curr)-weighted
	if ok {
		s.curr += uint32(n)
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		*p = s
		sh.ForgetDenial(h)
	}
	if !ok && n == 1 {
		l.describe(d, ok, s, e, weighted, now, n)
		sh.CacheDenial(h, now, d)
		sh.Unlock()
		return
	}
	sh.Unlock()
	l.describe(d, ok, s, e, weighted, now, n)
}

// roll returns the key's counts moved on to the window of now (or kept in
// its own window, if that is later) and how far into that window now is.
func (l *Limiter) roll(p *state, now int64) (s state, e int64) {
	k := l.byW.Floor(now)
	if p != nil {
		s = *p
	}
	switch {
	case p == nil || k >= s.window+2:
		s = state{window: k}
	case k == s.window+1:
		s = state{window: k, prev: s.curr}
	case k < s.window:
		// The clock stepped back a window or more: decide at the start
		// of the key's window, where prev weighs the most.
		return s, 0
	}
	return s, now - k*l.len
}

// weighted is ceil(prev * (W-e) / W): the previous window's count weighted
// by how much of it the sliding window still covers, rounded up so that the
// admission test on integers is the exact test on reals.
// decide is allow, returning the decision.
func (l *Limiter) decide(key string, now int64, n int) (d limiters.Decision) {
	l.allow(&d, key, now, n)
	return d
}

// settle gives back refund units and charges charge at now to the state
// p (nil for a key not held), for a reservation decided at at (see the
// package doc), and returns the state after and whether it changed (see
// gcra's settle).
func (l *Limiter) settle(p *state, at, _, now int64, refund, charge int) (state, bool) {
	r, _ := l.roll(p, now)
	was := r
	if p != nil && refund > 0 {
		switch l.byW.Floor(at) {
		case r.window:
			r.curr -= uint32(min(int64(refund), int64(r.curr)))
		case r.window - 1:
			r.prev -= uint32(min(int64(refund), int64(r.prev)))
		}
	}
	r.curr = uint32(min(int64(r.curr)+min(int64(charge), math.MaxUint32), math.MaxUint32))
	return r, r != was
}

func (l *Limiter) weighted(prev uint32, e int64) int64 {
	if prev == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(prev), uint64(l.len-e))
	q, r := bits.Div64(hi, lo, uint64(l.len)) // q <= prev: no overflow
	if r != 0 {
		q++
	}
	return int64(q)
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	s, e := l.roll(p, now)
	weighted := l.weighted(s.prev, e)
	l.describe(&d, n >= 1 && int64(n) <= l.n-int64(s.curr)-weighted, s, e, weighted, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now, e
// into the key's window, that was admitted (ok) or not, s being the counts
// after it and weighted the previous window's weighted count.
func (l *Limiter) describe(d *limiters.Decision, ok bool, s state, e, weighted, now int64, n int) {
	start := s.window * l.len
	d.Allowed = ok
	d.Limit = int(l.n)
	d.Remaining = int(max(l.n-int64(s.curr)-weighted, 0))
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && int64(n) <= l.n {
			d.RetryAfter = time.Duration(l.admitAt(s, e, int64(n)) - now)
		}
	}
	switch {
	case s.curr > 0:
		d.ResetAfter = time.Duration(start + 2*l.len - now)
	case s.prev > 0:
		d.ResetAfter = time.Duration(start + l.len - now)
	default:
		d.ResetAfter = 0
	}
}

// admitAt is the earliest time at which a request of cost n (<= N) would be
// admitted, s being the key's counts at offset e into its window.
func (l *Limiter) admitAt(s state, e, n int64) int64 {
	start := s.window * l.len
	// In this window, prev's weight falls as e grows: the request fits
	// once prev*(W-e') <= room*W.
	if room := l.n - int64(s.curr) - n; room >= 0 {
		if e2 := l.fitFrom(int64(s.prev), room); e2 < l.len {
			return start + max(e, e2)
		}
	}
	// In the next window curr becomes prev, with all of N - n as room.
	return start + l.len + l.fitFrom(int64(s.curr), l.n-n)
}

// fitFrom is the smallest offset e into a window at which a previous count
// of prev, weighted by (W-e)/W, leaves room for room: W - floor(room*W/prev),
// or 0 if it fits from the window's start.
func (l *Limiter) fitFrom(prev, room int64) int64 {
	if room >= prev {
		return 0
	}
	hi, lo := bits.Mul64(uint64(room), uint64(l.len))
	q, _ := bits.Div64(hi, lo, uint64(prev)) // room < prev: q < W
	return l.len - int64(q)
}
