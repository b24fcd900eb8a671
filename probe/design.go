package probe

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// When models that explain every decision so far would decide some
// request differently, the probe asks: it designs the requests on which
// they disagree (a spent key asked again just before and just after the
// instant one of them lets it back, a burst straddling a window's edge, a
// spent key pressed and then left quiet), sends them on fresh keys, and
// fits again.

// experiment is a few requests on one fresh key, at planned instants.
type experiment struct {
	about string      // what it asks, in words
	at    []time.Time // when each request goes, in order
}

// designer plans experiments. A request planned for t is decided at an
// instant of [t, t+u] that nobody outside knows: the sender's lateness
// and the answer's latency.
type designer struct {
	u     time.Duration
	start time.Time // the earliest a request may go
	// most is the longest an experiment may take, from start.
	most time.Duration
}

// continued predicts at from two histories of a key: lenient, with each
// decision recorded at the earliest instant it may have been made, and
// strict, at the latest. It returns the predictions and the histories
// after them, nil when a prediction was uncertain. It changes the
// histories it is given.
func (d designer) continued(lenient, strict state, at []time.Time) ([]int8, state, state) {
	out := make([]int8, len(at))
	u := int64(d.u)
	for i, t := range at {
		lo := t.UnixNano()
		hi := lo + u
		switch {
		case strict.admits(lo, 1) && lenient.admits(lo, 1):
			out[i] = 1
			lenient.admit(lo, 1)
			strict.admit(hi, 1)
		case !lenient.admits(hi, 1) && !strict.admits(hi, 1):
			out[i] = -1
			lenient.refuse(lo, 1)
			strict.refuse(hi, 1)
		default:
			return out, nil, nil
		}
	}
	return out, lenient, strict
}

// parts returns whether a and b, two predictions of one experiment, are
// sure to differ on some request.
func parts(a, b []int8) bool {
	for i := range a {
		if a[i] != 0 && b[i] != 0 && a[i] != b[i] {
			return true
		}
	}
	return false
}

// pairs is a set of pairs of models, i < j, as bits.
type pairs struct {
	n    int
	bits []uint64
}

func newPairs(n int) pairs { return pairs{n, make([]uint64, (n*n+63)/64)} }

func (p pairs) add(i, j int)      { k := i*p.n + j; p.bits[k/64] |= 1 << (k % 64) }
func (p pairs) has(i, j int) bool { k := i*p.n + j; return p.bits[k/64]&(1<<(k%64)) != 0 }

func (p pairs) or(q pairs) {
	for i := range p.bits {
		p.bits[i] |= q.bits[i]
	}
}

// opening is the first part of an experiment: a way to bring a fresh key
// to a state the models disagree about what follows.
type opening struct {
	about string
	at    []time.Time
}

// openings returns the openings of the designer's experiments, for
// models of quotas up to q: spent at once; one request; half spent, then
// the rest half a window later; spent and then pressed for a window; and
// each of these placed to end just before an edge of each epoch-aligned
// model's windows: the windows of the best eight models (best first).
func (d designer) openings(models []model) (out []opening, edges []time.Duration) {
	q, qmin := 1, 1<<30
	var times []time.Duration // the windows, and the buckets' times to refill
	for i, m := range models {
		q, qmin = max(q, m.quota()), min(qmin, m.quota())
		if i >= 8 {
			continue // the openings are the best few models'
		}
		w := m.Limit.Window()
		if !slices.ContainsFunc(times, func(t time.Duration) bool { return near(t, w, 0.02) }) {
			times = append(times, w)
		}
		if (m.Algorithm == limiters.FixedWindow || m.Algorithm == limiters.SlidingCounter) && !m.Anchored && !slices.Contains(edges, m.Limit.Per) {
			edges = append(edges, m.Limit.Per)
		}
	}
	margin := max(d.u, 2*time.Millisecond)
	lead := d.start.Add(margin)
	open := func(about string, at []time.Time) {
		out = append(out, opening{about, at})
		span := at[len(at)-1].Sub(at[0])
		for _, w := range edges {
			edge := lead.Add(span + 2*margin).Truncate(w).Add(w)
			shift := edge.Add(-span - 2*margin).Sub(at[0])
			if shift+span < d.most/2 {
				moved := make([]time.Time, len(at))
				for i, t := range at {
					moved[i] = t.Add(shift)
				}
				out = append(out, opening{about + fmt.Sprintf(", ending before an edge of %v windows", w), moved})
			}
		}
	}
	open(fmt.Sprintf("%d at once", q+1), burst(lead, q+1))
	open("1", burst(lead, 1))
	if qmin != q {
		open(fmt.Sprintf("%d at once", qmin+1), burst(lead, qmin+1))
	}
	for _, w := range times {
		if w/2 < d.most/3 && q > 1 {
			at := append(burst(lead, q/2), burst(lead.Add(w/2), q-q/2+1)...)
			open(fmt.Sprintf("%d at once, %d more %v later", q/2, q-q/2+1, (w/2).Round(time.Millisecond)), at)
		}
		if w < d.most/3 {
			// Spent, then pressed for a window at twice the rate.
			at := burst(lead, q+1)
			gap := max(w/time.Duration(2*q), time.Millisecond)
			for t := gap; t <= w; t += gap {
				at = append(at, lead.Add(t))
			}
			open(fmt.Sprintf("%d at once, then one every %v for %v", q+1, gap.Round(time.Millisecond), w.Round(time.Millisecond)), at)
		}
	}
	return out, edges
}

