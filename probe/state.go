package probe

import (
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// state is one key's state under a model, at times in Unix nanoseconds
// (the epoch is where the aligned windows start). admits reports whether
// n units would be admitted at t; for every model it is monotone in t for
// a given state (waiting never turns an admission into a refusal), which
// is what lets the fit look for an instant in an interval by bisection.
// admit records n admitted at t whatever the model would decide, and
// refuse a refusal.
type state interface {
	admits(t int64, n int) bool
	admit(t int64, n int)
	refuse(t int64, n int)
	clone() state
}

// newState returns a fresh key's state under m.
func (m model) newState() state {
	if o, ok := m.second(); ok {
		return &both{m.first().newState(), o.newState()}
	}
	n, per := int64(m.Limit.N), int64(m.Limit.Per)
	var st state
	switch {
	case m.Algorithm.IsBucket() && m.Nginx:
		st = &nginxBucket{rate: n * 1000 * int64(time.Second) / per, most: int64(m.Limit.Quota()-1) * 1000, fresh: true}
	case m.Algorithm.IsBucket():
		t := int64(m.Limit.Interval())
		st = &bucket{t: t, ct: int64(m.Limit.Quota()) * t, c: m.Limit.Quota(), tat: math.MinInt64, counts: m.CountsRefused}
	case m.Algorithm == limiters.FixedWindow:
		st = &fixed{n: n, per: per, phase: int64(m.Phase), anchored: m.Anchored, restarts: m.Restarts}
	case m.Algorithm == limiters.SlidingLog:
		st = &slidingLog{n: int(n), per: per, counts: m.CountsRefused}
	case m.Algorithm == limiters.SlidingCounter:
		st = &counter{n: n, per: per, phase: int64(m.Phase), anchored: m.Anchored, counts: m.CountsRefused, rounding: m.Rounding}
	default:
		panic("probe: no model of " + string(m.Algorithm))
	}
	if m.Seconds {
		return inSeconds{st}
	}
	return st
}

// both is a key's state under two limits at once: admitted only if both
// admit, recorded in both; a refusal is each one's to count.
type both struct{ a, b state }

func (s *both) admits(t int64, n int) bool { return s.a.admits(t, n) && s.b.admits(t, n) }
func (s *both) admit(t int64, n int)       { s.a.admit(t, n); s.b.admit(t, n) }
func (s *both) refuse(t int64, n int)      { s.a.refuse(t, n); s.b.refuse(t, n) }
func (s *both) clone() state               { return &both{s.a.clone(), s.b.clone()} }

// inSeconds is a state that reads the clock in whole seconds.
type inSeconds struct{ state }

func whole(t int64) int64 { return floorDiv(t, int64(time.Second)) * int64(time.Second) }

func (s inSeconds) admits(t int64, n int) bool { return s.state.admits(whole(t), n) }
func (s inSeconds) admit(t int64, n int)       { s.state.admit(whole(t), n) }
func (s inSeconds) refuse(t int64, n int)      { s.state.refuse(whole(t), n) }
func (s inSeconds) clone() state               { return inSeconds{s.state.clone()} }

// bucket is GCRA: a theoretical arrival time, admitting n at t while
// max(tat, t) + n·T − t ≤ C·T.
type bucket struct {
	t, ct  int64
	c      int
	tat    int64
	counts bool
}

func (b *bucket) admits(t int64, n int) bool {
	return n <= b.c && max(b.tat, t)+int64(n)*b.t-t <= b.ct
}

func (b *bucket) admit(t int64, n int) { b.tat = max(b.tat, t) + int64(n)*b.t }

func (b *bucket) clone() state { c := *b; return &c }

func (b *bucket) refuse(t int64, n int) {
	if b.counts {
		b.admit(t, n)
	}
}

// nginxBucket is limit_req's bucket: excess, the requests queued beyond
// the one admitted, in thousandths; last, the millisecond of the last
// admission. A request at millisecond ms makes it max(excess −
// rate·(ms−last)/1000 + 1000, 0), rounded down, and is admitted while
// that is at most most (burst=, a thousand each); a key's first request
// leaves it 0, so a fresh key gets burst+1 at once. A refusal changes
// nothing.
type nginxBucket struct {
	rate, most   int64
	excess, last int64
	fresh        bool
}

// next is the excess a request at t (ns) would leave, with n−1 more.
func (b *nginxBucket) next(t int64, n int) (excess, ms int64) {
	ms = floorDiv(t, int64(time.Millisecond))
	if b.fresh {
		return int64(n-1) * 1000, ms
	}
	d := max(ms-b.last, 0)
	return max(b.excess-b.rate*d/1000+1000, 0) + int64(n-1)*1000, ms
}

func (b *nginxBucket) admits(t int64, n int) bool {
	e, _ := b.next(t, n)
	return e <= b.most
}

func (b *nginxBucket) admit(t int64, n int) {
	b.excess, b.last = b.next(t, n)
	b.fresh = false
}

func (b *nginxBucket) refuse(int64, int) {}

func (b *nginxBucket) clone() state { c := *b; return &c }

// fixed is the fixed window: N per window, the windows aligned on the
// epoch or starting at the key's first request after the last ended. It
// keeps every window's count, not only the newest's: the fit records a
// decision at an instant it chooses, and a later one may land in an
// earlier window.
type fixed struct {
	n, per, phase      int64
	anchored, restarts bool
	windows            []window // in order of start
}

// window is a window's start and count.
type window struct{ start, count int64 }

// lookup returns the index of the window starting at start in ws (in
// order of start), and whether there is one; if not, the index one would
// take. It looks from the newest: a key's decisions come mostly in order.
func lookup(ws []window, start int64) (int, bool) {
	for i := len(ws) - 1; i >= 0; i-- {
		switch {
		case ws[i].start == start:
			return i, true
		case ws[i].start < start:
			return i + 1, false
		}
	}
	return 0, false
}

// find returns the index of the window t falls in, and whether there is
// one; if not, the index a window starting at t would take.
func (f *fixed) find(t int64) (int, bool) {
	if !f.anchored {
		return lookup(f.windows, onGrid(t, f.per, f.phase))
	}
	// The last window starting at or before t, if t is inside it.
	i := len(f.windows)
	for i > 0 && f.windows[i-1].start > t {
		i--
	}
	if i > 0 && t < f.windows[i-1].start+f.per {
		return i - 1, true
	}
	return i, false
}

func (f *fixed) admits(t int64, n int) bool {
	if i, ok := f.find(t); ok {
		return f.windows[i].count+int64(n) <= f.n
	}
	return int64(n) <= f.n
}

func (f *fixed) admit(t int64, n int) {
	i, ok := f.find(t)
	switch {
	case ok:
	case f.anchored && i < len(f.windows) && f.windows[i].start < t+f.per:
		// Recorded before the window that follows began, and within a
		// window of it: that window began here.
		f.windows[i].start = t
	case f.anchored:
		f.windows = slices.Insert(f.windows, i, window{start: t})
	default:
		f.windows = slices.Insert(f.windows, i, window{start: onGrid(t, f.per, f.phase)})
	}
	f.windows[i].count += int64(n)
}

func (f *fixed) clone() state { c := *f; c.windows = slices.Clone(f.windows); return &c }

// refuse restarts the window t falls in, if the model restarts: from t,
// with the refusal counted, so that the key stays refused until it has
// been quiet for a window. (A refusal counted in a fixed window that does
// not restart changes nothing the probe can see.)
func (f *fixed) refuse(t int64, n int) {
	if !f.restarts {
		return
	}
	i, ok := f.find(t)
	if !ok {
		f.windows = slices.Insert(f.windows, i, window{start: t})
	}
	f.windows[i].count += int64(n)
	f.windows[i].start = max(f.windows[i].start, t)
	if i+1 < len(f.windows) && f.windows[i+1].start < t+f.per {
		f.windows = slices.Delete(f.windows, i+1, i+2) // overlapped by the restarted one
	}
}

// slidingLog admits n at t while fewer than N−n+1 of the units it
// recorded are younger than Per.
type slidingLog struct {
	n      int
	per    int64
	counts bool
	at     []int64 // one entry a unit, in time order
}

func (l *slidingLog) live(t int64) int {
	i, _ := slices.BinarySearch(l.at, t-l.per+1)
	return len(l.at) - i
}

func (l *slidingLog) admits(t int64, n int) bool { return l.live(t)+n <= l.n }

func (l *slidingLog) admit(t int64, n int) {
	if len(l.at) == 0 || l.at[len(l.at)-1] <= t {
		for range n {
			l.at = append(l.at, t)
		}
		return
	}
	i, _ := slices.BinarySearch(l.at, t+1)
	for range n {
		l.at = slices.Insert(l.at, i, t)
	}
}

func (l *slidingLog) clone() state { c := *l; c.at = slices.Clone(l.at); return &c }

func (l *slidingLog) refuse(t int64, n int) {
	if l.counts {
		l.admit(t, n)
	}
}

// counter is the sliding window counter: the current window's count and
// the previous one's, weighted by how much of it the sliding window still
// covers. Like fixed, it keeps every window's count. Anchored, the
// windows are a grid starting at the key's first request.
type counter struct {
	n, per   int64
	phase    int64 // where its windows start after the epoch's, when not anchored
	anchored bool
	counts   bool
	rounding rounding
	origin   int64 // the grid's origin: 0, or the key's first request
	started  bool
	windows  []window
}

func (c *counter) countOf(start int64) int64 {
	if i, ok := lookup(c.windows, start); ok {
		return c.windows[i].count
	}
	return 0
}

// grid returns the start of the window t falls in.
func (c *counter) grid(t int64) int64 {
	switch {
	case c.anchored && c.started:
		return c.origin + floorDiv(t-c.origin, c.per)*c.per
	case c.anchored:
		return t
	}
	return onGrid(t, c.per, c.phase)
}

// onGrid returns the start of the window of per, phase after the epoch's,
// that t falls in.
func onGrid(t, per, phase int64) int64 { return floorDiv(t-phase, per)*per + phase }

func (c *counter) admits(t int64, n int) bool {
	start := c.grid(t)
	prev, count := c.countOf(start-c.per), c.countOf(start)
	if prev == 0 {
		return count+int64(n) <= c.n
	}
	// The previous window weighs prev·(W−e)/W, e the time into this one.
	left := c.per - (t - start)
	if float64(prev)*float64(c.per) > 1<<62 {
		return float64(prev)*float64(left)/float64(c.per)+float64(count+int64(n)) <= float64(c.n)
	}
	w := prev * left
	switch c.rounding {
	case rounded:
		return (2*w+c.per)/(2*c.per)+count+int64(n) <= c.n
	case truncated:
		return w/c.per+count+int64(n) <= c.n
	}
	return w+(count+int64(n))*c.per <= c.n*c.per
}

func (c *counter) admit(t int64, n int) {
	if c.anchored && !c.started {
		c.origin, c.started = t, true
	}
	start := c.grid(t)
	i, ok := lookup(c.windows, start)
	if !ok {
		c.windows = slices.Insert(c.windows, i, window{start: start})
	}
	c.windows[i].count += int64(n)
}

func (c *counter) clone() state { d := *c; d.windows = slices.Clone(c.windows); return &d }

func (c *counter) refuse(t int64, n int) {
	if c.counts {
		c.admit(t, n)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
