package probe

import (
	"math"
	"slices"
	"time"
)

// observation is one request as the probe saw it: the key it was sent
// for, its cost, when it went out and when its answer came back, and
// whether the target admitted it. The target decided at an instant
// between Sent and Received that nobody outside it knows.
type observation struct {
	Key            string
	N              int
	Sent, Received time.Time
	Admitted       bool
}

// explanation is how many of a run's decisions a model explains.
type explanation struct {
	Model     model
	Explained int // decisions the model makes alike at some instant of their interval
	Decisions int
}

// Share is the share of the decisions explained, 0 to 1.
func (e explanation) Share() float64 {
	if e.Decisions == 0 {
		return 0
	}
	return float64(e.Explained) / float64(e.Decisions)
}

// explain replays keys (obs grouped by key, byKey) through m, each key's
// in the order they were sent,
// and counts the decisions m explains: an admission is explained when m
// admits at some instant between Sent and Received, a refusal when m
// refuses at some instant there. The target decided at an unknown
// instant of that interval; a request that lands on the instant a bucket
// refills or a window turns is a tie that the network's jitter breaks
// either way, so the model is given the whole interval.
//
// The model's state then follows what the target decided, not what the
// model would have: each admission is recorded, and each refusal when
// the model counts refusals. A plain replay (the tests' replay), where the model's
// own decisions feed it, lets one tie shift every later decision of the
// key; following the target, one tie costs at most one decision.
//
// Where in its interval a decision was made is not known, so the replay
// keeps two histories of the key: one with every decision at the
// earliest instant the model allows, the other at the latest. For every
// model an earlier admission leaves a key freer later (a bucket's debt
// starts sooner, a log's entry expires sooner, a count falls in an
// earlier window), so the first history is the most lenient the target's
// decisions allow, and the second the strictest: an admission is
// explained if the lenient one admits it, a refusal if the strict one
// refuses it.
//
// It gives up once more than wrong decisions are not explained, and
// returns how many were explained and whether it went through them all.
func explain(keys [][]observation, m model, wrong int) (int, bool) {
	explained, missed := 0, 0
	all := follow(keys, m, func(_ observation, ok bool) bool {
		if ok {
			explained++
			return true
		}
		missed++
		return missed <= wrong
	})
	return explained, all
}

// follow replays keys through m as explain says, telling decided of each decision, in the order replayed, whether
// m explains it; it stops when decided returns false, and reports whether
// it went through them all.
func follow(keys [][]observation, m model, decided func(o observation, explained bool) bool) bool {
	for _, key := range keys {
		cloned := false // key is the caller's until reordered
		early, late := m.newState(), m.newState()
		// lastEarly is the latest instant the early history recorded.
		lastEarly := int64(math.MinInt64)
		// refuses reports whether m refuses o at some instant of [lo, hi]
		// in one of the two histories: the strict one at lo, or the early
		// one at the first instant after all it recorded. (For windows the
		// strict history is not the strictest at every instant: recording
		// an admission late moves it into a later window, and leaves the
		// earlier one emptier than it was. Under load, when intervals span
		// a window's edge, refusals in the earlier window need the early
		// history.)
		refuses := func(lo, hi int64, n int) bool {
			return !late.admits(lo, n) || lastEarly <= hi && !early.admits(max(lo, lastEarly), n)
		}
		for i := 0; i < len(key); i++ {
			o := key[i]
			lo, hi := o.Sent.UnixNano(), max(o.Received.UnixNano(), o.Sent.UnixNano())
			if !o.Admitted && !refuses(lo, hi, o.N) {
				// Refused where even the strict history admits: if a
				// request sent during this one's interval was admitted,
				// the target may have decided it first, and it goes first.
				if j := admittedDuring(key[i+1:], hi); j >= 0 {
					if !cloned {
						key, cloned = slices.Clone(key), true
					}
					j += i + 1
					first := key[j]
					copy(key[i+1:j+1], key[i:j])
					key[i] = first
					i--
					continue
				}
			}
			if o.Admitted {
				// Admitting is monotone in time: if the model admits
				// anywhere in [lo, hi], it admits at hi.
				at, ok := hi, early.admits(hi, o.N)
				if ok {
					at = firstAdmitting(early, lo, hi, o.N)
				}
				early.admit(at, o.N)
				late.admit(hi, o.N)
				lastEarly = max(lastEarly, at)
				if !decided(o, ok) {
					return false
				}
				continue
			}
			ok := refuses(lo, hi, o.N)
			if m.CountsRefused {
				lastEarly = max(lastEarly, lo)
			}
			early.refuse(lo, o.N)
			late.refuse(hi, o.N)
			if !decided(o, ok) {
				return false
			}
		}
	}
	return true
}

// admittedDuring returns the index in rest of the first admitted request
// sent no later than until, or -1.
func admittedDuring(rest []observation, until int64) int {
	for j, o := range rest {
		if o.Sent.UnixNano() > until {
			break
		}
		if o.Admitted {
			return j
		}
	}
	return -1
}

// bestOfEach returns the best explanation of each family, best first: what a
// report says ("behaves as GCRA 10/s burst 6: 99.7%; sliding counter
// 20/2s: 91.2%; ...").
func bestOfEach(ranked []explanation) []explanation {
	seen := map[string]bool{}
	var out []explanation
	for _, e := range ranked {
		if f := e.Model.Family(); !seen[f] {
			seen[f] = true
			out = append(out, e)
		}
	}
	return out
}

// byKey returns obs grouped by key, each group in the order sent (the
// order obs came in, among requests sent at the same instant).
func byKey(obs []observation) [][]observation {
	index := map[string]int{}
	var keys [][]observation
	for _, o := range obs {
		i, ok := index[o.Key]
		if !ok {
			i = len(keys)
			index[o.Key] = i
			keys = append(keys, nil)
		}
		keys[i] = append(keys[i], o)
	}
	for _, k := range keys {
		slices.SortStableFunc(k, func(a, b observation) int { return a.Sent.Compare(b.Sent) })
	}
	return keys
}

// firstAdmitting returns about the first instant of [lo, hi] at which st
// admits n, given that it admits at hi: to within a 64th of the interval
// (and a microsecond), finer than any limit a request's interval tells.
func firstAdmitting(st state, lo, hi int64, n int) int64 {
	return firstAt(st, lo, hi, n, max((hi-lo)/64, int64(time.Microsecond)))
}

// firstAt returns the first instant of [lo, hi] at which st admits n, to
// within step, given that it admits at hi.
func firstAt(st state, lo, hi int64, n int, step int64) int64 {
	for hi-lo > step {
		mid := lo + (hi-lo)/2
		if st.admits(mid, n) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}
