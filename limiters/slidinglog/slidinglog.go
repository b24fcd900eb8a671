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
// The state per key is the log of admission times, oldest first, one entry
// per unit of cost (a request of cost 3 is three entries with one time). The
// log is pruned of entries that can never count again, and never holds more
// than N entries. A time earlier than the key's newest entry is taken as
// that entry's time: a clock that steps back mints nothing, and entries it
// would count are never pruned.
//
// Memory: 8 bytes per remembered unit of cost, plus a 24-byte table slot
// (hash, log pointer, length, capacity) in a table kept between 62% and 87%
// full: about 28-38 bytes per key, plus the log. The log grows by doubling up
// to N entries and shrinks when pruned. A key is forgotten once its newest
// entry is older than W. Deciding costs a binary search of the log.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// New.
package slidinglog

import (
	"context"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
)

// state is a log of admission times in Unix nanoseconds, oldest first. It
// is a slice split into a pointer and two 32-bit counts, which saves 8
// bytes per key over a slice header; log and setLog convert.
type state struct {
	p    *int64 // the first entry
	n, c uint32 // entries, and room for entries from p on
}

func (s *state) log() []int64 {
	if s.p == nil {
		return nil
	}
	return unsafe.Slice(s.p, s.c)[:s.n]
}

func (s *state) setLog(log []int64) {
	s.n, s.c = uint32(len(log)), uint32(cap(log))
	s.p = nil
	if cap(log) > 0 {
		s.p = &log[:1][0]
	}
}

// Limiter is an in-memory sliding window log over many keys.
type Limiter struct {
	keytable.Keys[state]
	tab *keytable.Table[state]
	w   limiters.Window
	n   int64 // N
	len int64 // W, ns
}

var (
	_ limiters.AtLimiter  = (*Limiter)(nil)
	_ limiters.Peeker     = (*Limiter)(nil)
	_ limiters.Resetter   = (*Limiter)(nil)
	_ limiters.ResetAller = (*Limiter)(nil)
	_ limiters.Walker     = (*Limiter)(nil)
)

// New returns a limiter admitting at most w.Limit in any interval of
// w.Length for each key.
func New(w limiters.Window, opts ...limiters.Option) (*Limiter, error) {
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("slidinglog: %w", err)
	}
	o, err := limiters.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("slidinglog: %w", err)
	}
	l := &Limiter{w: w, n: int64(w.Limit), len: int64(w.Length)}
	length := l.len
	// A key is back to full quota when its newest entry leaves the window.
	l.tab = keytable.New(func(s *state) int64 {
		if s.n == 0 {
			return math.MinInt64
		}
		return s.log()[s.n-1] + length
	}, o)
	l.Keys = keytable.NewKeys(l.tab, func(s *state, now int64) limiters.Decision {
		return l.peek(s, now, 1)
	})
	return l, nil
}

// Window returns the limiter's parameters.
func (l *Limiter) Window() limiters.Window { return l.w }

// AllowN reports whether n events for key may happen now, and consumes
// them if so. The error is non-nil only for n < 1.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (d limiters.Decision, err error) {
	l.allow(&d, key, l.tab.Now(), n)
	if n < 1 {
		err = fmt.Errorf("slidinglog: %w, got %d", limiters.ErrInvalidCost, n)
	}
	return d, err
}

// AllowAt reports whether n events for key may happen at time t, and
// consumes them if so.
func (l *Limiter) AllowAt(key string, t time.Time, n int) (d limiters.Decision) {
	l.allow(&d, key, t.UnixNano(), n)
	return d
}

// allow decides n events for key at now into d (through a pointer, see
// gcra's allow for why).
func (l *Limiter) allow(d *limiters.Decision, key string, now int64, n int) {
	sh, h := l.tab.Lock(key)
	p := sh.Find(h, now)
	var log []int64
	if p != nil {
		log = p.log()
	}
	at, first := l.window(log, now)
	ok := n >= 1 && int64(n) <= l.n-int64(len(log)-first)
	if ok {
		if p == nil {
			p = l.tab.Insert(sh, h, key)
		}
		log = l.record(log, at, n)
		p.setLog(log)
		first = 0
	}
	sh.Unlock()
	l.describe(d, ok, log, first, now, n)
}

// window returns the time a request at now is decided at (now, or the
// newest entry if later) and the index of the first entry inside the window
// ending then.
func (l *Limiter) window(log []int64, now int64) (at int64, first int) {
	at = now
	if len(log) > 0 {
		at = max(at, log[len(log)-1])
	}
	return at, l.first(log, at)
}

// first is the index of the first entry after at - W, by binary search.
func (l *Limiter) first(log []int64, at int64) int {
	cut := at - l.len
	lo, hi := 0, len(log)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if log[mid] > cut {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// record appends n entries at time at, which is not before the newest,
// after pruning the entries no later time can count (those at or before
// at - W), and returns the new log, all of which is inside the window ending
// at. It reallocates only when the room after the live entries runs out: to
// exactly what is needed the first time (most keys are seen once), then to
// twice what is live, never more than N.
func (l *Limiter) record(log []int64, at int64, n int) []int64 {
	log = log[l.first(log, at):]
	need := len(log) + n
	if need > cap(log) {
		c := need
		if cap(log) > 0 {
			c = min(2*need, int(l.n))
		}
		grown := make([]int64, len(log), c)
		copy(grown, log)
		log = grown
	}
	for range n {
		log = append(log, at)
	}
	return log
}

// peek reports, without consuming, whether n events would be admitted at
// now against s (nil for a fresh key), and the key's state as it stands.
func (l *Limiter) peek(p *state, now int64, n int) (d limiters.Decision) {
	var log []int64
	if p != nil {
		log = p.log()
	}
	_, first := l.window(log, now)
	l.describe(&d, n >= 1 && int64(n) <= l.n-int64(len(log)-first), log, first, now, n)
	return d
}

// describe writes into d the decision for a request of cost n at now that
// was admitted (ok) or not, log being the key's log after it and first the
// index of its first entry inside the window.
func (l *Limiter) describe(d *limiters.Decision, ok bool, log []int64, first int, now int64, n int) {
	live := int64(len(log) - first)
	d.Allowed = ok
	d.Limit = int(l.n)
	d.Remaining = int(max(l.n-live, 0))
	d.RetryAfter = 0
	if !ok {
		d.RetryAfter = limiters.Never
		if n >= 1 && int64(n) <= l.n {
			// The request fits once the oldest live+n-N entries have
			// left the window.
			leave := log[first+int(live+int64(n)-l.n)-1]
			d.RetryAfter = time.Duration(leave + l.len - now)
		}
	}
	d.ResetAfter = 0
	if live > 0 {
		d.ResetAfter = time.Duration(log[len(log)-1] + l.len - now)
	}
}
