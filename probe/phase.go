package probe

import (
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// phaseOf measures where the windows of length w start for a fixed window
// whose grid is the same for every key: a key refused, then admitted
// again (sent after the refusal came back), had a window start between
// the refusal's send and the admission's answer. Every such pair, of every key, is an arc of the
// circle of length w that the grid's phase lies on; phaseOf returns the
// longest stretch all of them share (the phase is known to its width),
// and whether there is one. A stretch that holds 0 (the epoch's windows
// do too) is returned as the zero span.
func phaseOf(keys [][]observation, w time.Duration) (span, bool) {
	if w <= 0 {
		return span{}, false
	}
	// The stretches all arcs so far share, in [0, w), in order.
	shared := []span{{0, w}}
	arcs := 0
	for _, k := range keys {
		obs := slices.Clone(k)
		slices.SortStableFunc(obs, func(a, b observation) int { return a.Sent.Compare(b.Sent) })
		for i := 1; i < len(obs); i++ {
			// Only an admission sent after the refusal was answered:
			// requests in flight together are decided in any order.
			r, a := obs[i-1], obs[i]
			if r.Admitted || !a.Admitted || a.Sent.Before(r.Received) {
				continue
			}
			// Widened by a millisecond either way: the limiter's clock
			// and a ticker's are the probe's to about that.
			length := a.Received.Sub(r.Sent) + 2*time.Millisecond
			if length >= w {
				continue
			}
			lo := time.Duration((r.Sent.UnixNano() - int64(time.Millisecond)) % int64(w))
			arc := []span{{lo, min(lo+length, w)}}
			if lo+length > w {
				arc = append(arc, span{0, lo + length - w})
			}
			shared = intersect(shared, arc)
			arcs++
			if len(shared) == 0 {
				return span{}, false
			}
		}
	}
	if arcs == 0 {
		return span{}, false
	}
	// A stretch that wraps past w is one with the one from 0.
	if n := len(shared); n > 1 && shared[0].lo == 0 && shared[n-1].hi == w {
		return span{}, true
	}
	best := shared[0]
	for _, s := range shared[1:] {
		if s.hi-s.lo > best.hi-best.lo {
			best = s
		}
	}
	if best.lo == 0 || best.hi == w {
		return span{}, true
	}
	return best, true
}

// intersect returns the stretches of a (in order) within those of b.
func intersect(a, b []span) []span {
	var out []span
	for _, x := range a {
		for _, y := range b {
			if lo, hi := max(x.lo, y.lo), min(x.hi, y.hi); lo < hi {
				out = append(out, span{lo, hi})
			}
		}
	}
	slices.SortFunc(out, func(x, y span) int { return int(x.lo - y.lo) })
	return out
}

// phased tries, when no variant of a fixed window explains 99% of the
// decisions, its windows at a phase of their own (the same for every key):
// at every length of times where the refusals and the admissions after
// them agree on where windows start (phaseOf), at the best coarse quotas.
// (A sliding counter's admissions come back as its weight wanes, not at a
// window's start: phaseOf cannot place its windows, and it is not tried.)
// It returns what it tried.
func (s *search) phased(keys [][]observation, times []time.Duration, coarse, varied []explanation, try func(model, int) (explanation, bool)) []explanation {
	n := s.decisions
	if len(coarse) == 0 || len(varied) > 0 && float64(varied[0].Explained) >= 0.99*float64(n) {
		return nil
	}
	quotas := bestQuotas(coarse)
	var out []explanation
	for _, t := range times {
		st, ok := phaseOf(keys, t)
		if !ok || st == (span{}) {
			continue
		}
		// Across the stretch, in eighths: the rounds ask where they
		// disagree, and narrow it.
		var phases []time.Duration
		for _, f := range []int64{4, 1, 7, 2, 6, 3, 5} {
			ph := (st.lo + (st.hi-st.lo)*time.Duration(f)/8).Round(time.Millisecond)
			if ph > 0 && ph < t && !slices.Contains(phases, ph) {
				phases = append(phases, ph)
			}
		}
		for _, ph := range phases {
			for _, q := range quotas {
				for _, v := range allVariants(limiters.FixedWindow) {
					if v.Anchored || v.Seconds {
						continue
					}
					v = v.with(q, t)
					v.Phase = ph
					if e, ok := try(v, n/10); ok {
						out = append(out, e)
					}
				}
			}
		}
	}
	return out
}

// counterPhased tries sliding counters whose windows start at a phase of
// their own, when no counter on the epoch's windows explains 99% of the
// decisions. A counter's admissions come back as the last window's
// weight wanes, not when a window starts, so no key's return places its
// grid (phaseOf): the phases are tried, a twentieth of a window apart at
// each quota the coarse pass found best and at the times within 10% of
// its best, the plain variant; then every variant at the best three, and
// the phase narrowed around the best, to a two-thousandth. Not for a lean
// probe (lean.go), whose every model tried costs a quota of hundreds.
func (s *search) counterPhased(times []time.Duration, coarse, varied []explanation, try func(model, int) (explanation, bool)) []explanation {
	n := s.decisions
	if len(coarse) == 0 || len(varied) > 0 && float64(varied[0].Explained) >= 0.99*float64(n) {
		return nil
	}
	quotas := bestQuotas(coarse)
	var out []explanation
	at := func(q int, t, ph time.Duration, v model, wrong int) {
		v = v.with(q, t)
		v.Phase = ph
		if e, ok := try(v, wrong); ok {
			out = append(out, e)
		}
	}
	plain := model{Algorithm: limiters.SlidingCounter}
	// The times the coarse pass found best, and those within 10% of them,
	// and the whole seconds: not every time of the search (seventy, each
	// at twenty phases). A ticker's windows are whole seconds, and the
	// coarse pass, with no phase, can put its best far from them (20/2s
	// at :00.700 was best as 20/1220ms, under three probes at once).
	var near []time.Duration
	for _, t := range times {
		if t%time.Second == 0 {
			near = append(near, t)
		}
	}
	for _, c := range coarse[:min(len(coarse), 4)] {
		for _, t := range times {
			if ct := c.Model.time(); t >= ct*9/10 && t <= ct*11/10 && !slices.Contains(near, t) {
				near = append(near, t)
			}
		}
	}
	for _, q := range quotas {
		for _, t := range near {
			for f := range time.Duration(40) {
				if ph := (t * f / 40).Round(time.Millisecond); ph > 0 {
					// Each rounding of the weighted count: a counter
					// that rounds it (go-chi/httprate) misses a tenth at
					// its own window and phase when weighed exactly.
					for _, r := range []rounding{exact, rounded, truncated} {
						v := plain
						v.Rounding = r
						at(q, t, ph, v, n/10)
					}
				}
			}
		}
	}
	// Ranked by what is best now, not before the phases were tried: a
	// stale best makes every model above it a tie, and the plainer wins.
	s.tier()
	slices.SortStableFunc(out, s.better)
	for _, b := range slices.Clone(out[:min(len(out), 3)]) {
		q, t, ph := b.Model.quota(), b.Model.time(), b.Model.Phase
		for _, v := range allVariants(limiters.SlidingCounter) {
			if !v.Anchored && !v.Seconds {
				at(q, t, ph, v, n-b.Explained+n/50)
			}
		}
	}
	for _, step := range []int64{200, 2000} {
		s.tier()
		slices.SortStableFunc(out, s.better)
		if len(out) == 0 {
			break
		}
		b := out[0]
		t := b.Model.time()
		for d := -int64(10); d <= 10; d++ {
			ph := (b.Model.Phase + t*time.Duration(d)/time.Duration(step) + t) % t
			if ph = ph.Round(time.Millisecond); ph > 0 {
				at(b.Model.quota(), t, ph, b.Model, n-b.Explained+n/100)
			}
		}
	}
	return out
}

// bestQuotas are the quotas of the best four of coarse, each once.
func bestQuotas(coarse []explanation) []int {
	var quotas []int
	for _, c := range coarse[:min(len(coarse), 4)] {
		if !slices.Contains(quotas, c.Model.quota()) {
			quotas = append(quotas, c.Model.quota())
		}
	}
	return quotas
}
