package probe

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// families are the four policies a fit tells apart, each by the
// algorithm its models decide as: the three buckets are one policy, and
// decide as GCRA.
var families = []limiters.Algorithm{limiters.FixedWindow, limiters.SlidingLog, limiters.SlidingCounter, limiters.GCRA}

// span is a range of durations the fit searches: a window's length, or a
// bucket's refill interval.
type span struct{ lo, hi time.Duration }

func (s span) ok() bool { return s.lo > 0 && s.hi >= s.lo }

// widen returns s stretched by f either way.
func (s span) widen(f float64) span {
	return span{time.Duration(float64(s.lo) / f), time.Duration(float64(s.hi) * f)}
}

// guess is where a fit looks: the quotas (a window's N, a bucket's
// capacity) and the times (a window's length, a bucket's refill
// interval) that what the probe measured and what the target declared
// point to.
type guess struct {
	quotas    []int
	windows   span
	intervals span
	// window and interval are the likeliest of each.
	window, interval time.Duration
	// claim is what the target or the user says.
	claim claim
	// lean: the probe's decisions are mostly a large quota's bursts
	// (leanPlan), whose noise is not the search's (noise).
	lean bool
	// until is when the search stops trying models (the probe's
	// --max-time, or a little after it); zero, never.
	until time.Time
}

// search is a fit's result: every model it explained the decisions with,
// and how many it explained.
type search struct {
	decisions int
	// timed is how many decisions noise counts: all of them, or, in a
	// lean probe, those not sent back to back on their key.
	timed int
	tried []explanation
	// cut: the search stopped at its guess's until, models untried.
	cut   bool
	claim claim
	top   int // the most decisions a model explains; 0 while searching
}

// claim is what the target (or --limit) says its limit is, as a range:
// a quota, and a window between lo and hi (a reset in whole seconds,
// rounded up, says a window to within a second). Among models that
// explain as much, the one that agrees with it is named.
type claim struct {
	quota  int
	lo, hi time.Duration
}

// agrees reports whether m keeps to c.
func (c claim) agrees(m model) bool {
	w := m.Limit.Window()
	return c.quota > 0 && m.quota() == c.quota && w >= c.lo && w <= c.hi
}

// best returns the best explanation of each family, best first.
func (s *search) best() []explanation {
	s.tier()
	ranked := slices.Clone(s.tried)
	slices.SortStableFunc(ranked, s.better)
	return bestOfEach(ranked)
}

// tier sets top, the most decisions any model tried explains, which
// better ranks from.
func (s *search) tier() {
	s.top = 0
	for _, e := range s.tried {
		s.top = max(s.top, e.Explained)
	}
}

// within returns the models that explain at least share of the
// decisions, best first.
func (s *search) within(share float64) []explanation {
	var out []explanation
	for _, e := range s.tried {
		if e.Decisions > 0 && e.Share() >= share-1e-9 {
			out = append(out, e)
		}
	}
	s.tier()
	slices.SortStableFunc(out, s.better)
	return out
}

// better orders explanations best first: the most decisions explained,
// then the one that agrees with what the target claims, then the plainer
// model (fewer variants), then the rounder limit. Once top is set, the
// models within one decision in 400 of it (at least one) rank as one:
// on a busy host a request or two is decided beyond its interval, and
// 1/49.9ms burst 10 that explains one decision more than 20/s burst 10
// is that noise, not a finding.
func (s *search) better(a, b explanation) int {
	agree := func(e explanation) int {
		if s.claim.agrees(e.Model) {
			return 0
		}
		return 1
	}
	rank := func(e explanation) int {
		if s.top == 0 {
			return -e.Explained
		}
		return max(0, s.top-s.noise()-e.Explained)
	}
	return cmp.Or(
		cmp.Compare(rank(a), rank(b)),
		cmp.Compare(agree(a), agree(b)),
		cmp.Compare(a.Model.oddity(), b.Model.oddity()),
		cmp.Compare(roughness(a.Model), roughness(b.Model)),
		cmp.Compare(b.Explained, a.Explained),
	)
}

