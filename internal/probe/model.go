// Package probe judges a rate limiter from the outside, by what it answers:
// which of the six algorithms it behaves as, with what limit, and how far
// it strays from it. This file holds the models a target is compared with;
// fit.go replays what the target decided through them.
package probe

import (
	"fmt"
	"math"
	"slices"

	"github.com/ratelab/ratelab/limiters"
)

// Model is one way a limiter may decide: an algorithm and its limit, and
// the two things that stores in the field differ in, which the fit tries
// both ways. The token bucket, the leaky bucket and GCRA are one policy
// (the same decisions for the same limit); a Model of any of the three
// decides as GCRA.
type Model struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// Anchored: a window algorithm's windows start at each key's first
	// request and last Per, as many middleware stores keep them (a key
	// with a TTL); otherwise they are aligned on the Unix epoch.
	Anchored bool
	// CountsRefused: a refused request is counted too, as by a store that
	// increments and then compares.
	CountsRefused bool
}

// String names the model as the probe's tables do: "gcra 10/s burst 6",
// "fixed-window 20/2s, anchored, counting refused".
func (m Model) String() string {
	s := string(m.Algorithm) + " " + m.Limit.String()
	if m.Anchored {
		s += ", anchored"
	}
	if m.CountsRefused {
		s += ", counting refused"
	}
	return s
}

// Family is the policy the model's algorithm belongs to: the three
// buckets are one ("bucket"); each window algorithm is its own.
func (m Model) Family() string { return family(m.Algorithm) }

func family(a limiters.Algorithm) string {
	if a.IsBucket() {
		return "bucket"
	}
	return string(a)
}

// Validate reports whether the model can be replayed: a limit its
// algorithm takes, and the window parameters only on a window algorithm.
func (m Model) Validate() error {
	if err := m.Limit.Validate(m.Algorithm); err != nil {
		return fmt.Errorf("probe: %s: %w", m, err)
	}
	if m.Algorithm.IsBucket() && m.Anchored {
		return fmt.Errorf("probe: %s: a bucket has no windows to anchor", m)
	}
	return nil
}

// state is one key's state under a model, at times in Unix nanoseconds
// (the epoch is where the aligned windows start). admits reports whether
// n units would be admitted at t; for every model it is monotone in t for
// a given state (waiting never turns an admission into a refusal), which
// is what lets the fit look for an instant in an interval by bisection.
// admit records n admitted at t whatever the model would decide.
type state interface {
	admits(t int64, n int) bool
	admit(t int64, n int)
}

// refuse records in st a refusal of n at t: nothing, unless the model
// counts refusals, as a store that increments and then compares does
// (for a bucket, the refusal pushes its debt on).
func (m Model) refuse(st state, t int64, n int) {
	if m.CountsRefused {
		st.admit(t, n)
	}
}

// newState returns a fresh key's state under m.
func (m Model) newState() state {
	n, per := int64(m.Limit.N), int64(m.Limit.Per)
	switch {
	case m.Algorithm.IsBucket():
		t := int64(m.Limit.Interval())
		return &bucket{t: t, ct: int64(m.Limit.Quota()) * t, c: m.Limit.Quota(), tat: math.MinInt64}
	case m.Algorithm == limiters.FixedWindow:
		return &fixed{n: n, per: per, anchored: m.Anchored}
	case m.Algorithm == limiters.SlidingLog:
		return &slidingLog{n: int(n), per: per}
	case m.Algorithm == limiters.SlidingCounter:
		return &counter{n: n, per: per, anchored: m.Anchored}
	}
	panic("probe: no model of " + string(m.Algorithm))
}

// bucket is GCRA: a theoretical arrival time, admitting n at t while
// max(tat, t) + n·T − t ≤ C·T.
type bucket struct {
	t, ct int64
	c     int
	tat   int64
}

func (b *bucket) admits(t int64, n int) bool {
	return n <= b.c && max(b.tat, t)+int64(n)*b.t-t <= b.ct
}

func (b *bucket) admit(t int64, n int) { b.tat = max(b.tat, t) + int64(n)*b.t }

// fixed is the fixed window: N per window, the windows aligned on the
// epoch or starting at the key's first request after the last ended. It
// keeps every window's count, not only the newest's: the fit records a
// decision at an instant it chooses, and a later one may land in an
// earlier window.
type fixed struct {
	n, per   int64
	anchored bool
	windows  []window // in order of start
}

// window is a window's start and count.
type window struct{ start, count int64 }

// find returns the index of the window t falls in, and whether there is
// one; if not, the index a window starting at t would take.
func (f *fixed) find(t int64) (int, bool) {
	if !f.anchored {
		k := floorDiv(t, f.per) * f.per
		i, ok := slices.BinarySearchFunc(f.windows, k, func(w window, k int64) int { return cmpInt(w.start, k) })
		return i, ok
	}
	// The last window starting at or before t, if t is inside it.
	i, _ := slices.BinarySearchFunc(f.windows, t+1, func(w window, k int64) int { return cmpInt(w.start, k) })
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
	if !ok {
		start := t
		if !f.anchored {
			start = floorDiv(t, f.per) * f.per
		}
		f.windows = slices.Insert(f.windows, i, window{start: start})
	}
	f.windows[i].count += int64(n)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// slidingLog admits n at t while fewer than N−n+1 of the units it
// admitted are younger than Per.
type slidingLog struct {
	n   int
	per int64
	at  []int64 // one entry a unit, in time order
}

func (l *slidingLog) live(t int64) int {
	cut := t - l.per
	i, _ := slices.BinarySearch(l.at, cut+1)
	return len(l.at) - i
}

func (l *slidingLog) admits(t int64, n int) bool { return l.live(t)+n <= l.n }

func (l *slidingLog) admit(t int64, n int) {
	i, _ := slices.BinarySearch(l.at, t+1)
	for range n {
		l.at = slices.Insert(l.at, i, t)
	}
}

// counter is the sliding window counter: the current window's count and
// the previous one's, weighted by how much of it the sliding window still
// covers, rounded up, as package slidingcounter does. Like fixed, it keeps
// every window's count. Anchored, the windows are a grid starting at the
// key's first request.
type counter struct {
	n, per   int64
	anchored bool
	origin   int64 // the grid's origin: 0, or the key's first request
	started  bool
	windows  []window
}

func (c *counter) countOf(start int64) int64 {
	if i, ok := slices.BinarySearchFunc(c.windows, start, func(w window, k int64) int { return cmpInt(w.start, k) }); ok {
		return c.windows[i].count
	}
	return 0
}

// grid returns the start of the window t falls in.
func (c *counter) grid(t int64) int64 {
	if c.anchored && c.started {
		return c.origin + floorDiv(t-c.origin, c.per)*c.per
	}
	if c.anchored {
		return t
	}
	return floorDiv(t, c.per) * c.per
}

func (c *counter) admits(t int64, n int) bool {
	start := c.grid(t)
	prev, count := c.countOf(start-c.per), c.countOf(start)
	w := count
	if prev > 0 {
		e := t - start
		w += (prev*(c.per-e) + c.per - 1) / c.per // no overflow for the limits a probe fits
	}
	return w+int64(n) <= c.n
}

func (c *counter) admit(t int64, n int) {
	if c.anchored && !c.started {
		c.origin, c.started = t, true
	}
	start := c.grid(t)
	i, ok := slices.BinarySearchFunc(c.windows, start, func(w window, k int64) int { return cmpInt(w.start, k) })
	if !ok {
		c.windows = slices.Insert(c.windows, i, window{start: start})
	}
	c.windows[i].count += int64(n)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
