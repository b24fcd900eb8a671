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
// (the epoch is where the aligned windows start). admits reports whether n units would be admitted at t;
// for every model it is monotone in t for a given state (waiting never
// turns an admission into a refusal), which is what lets the fit look
// for an instant in an interval by bisection. admit records n admitted
// at t whatever the model would decide; refuse records a refusal.
type state interface {
	admits(t int64, n int) bool
	admit(t int64, n int)
	refuse(t int64, n int)
}

// newState returns a fresh key's state under m.
func (m Model) newState() state {
	n, per := int64(m.Limit.N), int64(m.Limit.Per)
	switch {
	case m.Algorithm.IsBucket():
		t := int64(m.Limit.Interval())
		return &bucket{t: t, ct: int64(m.Limit.Quota()) * t, c: m.Limit.Quota(), counts: m.CountsRefused, tat: math.MinInt64}
	case m.Algorithm == limiters.FixedWindow:
		return &fixed{n: n, per: per, anchored: m.Anchored, counts: m.CountsRefused, start: math.MinInt64}
	case m.Algorithm == limiters.SlidingLog:
		return &slidingLog{n: int(n), per: per, counts: m.CountsRefused}
	case m.Algorithm == limiters.SlidingCounter:
		return &counter{n: n, per: per, anchored: m.Anchored, counts: m.CountsRefused, start: math.MinInt64}
	}
	panic("probe: no model of " + string(m.Algorithm))
}

// bucket is GCRA: a theoretical arrival time, admitting n at t while
// max(tat, t) + n·T − t ≤ C·T. A store that counts refusals charges them
// too, which pushes tat on.
type bucket struct {
	t, ct  int64
	c      int
	counts bool
	tat    int64
}

func (b *bucket) admits(t int64, n int) bool {
	return n <= b.c && max(b.tat, t)+int64(n)*b.t-t <= b.ct
}

func (b *bucket) admit(t int64, n int) { b.tat = max(b.tat, t) + int64(n)*b.t }

func (b *bucket) refuse(t int64, n int) {
	if b.counts {
		b.admit(t, n)
	}
}

// fixed is the fixed window: N per window, the windows aligned on the
// epoch or starting at the key's first request after the last ended.
type fixed struct {
	n, per   int64
	anchored bool
	counts   bool
	start    int64 // the key's window, math.MinInt64 before any
	count    int64
}

// window returns the start of the window t falls in, and the count in it.
func (f *fixed) window(t int64) (int64, int64) {
	if f.anchored {
		if f.start != math.MinInt64 && t < f.start+f.per {
			return f.start, f.count
		}
		return t, 0
	}
	k := floorDiv(t, f.per) * f.per
	if k == f.start {
		return k, f.count
	}
	return k, 0
}

func (f *fixed) admits(t int64, n int) bool {
	_, c := f.window(t)
	return c+int64(n) <= f.n
}

func (f *fixed) admit(t int64, n int) { f.start, f.count = f.window(t); f.count += int64(n) }

func (f *fixed) refuse(t int64, n int) {
	if f.counts {
		f.admit(t, n)
	}
}

// slidingLog admits n at t while fewer than N−n+1 of the units it
// admitted are younger than Per.
type slidingLog struct {
	n      int
	per    int64
	counts bool
	at     []int64 // one entry a unit, in time order
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

func (l *slidingLog) refuse(t int64, n int) {
	if l.counts {
		l.admit(t, n)
	}
}

// counter is the sliding window counter: the current window's count and
// the previous one's, weighted by how much of it the sliding window
// still covers, rounded up, as package slidingcounter does.
type counter struct {
	n, per      int64
	anchored    bool
	counts      bool
	start       int64 // the current window's start, math.MinInt64 before any
	prev, count int64
}

// roll returns the window t falls in, and its counts.
func (c *counter) roll(t int64) (start, prev, count int64) {
	start = floorDiv(t, c.per) * c.per
	if c.anchored {
		if c.start == math.MinInt64 {
			return t, 0, 0
		}
		start = c.start + floorDiv(t-c.start, c.per)*c.per
	}
	switch {
	case c.start == math.MinInt64 || start >= c.start+2*c.per:
		return start, 0, 0
	case start == c.start+c.per:
		return start, c.count, 0
	case start < c.start:
		return c.start, c.prev, c.count
	}
	return start, c.prev, c.count
}

func (c *counter) weighted(t int64) int64 {
	start, prev, count := c.roll(t)
	e := max(t-start, 0)
	if prev == 0 {
		return count
	}
	w := (prev*(c.per-e) + c.per - 1) / c.per // no overflow for the limits a probe fits
	return w + count
}

func (c *counter) admits(t int64, n int) bool { return c.weighted(t)+int64(n) <= c.n }

func (c *counter) admit(t int64, n int) {
	c.start, c.prev, c.count = c.roll(t)
	c.count += int64(n)
}

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
