package probe

import (
	"cmp"
	"fmt"
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

// predict returns what m decides of at: 1 admitted at every instant each
// request may be decided, -1 refused at every one, 0 either way (and 0 for
// every request after, whose state that one's outcome decides).
func (d designer) predict(m Model, at []time.Time) []int8 {
	out := make([]int8, len(at))
	lenient, strict := m.newState(), m.newState()
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
			return out
		}
	}
	return out
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

// pool returns the experiments that may tell the models apart: after
// each of a few openings on a fresh key (spent at once; half spent, then
// the rest half a window later; spent and then pressed; one request), a
// burst of one, half the quota or the quota at the instants around those
// at which each model would let it back; and the openings themselves
// placed to end just before an edge of each epoch-aligned model's
// windows.
func (d designer) pool(models []Model) []experiment {
	q, qmin := 1, 1<<30
	var times []time.Duration // the windows, and the buckets' times to refill
	var edges []time.Duration // the epoch-aligned windows
	for _, m := range models {
		q, qmin = max(q, m.quota()), min(qmin, m.quota())
		w := m.Limit.Window()
		if !slices.ContainsFunc(times, func(t time.Duration) bool { return near(t, w, 0.02) }) {
			times = append(times, w)
		}
		if !m.Algorithm.IsBucket() && !m.Anchored && !slices.Contains(edges, m.Limit.Per) {
			edges = append(edges, m.Limit.Per)
		}
	}
	margin := max(d.u, 2*time.Millisecond)
	burst := func(s time.Time, k int) []time.Time {
		out := make([]time.Time, k)
		for i := range out {
			out[i] = s.Add(time.Duration(i) * 100 * time.Microsecond)
		}
		return out
	}
	type opening struct {
		about string
		at    []time.Time
	}
	var openings []opening
	lead := d.start.Add(margin)
	open := func(about string, at []time.Time) {
		openings = append(openings, opening{about, at})
		// The same, ending just before an edge of each epoch-aligned
		// model's windows.
		span := at[len(at)-1].Sub(at[0])
		for _, w := range edges {
			edge := lead.Add(span + 2*margin).Truncate(w).Add(w)
			shift := edge.Add(-span - 2*margin).Sub(at[0])
			if shift+span < d.most/2 {
				moved := make([]time.Time, len(at))
				for i, t := range at {
					moved[i] = t.Add(shift)
				}
				openings = append(openings, opening{about + fmt.Sprintf(", ending before an edge of %v windows", w), moved})
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
	var out []experiment
	for _, o := range openings {
		end := o.at[len(o.at)-1]
		var instants []time.Time
		for _, m := range models {
			for _, k := range []int{1, (q + 1) / 2, q} {
				if t, ok := d.whenBack(m, o.at, k); ok {
					instants = append(instants, t.Add(-margin-d.u), t.Add(margin))
				}
			}
		}
		for _, w := range edges {
			edge := end.Add(margin).Truncate(w).Add(w)
			instants = append(instants, edge.Add(margin))
		}
		for _, t := range instants {
			if !t.After(end) || t.Sub(d.start) > d.most {
				continue
			}
			for _, k := range []int{1, (q + 1) / 2, q} {
				if k > 1 && k == (q+1)/2 && q < 3 {
					continue
				}
				at := append(slices.Clone(o.at), burst(t, k)...)
				out = append(out, experiment{about: fmt.Sprintf("%s; %d at +%v", o.about, k, t.Sub(o.at[0]).Round(time.Millisecond)), at: at})
			}
		}
	}
	return out
}

// whenBack is the first instant after the opening at, on a model that
// decided it as it predicts, at which m admits k at once: found by
// doubling and then bisection, within the designer's horizon.
func (d designer) whenBack(m Model, at []time.Time, k int) (time.Time, bool) {
	pred := d.predict(m, at)
	st := m.newState()
	for i, t := range at {
		switch pred[i] {
		case 1:
			st.admit(t.UnixNano(), 1)
		case -1:
			st.refuse(t.UnixNano(), 1)
		default:
			return time.Time{}, false
		}
	}
	lo := at[len(at)-1].UnixNano()
	if st.admits(lo, k) {
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
	return time.Unix(0, firstAdmitting(st, lo, hi, k)), true
}

// choose picks, from pool, the experiments that tell the most pairs of
// models apart for the requests they cost, until every pair that can be
// told apart is or budget requests are spent. Pairs with the first model
// (the best so far) weigh most.
func (d designer) choose(models []Model, pool []experiment, budget int) []experiment {
	preds := make([][][]int8, len(pool))
	for e, x := range pool {
		preds[e] = make([][]int8, len(models))
		for i, m := range models {
			preds[e][i] = d.predict(m, x.at)
		}
	}
	apart := map[[2]int]bool{}
	weight := func(i, j int) int {
		if i == 0 {
			return 4
		}
		return 1
	}
	gain := func(e int) int {
		g := 0
		for i := range models {
			for j := i + 1; j < len(models); j++ {
				if !apart[[2]int{i, j}] && parts(preds[e][i], preds[e][j]) {
					g += weight(i, j)
				}
			}
		}
		return g
	}
	var out []experiment
	used := map[int]bool{}
	for budget > 0 {
		best, bestScore := -1, 0.0
		for e := range pool {
			if used[e] || len(pool[e].at) > budget {
				continue
			}
			if score := float64(gain(e)) / float64(len(pool[e].at)); score > bestScore {
				best, bestScore = e, score
			}
		}
		if best < 0 {
			break
		}
		used[best] = true
		out = append(out, pool[best])
		budget -= len(pool[best].at)
		for i := range models {
			for j := i + 1; j < len(models); j++ {
				if parts(preds[best][i], preds[best][j]) {
					apart[[2]int{i, j}] = true
				}
			}
		}
	}
	return out
}

// separable reports whether any experiment of pool tells a from b.
func (d designer) separable(a, b Model, pool []experiment) bool {
	for _, x := range pool {
		if parts(d.predict(a, x.at), d.predict(b, x.at)) {
			return true
		}
	}
	return false
}

// contenders returns the models a round of experiments should tell
// apart: those that explain at least floor of the decisions, the best
// first, one of each family, variant and quota at the shortest, the
// longest and the roundest time that explains as much, at most most.
func contenders(s *search, floor float64, most int) []Model {
	type kind struct {
		m     Model // with no limit
		quota int
	}
	var out []Model
	groups := map[kind][]Explained{}
	var order []kind
	for _, e := range s.within(floor) {
		k := kind{e.Model, e.Model.quota()}
		k.m.Limit = limiters.Limit{}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	for _, k := range order {
		g := groups[k]
		top := g[0].Explained
		var same []Model
		for _, e := range g {
			if e.Explained == top {
				same = append(same, e.Model)
			}
		}
		byTime := func(a, b Model) int { return cmp.Compare(a.time(), b.time()) }
		for _, m := range []Model{same[0], slices.MinFunc(same, byTime), slices.MaxFunc(same, byTime)} {
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
