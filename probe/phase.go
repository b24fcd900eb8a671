package probe

import (
	"slices"
	"time"
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
