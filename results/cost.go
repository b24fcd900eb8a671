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

// CostOf returns the cost of r, a timing row, against the harness floor
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
func CostOf(r Row) (Cost, bool) {
	lim := r.Curve(Throughput)
	before, after := r.Curve(FloorBefore+Throughput), r.Curve(FloorAfter+Throughput)
	if lim == nil || before == nil || after == nil {
		return Cost{}, false
	}
	var use []int
	for i := range lim.Y {
		if i < len(before.Y) && i < len(after.Y) && valid(lim.Y[i], false) && valid(before.Y[i], false) && valid(after.Y[i], false) {
			use = append(use, i)
		}
	}
	if len(use) == 0 {
		return Cost{}, false
	}
	// A round whose figure is not a measurement (zero, NaN) is left out
	// of that figure's median, not counted as a zero.
	ratio := func(name string, v func(float64) float64) float64 {
		l, b, a := r.Curve(name), r.Curve(FloorBefore+name), r.Curve(FloorAfter+name)
		if l == nil || b == nil || a == nil {
			return 0
		}
		var rs []float64
		for _, i := range use {
			x, y, z := v(l.Y[i]), v(b.Y[i]), v(a.Y[i])
			if valid(x, false) && valid(y, false) && valid(z, false) {
				rs = append(rs, x/((y+z)/2))
			}
		}
		return medianOf(rs)
	}
	same := func(v float64) float64 { return v }
	return Cost{
		Throughput: ratio(Throughput, func(v float64) float64 { return 1 / v }),
		P50:        ratio(Latency+".p50", same),
		P90:        ratio(Latency+".p90", same),
		Rounds:     len(use),
	}, true
}

// FloorBefore and FloorAfter prefix the series of a timing row that are
// the harness floor's samples just before and just after each of the
// limiter's.
const (
	FloorBefore = "floor_before."
	FloorAfter  = "floor_after."
)

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