// burst is k requests back to back from s.
func burst(s time.Time, k int) []time.Time {
	out := make([]time.Time, k)
	for i := range out {
		out[i] = s.Add(time.Duration(i) * 100 * time.Microsecond)
	}
	return out
}

// candidate is an experiment the designer may choose, with the pairs of
// models it is sure to tell apart.
type candidate struct {
	experiment
	apart pairs
}

// candidates returns every experiment the designer considers for models:
// after each opening, a burst of one, half the largest quota or all of it
// at the instants around those at which each model would let the key
// back, and just after the epoch-aligned models' next edges.
func (d designer) candidates(models []model) []candidate {
	n := len(models)
	q := 1
	for _, m := range models {
		q = max(q, m.quota())
	}
	sizes := []int{1}
	if q >= 3 {
		sizes = append(sizes, (q+1)/2)
	}
	if q > 1 {
		sizes = append(sizes, q)
	}
	margin := max(d.u, 2*time.Millisecond)
	openings, edges := d.openings(models)
	var out []candidate
	for _, o := range openings {
		end := o.at[len(o.at)-1]
		preds := make([][]int8, n)
		lenient, strict := make([]state, n), make([]state, n)
		for i, m := range models {
			preds[i], lenient[i], strict[i] = d.continued(m.newState(), m.newState(), o.at)
		}
		opened := newPairs(n)
		for i := range n {
			for j := i + 1; j < n; j++ {
				if parts(preds[i], preds[j]) {
					opened.add(i, j)
				}
			}
		}
		out = append(out, candidate{experiment(o), opened})
		var instants []time.Time
		for i, m := range models {
			if lenient[i] == nil {
				continue
			}
			for _, k := range sizes {
				if t, ok := d.whenBack(m, lenient[i].clone(), end, k); ok {
					instants = append(instants, t.Add(-margin-d.u), t.Add(margin))
				}
			}
		}
		for _, w := range edges {
			instants = append(instants, end.Add(margin).Truncate(w).Add(w).Add(margin))
		}
		slices.SortFunc(instants, time.Time.Compare)
		instants = slices.CompactFunc(instants, func(a, b time.Time) bool { return a.Sub(b).Abs() < margin/2 })
		for _, t := range instants {
			if !t.After(end) || t.Sub(d.start) > d.most {
				continue
			}
			for _, k := range sizes {
				at := burst(t, k)
				probe := make([][]int8, n)
				for i := range models {
					if lenient[i] != nil {
						probe[i], _, _ = d.continued(lenient[i].clone(), strict[i].clone(), at)
					}
				}
				apart := newPairs(n)
				apart.or(opened)
				for i := range n {
					for j := i + 1; j < n; j++ {
						if probe[i] != nil && probe[j] != nil && parts(probe[i], probe[j]) {
							apart.add(i, j)
						}
					}
				}
				out = append(out, candidate{experiment{fmt.Sprintf("%s; %d at +%v", o.about, k, t.Sub(o.at[0]).Round(time.Millisecond)), append(slices.Clone(o.at), at...)}, apart})
			}
		}
	}
	return out
}

// whenBack is the first instant after end at which st, a model's key
// after an opening, admits k at once: found by doubling and then
// bisection, within the designer's horizon.
func (d designer) whenBack(m model, st state, end time.Time, k int) (time.Time, bool) {
	lo := end.UnixNano()
	if st.admits(lo, k) || k > m.quota() {
		return time.Time{}, false
	}
	horizon := d.start.Add(d.most).UnixNano()
	step := int64(time.Millisecond)
	hi := lo + step
	for !st.admits(hi, k) {
		if hi > horizon {
			return time.Time{}, false
		}
		lo, step = hi, 2*step
		hi = lo + step
	}
	return time.Unix(0, firstAt(st, lo, hi, k, int64(20*time.Microsecond))), true
}

