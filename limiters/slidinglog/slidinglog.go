// Package slidinglog is the sliding window log, in memory: the exact limit,
// and the ideal every other algorithm is measured against.
//
// Each key remembers when it was admitted. A request of cost n at time t is
// admitted when what the key was admitted in the last W, plus n, fits:
//
//	sum of costs admitted in (t - W, t]  +  n  <=  N
//
// and is then remembered at t. No interval of length W ever admits more than
// N: there is no edge to exploit and no estimate to be wrong.
//
// N and W are a limiters.Limit's N and Per; it takes no burst.
//
// The state per key is the log of admission times, oldest first, one entry
// per unit of cost (a request of cost 3 is three entries with one time). The
// log is pruned of entries that can never count again, and never holds more
// than N entries. A time earlier than the key's newest entry is taken as
// that entry's time: a clock that steps back mints nothing, and entries it
// would count are never pruned.
//
// Settling (Reserve, then Settle with the actual cost): a reservation of
// cost e at t is e entries at t (at the key's newest entry, if t is
// earlier: its At plus its ResetAfter, less W). A refund of r units at s
// removes r of the entries of that time still in the window, as if the
// request had cost r less; once they have left the window there is
// nothing to give back. A charge of k units at s adds k entries at s,
// past N if need be: the key is in debt, denied until enough have left
// the window. The log still keeps at most N entries, the newest: which
// requests the key is denied, and until when, are the same as with every
// entry kept, since an older entry leaves the window first.
//
// Memory: 8 bytes per remembered unit of cost in a ring of a power-of-two
// size (a key seen once holds exactly one entry), plus 8 bytes for the
// ring's size, plus a 24-byte table slot (hash, ring pointer, head, length)
// in a table kept between 62% and 87% full: about 36-46 bytes per key plus
// the ring's entries. The ring doubles when full, up to what N needs; a key
// is forgotten, and its ring freed, once its newest entry is older than W.
// Deciding costs a binary search of the ring.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package slidinglog

//go:generate go run ../internal/forward

import (
	"context"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
)

// state is a log of admission times in Unix nanoseconds, oldest first, in
// a ring: entry i of n is ring[(head+i) & (cap-1)], with cap a power of two.
// The ring's capacity is kept in the word before it, so that a key costs a
// pointer and two 32-bit counts; a ring never reallocates while the key's
// traffic stays within what it has held before.
type state struct {
	p       *int64 // the capacity word, followed by cap entries
	head, n uint32
}

// ring returns the entries of s's ring, in storage order, and its mask.
func (s *state) ring() ([]int64, int) {
	if s.p == nil {
		return nil, 0
	}
	c := int(*s.p)
	return unsafe.Slice(s.p, c+1)[1:], c - 1
}

// at returns the i-th entry, oldest first.
func at(r []int64, mask int, head uint32, i int) int64 {
	return r[(int(head)+i)&mask]
}

// MaxLimit is the largest limit the sliding log accepts: 2^26 timestamps,
// half a gigabyte for one busy key.
const MaxLimit = 1 << 26

// Limiter is an in-memory sliding window log over many keys.
type Limiter struct {
	keys   keytable.Keys[state]
	tab    *keytable.Table[state]
	policy *limiters.Policy
	n      int64 // N
	len    int64 // W, ns
	// maxRing is the largest ring a key needs: N rounded up to a power
	// of two.
	maxRing int
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a limiter admitting at most w.Limit in any interval of
// w.Length for each key.
func New(limit limiters.Limit, opts ...limiters.Option) (*Limiter, error) {
	if err := limit.Validate(limiters.SlidingLog); err != nil {
		return nil, fmt.Errorf("slidinglog: %w", err)
	}
	o, err := keytable.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("slidinglog: %w", err)
	}
	if limit.N > MaxLimit {
		return nil, fmt.Errorf("slidinglog: %w: the sliding log keeps a timestamp per request, so its limit must be at most %d, got %d", limiters.ErrInvalidParameter, MaxLimit, limit.N)
	}
	l := &Limiter{policy: limiters.NewPolicy(limit), n: int64(limit.N), len: int64(limit.Per), maxRing: 1}
	for l.maxRing < limit.N {
		l.maxRing <<= 1
	}
	length := l.len
	// A key is back to full quota when its newest entry leaves the window.
	l.tab = keytable.New(limit.N, l.policy, func(s *state) int64 {
		if s.n == 0 {
			return math.MinInt64
		}
		r, mask := s.ring()
		return at(r, mask, s.head, int(s.n)-1) + length
	}, o)
	l.keys = keytable.NewKeys(l, "slidinglog", l.tab, l.peek, l.decide, l.settle)
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
	var s state
	if p != nil {
		s = *p
	}
	w := l.window(&s, now)
	ok := n >= 1 && int64(n) <= l.n-int64(w.live)
	if ok {
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		l.record(&s, w, n)
		*p = s
		sh.ForgetDenial(h)
		w = window{at: w.at, first: 0, live: int(s.n)}
	}
	l.describe(d, ok, &s, w, now, n)
	if !ok && n == 1 {
		sh.CacheDenial(h, now, d)
	}
	sh.Unlock()
}

