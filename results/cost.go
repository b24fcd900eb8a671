package results

import (
	"slices"
)

// Cost is what one decision of a limiter costs in units of the harness
// floor, a limiter that decides nothing, measured moments before and after
// it: the machine's speed at that moment cancels out. Larger is slower, in
// each.
type Cost struct {
	// Throughput is the floor's decisions per second over the limiter's:
	// how many floor decisions one of the limiter's costs.
	Throughput float64
	// P50 and P90 are the limiter's p50 and p90 over the floor's.
	P50, P90 float64
	// Rounds is how many rounds the figures are the medians of.
	Rounds int
}

// Costs returns the cost of r, a timing run, against the harness floor
// sampled around each of its rounds: medians over the rounds of the
// limiter's figure over the mean of the floor's two. False if r has no
// rounds with the floor around them.
//
// Measured on the project's machine: in twelve quick runs of one tree, a
// ratelab limiter's cost moved by at most 1.30x between any two runs
// (median over limiters and workloads 1.10x for time per decision), where
// its raw decisions per second moved by 1.6x. What is left is the
// machine's slow spells slowing the floor, a no-op, more than a limiter
// that waits on memory: the ratio itself shifts with the spell, by 6-12%
// on a hot key and up to 35% on many-users.
func Costs(r Run) (Cost, bool) {
	var use []Round
	for _, x := range r.Rounds {
		if b, a := x.FloorBefore, x.FloorAfter; b != nil && a != nil && valid(x.ThroughputPerS, false) && valid(b.ThroughputPerS, false) && valid(a.ThroughputPerS, false) {
			use = append(use, x)
		}
	}
	if len(use) == 0 {
		return Cost{}, false
	}
	// A round whose figure is not a measurement (zero, NaN) is left out
	// of that figure's median, not counted as a zero.
	ratio := func(v func(Sample) float64) float64 {
		var rs []float64
		for _, x := range use {
			lim, b, a := v(x.Sample), v(*x.FloorBefore), v(*x.FloorAfter)
			if valid(lim, false) && valid(b, false) && valid(a, false) {
				rs = append(rs, lim/((b+a)/2))
			}
		}
		return medianOf(rs)
	}
	return Cost{
		Throughput: ratio(func(s Sample) float64 { return 1 / s.ThroughputPerS }),
		P50:        ratio(func(s Sample) float64 { return s.P50NS }),
		P90:        ratio(func(s Sample) float64 { return s.P90NS }),
		Rounds:     len(use),
	}, true
}

// MedianOf returns the median of v over rounds, 0 for none.
func MedianOf(rounds []Round, v func(Round) float64) float64 {
	vals := make([]float64, len(rounds))
	for i, r := range rounds {
		vals[i] = v(r)
	}
	return medianOf(vals)
}

// medianOf returns the median of v (sorting it), 0 for none.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