// choose picks, from cs, the experiments that tell the most pairs of
// models apart for the requests they cost, until every pair that can be
// told apart is, or budget requests are spent. Pairs with the first model
// (the best so far) weigh most.
func (d designer) choose(n int, cs []candidate, budget int) []experiment {
	apart := newPairs(n)
	gain := func(c candidate) int {
		g := 0
		for i := range n {
			for j := i + 1; j < n; j++ {
				if c.apart.has(i, j) && !apart.has(i, j) {
					g += map[bool]int{true: 4, false: 1}[i == 0]
				}
			}
		}
		return g
	}
	var out []experiment
	used := make([]bool, len(cs))
	for budget > 0 {
		best, bestScore := -1, 0.0
		for e, c := range cs {
			if used[e] || len(c.at) > budget {
				continue
			}
			if score := float64(gain(c)) / float64(len(c.at)); score > bestScore {
				best, bestScore = e, score
			}
		}
		if best < 0 {
			break
		}
		used[best] = true
		out = append(out, cs[best].experiment)
		budget -= len(cs[best].at)
		apart.or(cs[best].apart)
	}
	return out
}

// separating returns the candidate of the fewest requests that tells
// models i and j apart, and whether there is one.
func separating(cs []candidate, i, j int) (candidate, bool) {
	var best candidate
	found := false
	for _, c := range cs {
		if c.apart.has(min(i, j), max(i, j)) && (!found || len(c.at) < len(best.at)) {
			best, found = c, true
		}
	}
	return best, found
}

// contenders returns the models a round of experiments should tell
// apart: those that explain at least floor of the decisions, the best
// first, one of each family, variant and quota at the shortest, the
// longest and the roundest time that explains as much (and, for the best
// three, five between), at most most.
func contenders(s *search, floor float64, most int) []model {
	type kind struct {
		m     model // with no limit
		quota int
	}
	var out []model
	groups := map[kind][]explanation{}
	var order []kind
	for _, e := range s.within(floor) {
		k := kind{e.Model, e.Model.quota()}
		k.m.Limit = limiters.Limit{}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	for n, k := range order {
		g := groups[k]
		top := g[0].Explained
		var same []model
		for _, e := range g {
			if e.Explained == top {
				same = append(same, e.Model)
			}
		}
		pick := []model{same[0]}
		byTime := func(a, b model) int { return cmp.Compare(a.time(), b.time()) }
		slices.SortStableFunc(same, byTime)
		// The shortest and the longest time; for the best three groups
		// some between, so that a round cuts their range in pieces, not
		// in two.
		inner := 0
		if n < 3 {
			inner = 5
		}
		for i := range inner + 2 {
			pick = append(pick, same[i*(len(same)-1)/(inner+1)])
		}
		for _, m := range pick {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
		if len(out) >= most {
			break
		}
	}
	return out[:min(len(out), most)]
}

// near reports whether a and b are within share of each other.
func near(a, b time.Duration, share float64) bool {
	return float64(max(a, b)) <= float64(min(a, b))*(1+share)
}

// agreement is the share of decisions a and b make alike on random
// traffic around their limits: bursts, quiet spells and paced runs, on
// many keys, at instants drawn anywhere (not on a grid).
func agreement(a, b model, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := max(a.Limit.Window(), b.Limit.Window())
	// One step in ten a silence, three a request at the same instant, the
	// rest a request soon after; a quota larger than 20 gets runs long
	// enough to reach it between silences (600 a minute and 599 decide
	// alike on sixty requests).
	q := max(a.quota(), b.quota())
	steps, runs, silence := 60, 200, 10
	if q > 20 {
		steps, runs, silence = 6*q, 40, 3*q/2
	}
	same, all := 0, 0
	for range runs {
		sa, sb := a.newState(), b.newState()
		t := time.Unix(1_800_000_000, 0).Add(time.Duration(rng.Int64N(int64(w)))).UnixNano()
		for range steps {
			r := rng.IntN(10)
			if silence > 10 {
				r = min(r+1, 9) // no silence but the one drawn below
				if rng.IntN(silence) == 0 {
					r = 0
				}
			}
			switch {
			case r == 0:
				t += rng.Int64N(2 * int64(w))
			case r < 4:
			default:
				t += rng.Int64N(int64(w) / int64(max(a.quota(), 1)))
			}
			da, db := sa.admits(t, 1), sb.admits(t, 1)
			if da {
				sa.admit(t, 1)
			} else {
				sa.refuse(t, 1)
			}
			if db {
				sb.admit(t, 1)
			} else {
				sb.refuse(t, 1)
			}
			all++
			if da == db {
				same++
			}
		}
	}
	return float64(same) / float64(all)
}