// window is where a decision at some time falls in a key's log.
type window struct {
	at    int64 // the time decided at: now, or the newest entry if later
	first int   // the first entry inside (at - W, at]
	live  int   // entries inside it, from first to the newest
}

// window places a decision at now in s's log.
func (l *Limiter) window(s *state, now int64) window {
	if s.n == 0 {
		return window{at: now}
	}
	r, mask := s.ring()
	w := window{at: max(now, at(r, mask, s.head, int(s.n)-1))}
	// The first entry after at - W: usually the oldest (nothing has
	// expired since the last admission), else by binary search.
	cut := w.at - l.len
	if at(r, mask, s.head, 0) > cut {
		w.live = int(s.n)
		return w
	}
	lo, hi := 1, int(s.n)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if at(r, mask, s.head, mid) > cut {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	w.first, w.live = lo, int(s.n)-lo
	return w
}

// record prunes the entries before w.first, which no later time can count
// (w.at is not before the newest entry), and appends n entries at w.at. The
// ring grows, to a power of two at least twice what it must hold and at
// most what N needs, only when it is full.
func (l *Limiter) record(s *state, w window, n int) {
	s.head += uint32(w.first)
	s.n -= uint32(w.first)
	r, mask := s.ring()
	if need := int(s.n) + n; need > len(r) {
		c := 1
		for c < need {
			c <<= 1
		}
		if len(r) > 0 {
			c = min(2*c, l.maxRing)
		}
		grown := make([]int64, 1+c)
		grown[0] = int64(c)
		for i := range int(s.n) {
			grown[1+i] = at(r, mask, s.head, i)
		}
		s.p, s.head = &grown[0], 0
		r, mask = grown[1:], c-1
	}
	for range n {
		r[(int(s.head)+int(s.n))&mask] = w.at
		s.n++
	}
	s.head &= uint32(mask)
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
// decide is allow, returning the decision.
func (l *Limiter) decide(key string, now int64, n int) (d limiters.Decision) {
	l.allow(&d, key, now, n)
	return d
}

// settle gives back refund units and charges charge at now to the state
// p (nil for a key not held), for a reservation decided at at with a
// ResetAfter of resetAfter (see the package doc), and returns the state
// after and whether to write it: a held key's is always written, pruned,
// as Redis writes it. It writes the ring in place: a settle allocates
// only when a charge grows the ring, as a decision does.
func (l *Limiter) settle(p *state, at, resetAfter, now int64, refund, charge int) (state, bool) {
	var s state
	if p != nil {
		s = *p
	}
	w := l.window(&s, now)
	l.drop(&s, w.first)
	if p != nil && refund > 0 {
		if stamp := at + resetAfter - l.len; stamp > w.at-l.len {
			l.remove(&s, stamp, refund)
		}
	}
	if charge > 0 {
		k := int(min(int64(charge), l.n))
		l.drop(&s, max(int(s.n)+k-int(l.n), 0)) // the oldest: see the package doc
		l.record(&s, window{at: w.at, live: int(s.n)}, k)
	}
	return s, p != nil || charge > 0
}

// drop forgets the oldest k entries of s.
func (l *Limiter) drop(s *state, k int) {
	if k == 0 {
		return
	}
	_, mask := s.ring()
	s.head = (s.head + uint32(k)) & uint32(mask)
	s.n -= uint32(k)
}

// remove takes up to k entries of time stamp out of s.
func (l *Limiter) remove(s *state, stamp int64, k int) {
	r, mask := s.ring()
	n := int(s.n)
	// The entries at stamp are [lo, hi), found by binary search (the log
	// is in time order): a refund costs what a decision does, and the
	// shift of the entries after them.
	first := func(after bool) int {
		lo, hi := 0, n
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if e := at(r, mask, s.head, mid); e > stamp || !after && e == stamp {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo
	}
	lo, hi := first(false), first(true)
	k = min(k, hi-lo)
	for j := hi; j < n; j++ {
		r[(int(s.head)+j-k)&mask] = at(r, mask, s.head, j)
	}
	s.n -= uint32(k)
}

func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	var s state
	if p != nil {
		s = *p
	}
	w := l.window(&s, now)
	l.describe(&d, n >= 1 && int64(n) <= l.n-int64(w.live), &s, w, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, s being the key's log after it and w where now
// falls in it. It reads the log, so it runs under the shard's lock.
func (l *Limiter) describe(d *limiters.Decision, ok bool, s *state, w window, now int64, n int) {
	live := int64(w.live)
	d.Allowed = ok
	d.Limit = int(l.n)
	d.Remaining = int(max(l.n-live, 0))
	d.RetryAfter, d.Policy, d.Denied = 0, l.policy, 0
	d.ResetAfter = 0
	if live == 0 && ok {
		return
	}
	r, mask := s.ring()
	if !ok {
		d.RetryAfter, d.Denied = limiters.Never, keytable.Denied
		if n >= 1 && int64(n) <= l.n {
			// The request fits once the oldest live+n-N entries have
			// left the window.
			leave := at(r, mask, s.head, w.first+int(live+int64(n)-l.n)-1)
			d.RetryAfter = time.Duration(leave + l.len - now)
		}
	}
	if live > 0 {
		d.ResetAfter = time.Duration(at(r, mask, s.head, int(s.n)-1) + l.len - now)
	}
}
