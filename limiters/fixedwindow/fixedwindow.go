// Package fixedwindow is the fixed window counter, in memory.
//
// Time is cut into windows [kW, (k+1)W) aligned to the Unix epoch (to time
// zero, for explicit times), and each key counts what it spent in the
// current window. A request of cost n at time t, in window k = floor(t/W),
// is admitted when
//
//	count_k + n <= N
//
// and then adds n to count_k. The state per key is the window index and the
// count; a new window starts the count from zero, or from the debt left
// over (below).
//
// N and W are a limiters.Limit's N and Per (limiters.PerMinute(100) is N =
// 100, W = 1m); it takes no burst.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t is counted in t's window. A refund of r units at s takes r
// off the count if s is still in that window, never below zero; once the
// window has turned, the units are already forgotten and there is nothing
// to give back. A charge of k units at s adds k to the count of s's
// window, past N if need be: the excess is debt, which the next windows
// start from, N a window, so a count of c in window w leaves
// max(0, c - N*j) to window w+j. A count is cut to what the windows of
// 52 days hold (at least N). Without a charge no count passes N and no
// window starts from anything but zero.
//
// Worst case: the windows forget everything at each edge, so a client that
// spends N just before an edge and N just after it gets 2N through in a
// moment (10 requests in 2 seconds against "5 per minute"); any interval of
// length W admits up to 2N. The sliding window algorithms exist to close
// that gap. A time in a window before the key's current one is counted in
// the current one: a clock that steps back does not reopen a window.
//
// Memory: 16 bytes of state plus an 8-byte key hash per key, in a table kept
// between 62% and 87% full: about 28-38 bytes per key. A key is forgotten
// once its window has ended.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package fixedwindow

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
	window int64 // k: the window is [k*W, (k+1)*W)
	count  int64
}

// Limiter is an in-memory fixed window limiter over many keys.
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

// New returns a limiter admitting w.Limit per window of w.Length for each
// key.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.FixedWindow); err != nil {
		return nil, fmt.Errorf("fixedwindow: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("fixedwindow: %w", err)
	}
	l := &Limiter{policy: limiters.NewPolicy(limit), n: int64(limit.N), len: int64(limit.Per), byW: qdiv.New(int64(limit.Per))}
	// A key is back to full quota when its window ends, or the windows
	// its debt runs into.
	l.tab = keytable.New(limit.N, l.policy, func(s *state) int64 {
		if s.count == 0 {
			return math.MinInt64
		}
		return l.edge(s.window, l.windows(s.count))
	}, o)
	l.keys = keytable.NewKeys(l, "fixedwindow", l.tab, l.peek, l.decide, l.settle)
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
	s := l.current(p, now)
	ok := n >= 1 && int64(n) <= l.n-s.count
	if ok {
		s.count += int64(n)
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

// current returns the key's count in the window of now (or in its own
// window, if that is later).
func (l *Limiter) current(p *state, now int64) state {
	k := l.byW.Floor(now)
	if p == nil || p.window < k {
		s := state{window: k}
		if p != nil && p.count > l.n { // debt, left over
			if j := k - p.window; j < l.windows(p.count) {
				s.count = p.count - j*l.n
			}
		}
		return s
	}
	return *p
}

// windows is how many windows a count of c takes to clear, N a window:
// ceil(c/N).
func (l *Limiter) windows(c int64) int64 { return (c + l.n - 1) / l.n }

// edge is the start of window k+j, in Unix nanoseconds, at most the
// latest time there is.
func (l *Limiter) edge(k, j int64) int64 {
	if j > (math.MaxInt64-l.len)/l.len-k {
		return math.MaxInt64
	}
	return (k + j) * l.len
}

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
	c := l.current(p, now)
	count := c.count
	if p != nil && refund > 0 && c.window == l.byW.Floor(at) {
		count = max(count-int64(refund), 0)
	}
	most := l.mostCount()
	count = min(count+min(int64(charge), most), most)
	changed := count != c.count
	c.count = count
	return c, changed
}

// mostCount is the most a count may reach with debt: N a window for as
// many whole windows as keytable.MaxDebt holds (at least one), at most
// MaxDebt units. The windows a debt runs into then end within MaxDebt.
func (l *Limiter) mostCount() int64 {
	k := max(keytable.MaxDebt/l.len, 1)
	if k > keytable.MaxDebt/l.n {
		return keytable.MaxDebt
	}
	return l.n * k
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	s := l.current(p, now)
	l.describe(&d, n >= 1 && int64(n) <= l.n-s.count, s, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, s being the window after it.
func (l *Limiter) describe(d *limiters.Decision, ok bool, s state, now int64, n int) {
	end := (s.window + 1) * l.len
	d.Allowed = ok
	d.Limit = int(l.n)
	d.Remaining = int(max(l.n-s.count, 0)) // in debt, past N
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && int64(n) <= l.n {
			if s.count <= l.n {
				d.RetryAfter = time.Duration(end - now)
			} else { // the window the debt leaves room for n in
				d.RetryAfter = time.Duration(l.edge(s.window, l.windows(s.count+int64(n)-l.n)) - now)
			}
		}
	}
	d.ResetAfter = 0
	if s.count > 0 {
		d.ResetAfter = time.Duration(end - now)
		if s.count > l.n {
			d.ResetAfter = time.Duration(l.edge(s.window, l.windows(s.count)) - now)
		}
	}
}