// noise is how many decisions fewer than the best a model may explain
// and still rank as one with it: one in 400, at least one (better says
// why).
//
// A request decided beyond its interval is one whose instant matters: in
// a lean probe, where nine decisions in ten are a quota of hundreds sent
// back to back (600 a minute: 1,400 of 1,760), one in 400 of every
// decision would let a model that errs on every other request asked
// alone rank with the best; there it is one in 400 of the rest.
func (s *search) noise() int { return max(1, cmp.Or(s.timed, s.decisions)/400) }

// Fit explains obs with the models g points to, as the probe does: a
// first pass over each family's quotas and times at its plainest, every
// variant at the best of those, then a finer pass around the best of
// each. When the best explains under 99% of the decisions, it searches
// again, wider. It returns the best explanation of each family, best
// first, and every model it tried.
func fit(obs []observation, g guess) *search {
	keys := byKey(obs)
	s := &search{decisions: len(obs), timed: len(obs), claim: g.claim}
	if g.lean {
		s.timed = 0
		for _, k := range keys {
			for i, o := range k {
				if i == 0 || o.Sent.Sub(k[i-1].Sent) > 2*time.Millisecond {
					s.timed++
				}
			}
		}
	}
	s.pass(keys, g)
	if b := s.best(); len(b) == 0 || b[0].Share() < 0.99 {
		wide := guess{windows: g.windows.widen(2.5), intervals: g.intervals.widen(2.5), claim: g.claim, lean: g.lean, until: g.until}
		for _, q := range g.quotas {
			// A quarter either way of a quota measured in a few
			// requests; a lean probe's was counted in one burst of
			// hundreds, and is off by a few at most (nginx's burst=600
			// undeclared: the 301 quotas of a quarter took 9.5 minutes).
			off := max(q/4, 3)
			if g.lean {
				off = max(q/50, 3)
			}
			for d := -off; d <= off; d++ {
				if q+d >= 1 && !slices.Contains(wide.quotas, q+d) {
					wide.quotas = append(wide.quotas, q+d)
				}
			}
		}
		s.pass(keys, wide)
	}
	return s
}

// pass is one search of g: coarse, then the variants, then fine.
func (s *search) pass(keys [][]observation, g guess) {
	ps := &passing{s: s, keys: keys, g: g, n: s.decisions, seen: map[model]bool{}}
	ps.forget()
	quotas := spread(g.quotas)
	var counterTimes []time.Duration
	var counterCoarse, counterVaried []explanation
	defer func() {
		// A counter at a phase of its own only when nothing else explains
		// 99%: tried beside a bucket that does, one at a phase tied with
		// it by chance (5/350ms at 18ms, beside 10/s burst 6). Not for a
		// lean probe, whose every model tried costs a quota of hundreds.
		if b := s.best(); g.lean || (len(b) > 0 && b[0].Share() >= 0.99) {
			return
		}
		s.counterPhased(counterTimes, counterCoarse, counterVaried, ps.try)
	}()
	for _, a := range families {
		times := grid(g.windows, a, 0.02)
		if a.IsBucket() {
			times = grid(g.intervals, a, 0.02)
		}
		coarse := ps.coarse(a, quotas, times)
		varied := ps.varied(a, coarse)
		switch a {
		case limiters.FixedWindow:
			varied = append(varied, s.phased(keys, times, coarse, varied, ps.try)...)
			slices.SortStableFunc(varied, s.better)
		case limiters.SlidingCounter:
			counterTimes, counterCoarse, counterVaried = times, coarse, varied
		}
		ps.fine(a, varied)
	}
}

// passing is one pass of a search over the models of a guess: the keys'
// observations, the decisions, and the models tried already.
type passing struct {
	s    *search
	keys [][]observation
	g    guess
	n    int
	seen map[model]bool
}

