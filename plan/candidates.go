package plan

import (
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
)

// Deciding a policy again over every request costs what the plan's
// reading does (on the shop's ten million, most of a plan of one pass).
// But the curves bound what a limit can refuse: a key whose envelope or
// least bursts stay within a limit is refused nothing by it, and is not
// decided. What is decided is the rest, exactly as before: the counts are
// the same, request for request.

// mayRefuse says which keys algorithm a at limits (composite: each key
// refused if any limit refuses it) may refuse, from the curves: every key
// whose curves do not keep it within them.
func (cs *curves) mayRefuse(a limiters.Algorithm, limits []limiters.Limit) func(id int32) bool {
	var each []func(id int32) bool
	for _, l := range limits {
		f := cs.mayRefuseOne(a, l)
		if f == nil {
			return func(int32) bool { return true }
		}
		each = append(each, f)
	}
	return func(id int32) bool {
		for _, f := range each {
			if f(id) {
				return true
			}
		}
		return false
	}
}

// mayRefuseOne is mayRefuse for one limit; nil where the curves bound
// nothing of it.
func (cs *curves) mayRefuseOne(a limiters.Algorithm, l limiters.Limit) func(id int32) bool {
	n := int64(l.N)
	switch {
	case a.IsBucket():
		return cs.mayBucket(l)
	case a == limiters.SlidingLog || a == limiters.FixedWindow:
		// A sliding log refuses exactly the keys whose most in a window
		// of its period is above N; a fixed window's windows are each
		// within one of those.
		k := cs.periodIndex(l.Per)
		if k < 0 {
			return nil
		}
		return func(id int32) bool { return cs.peak(id, k) > n }
	case a == limiters.SlidingCounter:
		// Its estimate weighs the window before, at most in full: at
		// most what a key sends in two of them.
		k := cs.periodIndex(l.Per)
		if k < 0 {
			return nil
		}
		return func(id int32) bool { return cs.peak2(id, k) > n }
	}
	return nil
}

// mayBucket is which keys a bucket of limit l may refuse. At a rate of
// the curves', exactly those whose least burst there is above its own;
// at another, those whose envelope passes it somewhere: a stretch of
// requests shorter than a length holds at most the most in a window of
// it, while the bucket refills at least what the length below gives (a
// token spared for the rounding), and a stretch longer than every length
// holds at most the key's whole cost.
func (cs *curves) mayBucket(l limiters.Limit) func(id int32) bool {
	capacity := int64(l.Burst)
	if capacity == 0 {
		capacity = int64(l.N)
	}
	T := int64(l.Interval())
	if T <= 0 {
		return nil
	}
	for k, t := range cs.intervals {
		if t == T {
			return func(id int32) bool { return cs.burst(id, k) > capacity }
		}
	}
	return func(id int32) bool {
		var before int64 // the length below
		for j, d := range cs.lengths {
			if cs.peaks[int(id)*len(cs.lengths)+j] > capacity-1+before/T {
				return true
			}
			before = d
		}
		return cs.of[id].total > capacity-1+before/T
	}
}

// periodIndex is d's index in the curves' periods, -1 if it is none.
func (cs *curves) periodIndex(d time.Duration) int {
	for k, p := range cs.periods {
		if p == int64(d) {
			return k
		}
	}
	return -1
}

// only is in, less the keys may says cannot be refused.
func only(in []bool, may func(id int32) bool) []bool {
	out := make([]bool, len(in))
	for id, ok := range in {
		out[id] = ok && may(int32(id))
	}
	return out
}

// aPolicy is an algorithm at its limits, as decideCurves decides it.
type aPolicy struct {
	a      limiters.Algorithm
	limits []limiters.Limit
}

// policiesDecided are the policies decideCurves decides: the bucket and
// the frontier's points, the windows in each form, and nginx's (asked of
// nginxPolicy, which is given them back undecided and asked again).
func (p *Plan) policiesDecided(points []*FrontierPoint) []aPolicy {
	var out []aPolicy
	for _, f := range points {
		out = append(out, aPolicy{limiters.GCRA, []limiters.Limit{f.Policy()}})
	}
	if w := p.Windows; w.Short.N > 0 {
		for _, a := range []limiters.Algorithm{limiters.SlidingLog, limiters.FixedWindow, limiters.SlidingCounter} {
			out = append(out, aPolicy{a, []limiters.Limit{w.Short, w.Long}})
		}
	}
	p.nginxPolicy(func(rules ...products.NginxRule) (int64, int64) {
		out = append(out, aPolicy{limiters.GCRA, nginxEnforced(rules)})
		return -1, -1
	})
	return out
}

// mayRefuseAny is in, less the keys none of policies may refuse.
func (cs *curves) mayRefuseAny(in []bool, policies []aPolicy) []bool {
	out := make([]bool, len(in))
	for _, pl := range policies {
		may := cs.mayRefuse(pl.a, pl.limits)
		for id, ok := range in {
			out[id] = out[id] || ok && may(int32(id))
		}
	}
	return out
}
