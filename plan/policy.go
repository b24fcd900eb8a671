package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// A policy is chosen by separation, not by a rule fitted to one shape of
// traffic. At each rate the keys' least bursts, sorted, show where a few
// keys stand far apart from all the rest: a gap, as a ratio, with at most
// Config.Outliers of the keys above it. Apps that open with a fan-out,
// dashboards, batch syncs at their own pace, steady relays: each class
// needs what it needs, and what sets the abusers apart is not a property
// of any one class but the distance from all of them. Where no rate has a
// gap of Config.Margin or more, nothing separates, and the plan says so:
// its answer is then the policy that spares all but Config.Spare of the
// keys, whoever is above.

// Gap is where a few keys stand apart from the rest on one measure (the
// least burst at a rate, the most in a window of a length): the keys
// below it and the most any of them needs, the keys above and the least
// any of them needs.
type Gap struct {
	Kept, Out          int
	KeptMost, OutLeast int64
}

// Ratio is how far apart the two sides stand: the least above over the
// most below (0 for no gap).
func (g Gap) Ratio() float64 {
	if g.Out == 0 || g.KeptMost <= 0 {
		return 0
	}
	return float64(g.OutLeast) / float64(g.KeptMost)
}

// minApart is how many requests the first key above a gap needs beyond
// the most below it, at least: at a high rate every key needs a burst of
// one to five, and three times one is noise, not separation.
const minApart = 10

// chooseBucket picks the frontier's point the plan suggests (an index in
// f) and its burst. Among the rates where a few keys stand apart, the one
// that sets the most of them apart (a rate above a scraper's own sets the
// scraper among the rest; a rate where one runaway stands alone, however
// far, forgets the others), then the widest gap: its burst inside the gap,
// what the kept keys need times headroom, below what the first key above
// needs. Where none separates, the bucket that spares all but spare of the
// keys and lets the least through in the longest window the log reaches
// (horizon): the least of burst + rate × horizon.
func chooseBucket(f []FrontierPoint, headroom float64, horizon time.Duration, spares func(k int, burst int64) bool) (k int, burst int64, separated bool) {
	k = -1
	burstAt := func(i int) int64 {
		g := f[i].Gap
		return min(int64(math.Ceil(float64(g.KeptMost)*headroom)), g.OutLeast-1)
	}
	// Of as many apart, a rate whose bucket spares the steady pollers as
	// it is: no tier of their own.
	better := func(i int) bool {
		a, b := f[i].Gap, f[k].Gap
		if a.Out != b.Out {
			return a.Out > b.Out
		}
		if si, sk := spares(i, burstAt(i)), spares(k, burstAt(k)); si != sk {
			return si
		}
		return a.Ratio() > b.Ratio()
	}
	for i, p := range f {
		if p.Separated && (k < 0 || better(i)) {
			k = i
		}
	}
	if k >= 0 {
		return k, burstAt(k), true
	}
	best := math.Inf(1)
	for i, p := range f {
		b := int64(math.Ceil(float64(p.Burst) * headroom))
		if through := float64(b) + perSecond(p.Rate)*horizon.Seconds(); through < best {
			k, burst, best = i, b, through
		}
	}
	return k, burst, false
}