// forget makes the models tried in this pass untried again, but for those
// the search has (those that explained every decision they were asked).
func (ps *passing) forget() {
	clear(ps.seen)
	for _, e := range ps.s.tried {
		ps.seen[e.Model] = true
	}
}

// try explains the decisions with m, giving up once it misses wrong of
// them: its explanation, kept by the search, or false (tried already,
// implausible, invalid, given up on, or past the guess's time).
func (ps *passing) try(m model, wrong int) (explanation, bool) {
	s, g := ps.s, ps.g
	if s.cut || !g.until.IsZero() && time.Now().After(g.until) {
		s.cut = true
		return explanation{}, false
	}
	if ps.seen[m] || !plausible(m) || m.Validate() != nil {
		return explanation{}, false
	}
	ps.seen[m] = true
	got, all := explain(ps.keys, m, wrong)
	if !all {
		return explanation{}, false
	}
	e := explanation{Model: m, Explained: got, Decisions: ps.n}
	s.tried = append(s.tried, e)
	return e, true
}

// coarse tries family a's plain variants at every quota and time, giving
// up on a model once it has missed a tenth, then a quarter, of the
// decisions; if none explains that much, every variant; if still none,
// the plain ones all the way, for the best there is. Best first.
func (ps *passing) coarse(a limiters.Algorithm, quotas []int, times []time.Duration) []explanation {
	n := ps.n
	var coarse []explanation
	for _, round := range []struct {
		all   bool
		wrong int
	}{{true, n / 10}, {true, n / 4}, {false, n}} {
		for _, v := range allVariants(a) {
			if !round.all && (v.oddity() > 1 || v.CountsRefused || v.Seconds) {
				continue // the plain forms, and the anchored windows
			}
			for _, q := range quotas {
				for _, t := range times {
					if e, ok := ps.try(v.with(q, t), round.wrong); ok {
						coarse = append(coarse, e)
					}
				}
			}
		}
		if len(coarse) > 0 {
			break
		}
		ps.forget()
	}
	slices.SortStableFunc(coarse, ps.s.better)
	return coarse
}

// varied tries every variant of family a at the best few quotas and
// times coarse found. Best first.
func (ps *passing) varied(a limiters.Algorithm, coarse []explanation) []explanation {
	n := ps.n
	var varied []explanation
	for _, c := range coarse[:min(len(coarse), 4)] {
		varied = append(varied, c)
		q, t := c.Model.quota(), c.Model.time()
		for _, v := range allVariants(a) {
			if e, ok := ps.try(v.with(q, t), n-c.Explained+n/50); ok {
				varied = append(varied, e)
			}
		}
	}
	slices.SortStableFunc(varied, ps.s.better)
	return varied
}

// fine tries the best three of varied, each at quotas one off and times
// within 5% in steps of 0.2%.
func (ps *passing) fine(a limiters.Algorithm, varied []explanation) {
	n := ps.n
	for _, c := range varied[:min(len(varied), 3)] {
		q, t := c.Model.quota(), c.Model.time()
		fine := grid(span{t * 95 / 100, t * 105 / 100}, a, 0.002)
		for _, dq := range []int{0, -1, 1} {
			for _, ft := range fine {
				ps.try(c.Model.with(q+dq, ft), n-c.Explained+n/100)
			}
		}
	}
}

// spread returns qs and the quotas one and two off each.
func spread(qs []int) []int {
	var out []int
	for _, q := range qs {
		for _, d := range []int{0, -1, 1, -2, 2} {
			if q+d >= 1 && !slices.Contains(out, q+d) {
				out = append(out, q+d)
			}
		}
	}
	return out
}

// with returns m at quota q and time t: a window's N and length, a
// bucket's capacity and refill interval.
func (m model) with(q int, t time.Duration) model {
	if m.Algorithm.IsBucket() {
		m.Limit = bucketLimit(q, t)
	} else {
		m.Limit = limiters.Limit{N: q, Per: t}
	}
	return m
}