// windowPair suggests a short and a long window together (a request
// admitted only if both admit it) for the keys ids, from their envelope,
// that refuse the keys apart (the bucket's, when it sets some apart) and
// no other. When apart is nil, the keys are those that stand apart at
// either length of a pair (separate), when they are few enough.
//
// Each window's N is what the kept keys send in it times headroom, and
// no less than what they send in twice its length (a sliding counter
// weighs the window before, and would refuse a kept key whose two
// windows' sum passes N). A pair is suggested only if its forms refuse
// the same keys: its short window can bind (N below the long's), and
// every key it refuses sends more than twice N in one of them (so that a
// fixed window, whose edge can split a burst in two, a sliding counter,
// and nginx's buckets, which admit up to 2N after quiet, all refuse it
// too), margin apart. Of those, the pair that sets the most keys apart,
// then by the widest margin (each refused key's most over the kept keys'
// most, in the window that refuses it best: the least of those), then
// the shortest. Where none is: none, for the keys given (a pair that
// refuses others would be a rival answer); else the pair that spares all
// but spare of the keys, not called a separation.
func (cs *curves) windowPair(ids, apart []int32, span time.Duration, c Config) (WindowPair, []int32) {
	var lengths []int
	for k, d := range cs.periods {
		if k == 0 || time.Duration(d) <= span {
			lengths = append(lengths, k)
		}
	}
	if len(lengths) < 2 || len(ids) == 0 {
		return WindowPair{}, nil
	}
	maxOut := maxOutliers(len(ids), c.Outliers)
	// The keys that stand apart at each length, when no set is given.
	var at map[int][]int32
	if apart == nil {
		at = cs.apartAt(ids, lengths, maxOut, c.Margin)
	}
	// The short windows of a second and more first: a person reads them
	// more easily than a tenth of one.
	order := slices.Clone(lengths)
	slices.SortStableFunc(order, func(a, b int) int {
		da, db := time.Duration(cs.periods[a]), time.Duration(cs.periods[b])
		return cmp.Or(cmp.Compare(boolInt(da < time.Second), boolInt(db < time.Second)), cmp.Compare(da, db))
	})
	var best WindowPair
	var caught []int32
	out := make([]bool, len(cs.of))
	for _, k2 := range lengths {
		for _, k1 := range order {
			if k1 >= k2 {
				continue
			}
			set := apart
			if set == nil {
				set = slices.Compact(slices.Sorted(slices.Values(slices.Concat(at[k1], at[k2]))))
			}
			// The bucket's keys, however many (a botnet's), or a few.
			if len(set) == 0 || apart == nil && len(set) > maxOut {
				continue
			}
			w, ok := cs.separating(ids, set, out, k1, k2, c)
			if ok && (best.Short.N == 0 || len(set) > len(caught) || len(set) == len(caught) && w.Margin > best.Margin) {
				best, caught = w, set
			}
		}
	}
	if best.Separated || apart != nil {
		return best, caught // none, when no pair sets the bucket's keys apart
	}
	return cs.sparingPair(ids, lengths, c)
}

// apartAt are, at each length of lengths, the keys of ids that stand
// apart there (separate: at most maxOut of them, margin apart).
func (cs *curves) apartAt(ids []int32, lengths []int, maxOut int, margin float64) map[int][]int32 {
	at := make(map[int][]int32)
	v := make([]int64, len(ids))
	for _, k := range lengths {
		for i, id := range ids {
			v[i] = cs.peak(id, k)
		}
		slices.Sort(v)
		if g, ok := separate(v, maxOut, margin); ok {
			for _, id := range ids {
				if cs.peak(id, k) > g.KeptMost {
					at[k] = append(at[k], id)
				}
			}
		}
	}
	return at
}

// separating is the pair of windows at lengths k1 and k2 that spares the
// keys of ids not in set (pairFor; out is scratch, all false), and
// whether it sets set apart in each of its forms: its short window can
// bind, every key of set sends more than twice N in one of them, margin
// apart from the kept keys' most.
func (cs *curves) separating(ids, set []int32, out []bool, k1, k2 int, c Config) (WindowPair, bool) {
	for _, id := range set {
		out[id] = true
	}
	w := cs.pairFor(ids, out, k1, k2, c.Headroom)
	for _, id := range set {
		out[id] = false
	}
	if w.Short.N >= w.Long.N {
		return w, false // the short window could never refuse what the long admits
	}
	margin := math.Inf(1)
	agree := true
	for _, id := range set {
		a1, a2 := cs.peak(id, k1), cs.peak(id, k2)
		agree = agree && (a1 > 2*int64(w.Short.N) || a2 > 2*int64(w.Long.N))
		margin = min(margin, max(float64(a1)/float64(w.keptMost[0]), float64(a2)/float64(w.keptMost[1])))
	}
	if !agree || margin < c.Margin {
		return w, false
	}
	w.Clients, w.Margin, w.Separated = int64(len(set)), margin, true
	return w, true
}

// pairFor is the pair of windows at lengths k1 and k2 that spares every
// key of ids not out: each N what the kept keys send in it times
// headroom, and no less than what they send in twice its length.
func (cs *curves) pairFor(ids []int32, out []bool, k1, k2 int, headroom float64) WindowPair {
	var most, most2 [2]int64
	for _, id := range ids {
		if out[id] {
			continue
		}
		for i, k := range []int{k1, k2} {
			most[i] = max(most[i], cs.peak(id, k))
			most2[i] = max(most2[i], cs.peak2(id, k))
		}
	}
	n := func(i int) int { return int(max(int64(math.Ceil(float64(most[i])*headroom)), most2[i], 1)) }
	return WindowPair{Short: limiters.Limit{N: n(0), Per: time.Duration(cs.periods[k1])},
		Long: limiters.Limit{N: n(1), Per: time.Duration(cs.periods[k2])}, keptMost: [2]int64{max(most[0], 1), max(most[1], 1)}}
}

// sparingPair is the pair of windows, a second (or the shortest length
// after it) and the longest the log reaches, that spares all but the
// spare share of the keys: each window all but half of it.
func (cs *curves) sparingPair(ids []int32, lengths []int, c Config) (WindowPair, []int32) {
	short := lengths[0]
	for _, k := range lengths {
		if time.Duration(cs.periods[k]) >= time.Second {
			short = k
			break
		}
	}
	v := make([]int64, len(ids))
	quantile := func(k int, of func(int32, int) int64) int64 {
		for i, id := range ids {
			v[i] = of(id, k)
		}
		slices.Sort(v)
		_, _, _, _, _, q := quantiles(v, c.Spare/2)
		return q
	}
	n := func(k int) int {
		return int(max(int64(math.Ceil(float64(quantile(k, cs.peak))*c.Headroom)), quantile(k, cs.peak2), 1))
	}
	for i := len(lengths) - 1; i >= 0 && lengths[i] > short; i-- {
		long := lengths[i]
		w := WindowPair{Short: limiters.Limit{N: n(short), Per: time.Duration(cs.periods[short])}, Long: limiters.Limit{N: n(long), Per: time.Duration(cs.periods[long])}}
		if w.Short.N >= w.Long.N {
			continue
		}
		var refused []int32
		for _, id := range ids {
			if cs.peak(id, short) > int64(w.Short.N) || cs.peak(id, long) > int64(w.Long.N) {
				refused = append(refused, id)
			}
		}
		w.Clients = int64(len(refused))
		return w, refused
	}
	return WindowPair{}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Verdict is the plan's answer in a few sentences, its first lines: the
// keys that stand apart and by how much, and the policy that refuses
// them; or, where none stands apart, that the policy spares all but
// --spare and is no line between customers and abusers.
func (p *Plan) Verdict() string {
	b := p.Bucket
	if b.Rate.N == 0 {
		return "No policy: the log has no key to plan for but keys shared by many users."
	}
	var s strings.Builder
	g := b.Gap
	if p.Separated {
		fmt.Fprintf(&s, "%s of %s %s apart from all the rest: at %s every other key needs a burst of at most %s, each of %s at least %s: %s× apart. ",
			plural(int64(g.Out), "key"), results.Count(int64(p.Users)), verb(g.Out, "stand"), products.RateWords(b.Rate), results.Count(g.KeptMost), them(g.Out), results.Count(g.OutLeast), roundWords(g.Ratio()))
		share := ""
		if b.Refused >= 0 { // a merged plan decides no request
			share = fmt.Sprintf(" (%s of the requests)", percent(b.Refused, p.Decided))
		}
		fmt.Fprintf(&s, "The policy: a bucket of %s for every key, which refuses only %s%s", b.Policy(), them(g.Out), share)
		for _, c := range p.Classes {
			if c.Refused && c.Key == "" {
				fmt.Fprintf(&s, " (of them, %d alike keys, %s of the keys and %s of the requests, sustain their excess together, as a botnet's addresses do)",
					c.Keys, report.Percentage(float64(c.Keys)/float64(max(p.Users, 1))), percent(c.Requests, p.Requests))
			}
		}
	} else {
		widest := ""
		for _, f := range p.Frontier {
			if f.Gap.Ratio() > 0 && (widest == "" || f.Gap.Ratio() > g.Ratio()) {
				g, widest = f.Gap, fmt.Sprintf(" (the widest: %.2g× at %s, %s)", f.Gap.Ratio(), products.RateWords(f.Rate), plural(int64(f.Gap.Out), "key"))
			}
		}
		fmt.Fprintf(&s, "No key stands apart: at no rate do at most %s (--outliers %s) need %g× (--margin) what every other key does%s. ",
			plural(int64(maxOutliers(p.Users, p.Config.Outliers)), "key"), report.Percentage(p.Config.Outliers), p.Config.Margin, widest)
		fmt.Fprintf(&s, "The policy spares all but --spare (%s) of the keys: a bucket of %s, refusing %s; it is no line between customers and abusers",
			report.Percentage(p.Config.Spare), b.Policy(), plural(b.Clients, "key"))
	}
	if w := p.Windows; w.Short.N == 0 && p.Separated {
		fmt.Fprintf(&s, "; no two windows set %s apart in each of their forms", them(g.Out))
	} else if w.Short.N > 0 {
		switch {
		case w.Separated && sameKeys(p.Caught, p.WindowsCaught):
			fmt.Fprintf(&s, "; or two windows, %s and %s (%s× apart), refusing the same", w.Short, w.Long, roundWords(w.Margin))
		case w.Separated:
			fmt.Fprintf(&s, "; or two windows, %s and %s, refusing %s that stand %s× apart", w.Short, w.Long, plural(w.Clients, "key"), roundWords(w.Margin))
		default:
			fmt.Fprintf(&s, "; no two windows set them apart (those sparing all but --spare, %s and %s, refuse %s)", w.Short, w.Long, plural(w.Clients, "key"))
		}
	}
	s.WriteString(".")
	if t := p.SharedTier; t.Keys > 0 && t.Scale == 1 {
		fmt.Fprintf(&s, " The bucket spares the %s that %s like many users as it is.", plural(int64(t.Keys), "key"), verb(t.Keys, "look"))
	} else if t.Keys > 0 {
		fmt.Fprintf(&s, " The %s that %s like many users: a tier of %s, the bucket ×%g.", plural(int64(t.Keys), "key"), verb(t.Keys, "look"), t.Policy, t.Scale)
	}
	if t := p.PollerTier; t.Keys > 0 {
		every := ""
		if c := p.pollerClass(); c != nil {
			every = " " + strings.TrimPrefix(c.Shape(), "polling ")
		}
		if t.Scale == 1 {
			fmt.Fprintf(&s, " The bucket spares the %s that %s%s (monitors, health checks) as it is.", plural(int64(t.Keys), "key"), verb(t.Keys, "poll"), every)
		} else {
			fmt.Fprintf(&s, " The %s that %s%s (monitors, health checks): a tier of %s, the bucket ×%g.", plural(int64(t.Keys), "key"), verb(t.Keys, "poll"), every, t.Policy, t.Scale)
		}
	}
	for _, pp := range p.Products {
		s.WriteString(productVerdict(pp, p.Bucket.Refused))
	}
	if r := p.Current; r != nil {
		fmt.Fprintf(&s, " Your limit today, %s, refuses %s", r.Name, plural(r.Clients, "key"))
		if w := r.byClassWords(p.Classes); w != "" {
			fmt.Fprintf(&s, ": %s", w)
		}
		s.WriteString(".")
		if r.Nodes > 1 {
			s.WriteString(" " + r.nodesWords())
		}
	}
	return s.String()
}

// verb is v as n things do it: "looks" for one.
func verb(n int, v string) string {
	if n == 1 {
		return v + "s"
	}
	return v
}

// them is "them" for several keys, "it" for one.
func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// sameKeys reports whether a and b hold the same keys.
func sameKeys(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// percent is n of total as a percentage.
func percent(n int64, total int) string {
	return report.Percentage(float64(n) / float64(max(total, 1)))
}