// quota is m's N, or a bucket's capacity.
func (m model) quota() int { return m.Limit.Quota() }

// time is m's window, or a bucket's refill interval.
func (m model) time() time.Duration {
	if m.Algorithm.IsBucket() {
		return m.Limit.Interval()
	}
	return m.Limit.Per
}

// bucketLimit is the limit of a bucket of capacity c refilled every t,
// written as people write rates: 10/s rather than 1/100ms where a second,
// a minute or an hour holds a whole number of refills.
func bucketLimit(c int, t time.Duration) limiters.Limit {
	for _, u := range []time.Duration{time.Second, time.Minute, time.Hour} {
		if t <= u && u%t == 0 {
			return limiters.Limit{N: int(u / t), Per: u, Burst: c}
		}
	}
	return limiters.Limit{N: 1, Per: t, Burst: c}
}

// grid returns the times of s a fit tries for algorithm a: the round ones
// first (whole minutes, seconds, tenths and hundredths of a second, or
// for a bucket whole rates a second, a minute and an hour), then steps of
// step, relatively, across s. Epoch-aligned windows only make sense at
// round lengths: a fixed window or a counter tries only those (and its
// anchored variants everything).
func grid(s span, a limiters.Algorithm, step float64) []time.Duration {
	if !s.ok() {
		return nil
	}
	var out []time.Duration
	add := func(d time.Duration) {
		if d >= s.lo && d <= s.hi && d > 0 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if a.IsBucket() {
		for _, u := range []time.Duration{time.Second, time.Minute, time.Hour} {
			lo, hi := max(int64(u/s.hi), 1), int64(u/s.lo)
			if hi-lo > 400 {
				continue // a unit too fine for these rates: the steps cover it
			}
			for k := lo; k <= hi; k++ {
				if u%time.Duration(k) == 0 {
					add(u / time.Duration(k))
				}
			}
		}
	} else {
		for _, u := range []time.Duration{time.Hour, time.Minute, time.Second, 100 * time.Millisecond, 10 * time.Millisecond} {
			for k := s.lo / u; k*u <= s.hi && len(out) < 400; k++ {
				add(k * u)
			}
		}
	}
	for d := float64(s.lo); d <= float64(s.hi); d *= 1 + step {
		add(time.Duration(math.Round(d)))
	}
	return out
}

// roughness is how unround m's limit is: 0 for a whole number a second,
// a minute or an hour (a bucket) or a window of whole minutes or seconds,
// more for tenths, hundredths and the rest.
func roughness(m model) int {
	t := m.time()
	if m.Algorithm.IsBucket() {
		for i, u := range []time.Duration{time.Second, time.Minute, time.Hour} {
			if t <= u && u%t == 0 {
				return i
			}
		}
		return 4
	}
	for i, u := range []time.Duration{time.Minute, time.Second, 100 * time.Millisecond, 10 * time.Millisecond} {
		if t%u == 0 {
			return i
		}
	}
	return 5
}

// plausible reports whether m is a model a limiter could be configured
// as: windows aligned on the epoch are a whole number of tenths of a
// second long (hundredths, under a second), and windows on a clock kept
// in seconds a whole number of seconds (a bucket on such a clock, a whole
// rate a second or a minute). At other lengths the first fall anywhere,
// and would fit noise; the second decide as the next whole second does.
func plausible(m model) bool {
	switch {
	case m.Algorithm.IsBucket() && m.Seconds:
		return roughness(m) <= 1 // a whole rate a second, or a minute
	case m.Algorithm.IsBucket():
		return true
	case m.Seconds:
		return m.Limit.Per%time.Second == 0 // a clock in seconds, a window in seconds
	case m.Anchored:
		return true
	}
	unit := 100 * time.Millisecond
	if m.Limit.Per < time.Second {
		unit = 10 * time.Millisecond
	}
	return m.Limit.Per%unit == 0
}
