package probe

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Most published limits are more than one number: 80 a minute with 500
// an hour, 5 a second with 1,000 an hour, nginx's two zones on one
// location. A fingerprint planned for the first limit never reaches a
// longer one, and a fit that explains every decision it saw says 100%;
// but a limit the probe did not press is not one it may call absent.
// So once the first is named, a fresh key is sent a steady run just under
// its rate, as long as the budget allows (or a little longer than the
// longest window the target declares): a refusal there is a second
// limit's, which is then fitted with the first held, every family at
// the quotas and windows the run allows; and where none comes, the probe
// says how far it looked.

// Longer is what the probe found of a second, longer limit.
type Longer struct {
	// Looked says how far it looked: "no second limit up to 1m30s at
	// 4.75/s", or "a second limit: sliding-log 40/min".
	Looked string `json:"looked"`
	// Second is the second limit named, in the lab's syntax, after its
	// algorithm ("" for none): Algorithm's Limit.
	Second    string             `json:"second,omitempty"`
	Algorithm limiters.Algorithm `json:"algorithm,omitempty"`
	Limit     string             `json:"limit,omitempty"`
	// Requests and Seconds are what the run took.
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
}

// sustained is the rate of m's first limit a second: what a key sends
// forever without a refusal.
func sustained(m model) float64 { return float64(m.Limit.N) / m.Limit.Per.Seconds() }

// longer looks for a second limit beside m, the model named, and returns
// the model with it (m when none is found, or none explains enough).
func (p *prober) longer(ctx context.Context, m model) (model, error) {
	r := p.r
	if m.Algorithm == "" || m.Algorithm == InFlight || m.Limit.Per <= 0 {
		return m, nil
	}
	rate, span, ok := p.lookSpan(m)
	if !ok {
		return m, nil
	}
	key := p.key("longer")
	gap := time.Duration(float64(time.Second) / rate)
	var plan []request
	for at := time.Duration(0); at < span; at += gap {
		plan = append(plan, request{Key: key, At: at})
	}
	p.say("a second limit? %d requests on a fresh key at %.3g a second, under the first's %.3g, for up to %v", len(plan), rate, sustained(m), span.Round(time.Second))
	began, sent := p.x.now(), p.requests
	// Stopped once the second limit has gone round once: refused, then
	// admitted again, then refused again (a window's recovery and its
	// end, which tell a log from a fixed window); or at the run's end.
	var firstRefused time.Time
	admittedAfter, refusedAgain := 0, false
	stop := func(a answer) bool {
		if !a.Decided() {
			return true
		}
		switch {
		case !a.Admitted && firstRefused.IsZero():
			firstRefused = a.Sent
		case a.Admitted && !firstRefused.IsZero() && a.Sent.After(firstRefused):
			admittedAfter++
		case !a.Admitted && admittedAfter >= 3:
			refusedAgain = true
		}
		return !refusedAgain || a.Sent.Sub(began) < 2*firstRefused.Sub(began)
	}
	got, err := p.send(ctx, plan, time.Time{}, stop)
	// Stopped (Ctrl-C): what the run saw is judged all the same, and
	// said as far as it went; the error is returned after.
	stopped := err != nil && ctx.Err() != nil && len(got) > 0
	if err != nil && !stopped {
		return m, err
	}
	l := &Longer{Requests: p.requests - sent, Seconds: p.x.now().Sub(began).Seconds()}
	r.Longer = l
	var run []observation
	for _, a := range got {
		if a.Decided() {
			run = append(run, p.decided(a))
		}
	}
	ran := spanOf(got, func(a answer) time.Time { return a.Sent })
	if n, _ := explain(byKey(run), m, len(run)); n == len(run) {
		l.Looked = fmt.Sprintf("no second limit up to %v at %.3g a second", ran.Round(time.Second), rate)
		if stopped {
			l.Looked = fmt.Sprintf("stopped at %v of %v: no second limit up to then, at %.3g a second", ran.Round(time.Second), span.Round(time.Second), rate)
		}
		r.Verdict.Text += "; " + l.Looked
		p.say("%s", l.Looked)
		return m, err
	}
	named, nerr := p.secondNamed(m, run, ran, rate, firstRefused.Sub(began))
	return named, cmp.Or(err, nerr)
}

// lookSpan is the rate and the span the look for a second limit presses
// a fresh key at: just under the first's rate, for --look (a little past
// a window the target declares), within what the checks after it need
// of --max-requests and --max-time; false, said, where that leaves no
// room.
func (p *prober) lookSpan(m model) (rate float64, span time.Duration, ok bool) {
	r, c := p.r, p.c
	rate = min(0.95*sustained(m), float64(c.pacedMost()))
	// What the checks after it need, about: kept back.
	keepRequests := max(200, 4*m.quota())
	keepTime := c.MaxTime / 5
	left := c.MaxRequests - p.requests - keepRequests
	until := p.until.Add(-keepTime)
	span = time.Duration(float64(left) / rate * float64(time.Second))
	if d := time.Until(until); d < span {
		span = d
	}
	look := c.Look
	if declared := max(longestDeclared(r.Claims), c.PolicyAlso.Window()); declared > 0 {
		// A limit the target declares: pressed a little past its window.
		look = max(look, declared*13/10+m.Limit.Window())
	}
	span = min(span, look)
	if span < min(5*m.Limit.Window(), look) || rate < 1e-3 {
		r.Longer = &Longer{Looked: fmt.Sprintf("no room to look for a second limit (%d requests and %v left after the checks')", max(left, 0), time.Until(until).Round(time.Second))}
		p.say("%s", r.Longer.Looked)
		return rate, span, false
	}
	return rate, span, true
}

// secondNamed fits a second limit to the run the first does not explain
// (refused first after toRefusal), and names it in the verdict where the
// two explain enough; else it says what the best was.
func (p *prober) secondNamed(m model, run []observation, ran time.Duration, rate float64, toRefusal time.Duration) (model, error) {
	r, l := p.r, p.r.Longer
	both, explained := p.fitSecond(m, run, ran)
	if both.Also.N == 0 {
		l.Looked = fmt.Sprintf("a second limit refused the run at %.3g a second after %v, and none of the six beside the first explains it", rate, toRefusal.Round(time.Millisecond))
		p.say("%s", l.Looked)
		return m, nil
	}
	o, _ := both.second()
	l.Second, l.Algorithm, l.Limit = o.String(), o.Algorithm, o.Limit.String()
	l.Looked = fmt.Sprintf("a second limit: %s", describe(o))
	v := &r.Verdict
	v.Model, v.Explained, v.Decisions = both.String(), explained, len(p.obs)
	v.Share = float64(explained) / float64(max(len(p.obs), 1))
	v.Text = fmt.Sprintf("%s: %.1f%% of %d decisions", describe(both), 100*v.Share, v.Decisions)
	if v.Share < explainedEnough-1e-9 {
		v.Named, v.Expect = false, ""
		v.Text = "none of the six explains it with a second limit: the best, " + v.Text
		p.say("%s", v.Text)
		return m, nil
	}
	// Told apart only where the run went round: within its span, a
	// second limit of another family may explain as much (the first's
	// family is named, as one configuration most often keeps one).
	v.Unresolved = append(v.Unresolved, p.secondRivals...)
	e := expectOf(both.first(), r.Queue)
	second := expectOf(o, nil)
	e.Also, e.AlsoAlgorithm = second.Limit, second.Algorithm
	v.Expect = e.String()
	p.say("behaves as %s (as --expect takes it: %s)", v.Text, v.Expect)
	return both, nil
}

// longestDeclared is the longest window the target declares, its
// further policies' (0: none).
func longestDeclared(c Claims) time.Duration {
	var most time.Duration
	for _, l := range c.Also {
		most = max(most, l.Window())
	}
	return most
}

// claimed are the second limits the target declares and the user says.
func (p *prober) claimed() []limiters.Limit {
	out := slices.Clone(p.r.Claims.Also)
	if l := p.c.PolicyAlso; l.N > 0 {
		out = append(out, l)
	}
	return out
}

// fitSecond fits a second limit beside m's over every decision: each
// family, plain, at the quotas the run's first refusal allows and the
// windows from its time to three times the run's span, in steps of 2%,
// then the best narrowed to 0.2%; the one that explains the most (the
// roundest window among equals). It returns m with it and how many
// decisions it explains, or m as it was when no second limit explains
// more than m alone.
func (p *prober) fitSecond(m model, run []observation, ran time.Duration) (model, int) {
	keys := byKey(p.obs)
	alone, _ := explain(keys, m, len(p.obs))
	// The run's admissions before its first refusal: the second quota,
	// give or take the first limit's and the network's.
	n0 := 0
	var firstRefusal time.Time
	for _, o := range run {
		if !o.Admitted {
			firstRefusal = o.Sent
			break
		}
		n0++
	}
	if n0 == 0 || firstRefusal.IsZero() {
		return m, alone
	}
	f := &secondFit{p: p, m: m, keys: keys, bestOf: map[limiters.Algorithm]found{}}
	lo := max(firstRefusal.Sub(run[0].Sent)*9/10, m.Limit.Window()*2)
	hi := max(3*ran, lo*2)
	refill := refillAfter(run, firstRefusal)
	quotas := f.quotas(n0)
	for _, a := range families {
		f.searchFamily(a, quotas, lo, hi, refill)
	}
	// Of the families, those within the noise of the best (a decision in
	// two hundred, two at least: a loaded host's).
	most := alone
	for _, b := range f.bestOf {
		most = max(most, b.n)
	}
	noise := max(2, len(p.obs)/200)
	best, bestN := f.choose(alone, most, noise)
	best, bestN = f.narrowFirst(best, bestN)
	p.secondRivals = nil
	for _, a := range families {
		if b := f.bestOf[a]; b.m.Also.N > 0 && b.n >= most-noise && b.m != best {
			o, _ := b.m.second()
			p.secondRivals = append(p.secondRivals, fmt.Sprintf("a second limit of %s explains as many (%d decisions)", describe(o), b.n))
		}
	}
	return best, bestN
}

// secondFit is the search for a second, longer limit beside the first,
// m: the best model of each family found so far, with the decisions it
// explains.
type secondFit struct {
	p      *prober
	m      model
	keys   [][]observation
	bestOf map[limiters.Algorithm]found
}

// found is a model and the decisions it explains.
type found struct {
	m model
	n int
}

// quotas are the second quotas tried: from half the admissions before
// the run's first refusal, n0 (a bucket refills meanwhile), to a few
// more (the first limit's and the network's), every one to 60, then 2%
// apart; and the quotas the target claims.
func (f *secondFit) quotas(n0 int) []int {
	var quotas []int
	for q := max(n0/2, f.m.quota()+1); q <= n0+3; q += max(1, q/50) {
		quotas = append(quotas, q)
	}
	for _, l := range f.p.claimed() {
		if !slices.Contains(quotas, l.N) {
			quotas = append(quotas, l.N)
		}
	}
	return quotas
}

// refillAfter is the rate of run's admissions after its first refusal,
// a bucket's refill (0 for fewer than three of them).
func refillAfter(run []observation, firstRefusal time.Time) float64 {
	var after []time.Time
	for _, o := range run {
		if o.Admitted && o.Sent.After(firstRefusal) {
			after = append(after, o.Sent)
		}
	}
	if len(after) < 3 {
		return 0
	}
	return float64(len(after)-1) / after[len(after)-1].Sub(after[0]).Seconds()
}

// try tries a second limit of algorithm a, q per w, beside the first:
// the family's best where it explains more (among as many: the limit
// claimed, a window the run was too short to see end being the one
// declared; then the rounder).
func (f *secondFit) try(a limiters.Algorithm, q int, w time.Duration) {
	m := f.m
	l := limiters.Limit{N: q, Per: w}
	if a.IsBucket() {
		l.Burst = q
	}
	cand := m
	cand.Also, cand.AlsoAlgorithm = l, a
	if a == m.Algorithm || a.IsBucket() && m.Algorithm.IsBucket() {
		cand.AlsoAlgorithm = "" // the first's
	}
	if cand.Validate() != nil {
		return
	}
	b := f.bestOf[a]
	n, _ := explain(f.keys, cand, len(f.p.obs)-b.n)
	claimed := func(l limiters.Limit) bool {
		return slices.ContainsFunc(f.p.claimed(), func(c limiters.Limit) bool { return c.N == l.N && c.Window() == l.Window() })
	}
	tie := n == b.n && b.m.Also.N > 0
	if n > b.n || tie && claimed(l) && !claimed(b.m.Also) || tie && claimed(l) == claimed(b.m.Also) && roughness(model{Algorithm: a, Limit: l}) < roughness(model{Algorithm: a, Limit: b.m.Also}) {
		f.bestOf[a] = found{cand, n}
	}
}

// searchFamily tries family a's second limits: each quota at windows
// from lo to hi 2% apart, the windows claimed, whole seconds (and ten
// seconds past two minutes), a bucket's window at the refill seen; then
// its best narrowed, and rounded where a round window explains as many.
func (f *secondFit) searchFamily(a limiters.Algorithm, quotas []int, lo, hi time.Duration, refill float64) {
	for _, q := range quotas {
		for w := lo; w <= hi; w = w * 102 / 100 {
			f.try(a, q, w)
		}
		for _, l := range f.p.claimed() {
			f.try(a, q, l.Window())
		}
		for w := lo.Round(time.Second); w <= hi; {
			f.try(a, q, w)
			if w < 2*time.Minute {
				w += time.Second
			} else {
				w += 10 * time.Second
			}
		}
		if refill > 0 {
			w := time.Duration(float64(q) / refill * float64(time.Second))
			for _, pct := range []int{98, 99, 100, 101, 102} {
				f.try(a, q, w*time.Duration(pct)/100)
			}
		}
	}
	b := f.bestOf[a]
	if b.m.Also.N == 0 {
		return
	}
	w0, q0 := b.m.Also.Per, b.m.Also.N
	for w := w0 * 97 / 100; w <= w0*103/100; w += max(w0/500, time.Millisecond) {
		for q := q0 - 2; q <= q0+2; q++ {
			f.try(a, q, w)
		}
	}
	for _, w := range []time.Duration{w0.Round(time.Second), w0.Round(10 * time.Second), w0.Round(time.Minute)} {
		if w > 0 {
			f.try(a, f.bestOf[a].m.Also.N, w)
		}
	}
}

// choose is the best of the families within noise of the most explained
// and above the first limit alone: the first limit's own family first
// (nginx's two zones are two buckets, a tier's limits one algorithm),
// then the most explained.
func (f *secondFit) choose(alone, most, noise int) (model, int) {
	m := f.m
	best, bestN := m, alone
	for _, a := range families {
		b := f.bestOf[a]
		if b.m.Also.N == 0 || b.n < most-noise || b.n <= alone {
			continue
		}
		own := family(a) == m.Family()
		bestOwn := best.Also.N > 0 && family(cmpOrAlgorithm(best)) == m.Family()
		if best.Also.N == 0 || own && !bestOwn || own == bestOwn && b.n > bestN {
			best, bestN = b.m, b.n
		}
	}
	return best, bestN
}

// narrowFirst narrows the first limit with the second beside it (its
// fingerprint saw seconds, the run a minute, and a rate a thousandth off
// drifts a request in a few hundred), then tries it on nginx's clock.
func (f *secondFit) narrowFirst(best model, bestN int) (model, int) {
	unnarrowed := best
	if best.Also.N > 0 {
		for pm := 990; pm <= 1010; pm++ {
			cand := best
			cand.Limit.Per = best.Limit.Per * time.Duration(pm) / 1000
			if cand.Validate() != nil {
				continue
			}
			if n, _ := explain(f.keys, cand, len(f.p.obs)-bestN); n > bestN {
				best, bestN = cand, n
			}
		}
	}
	return onNginxClock(f.keys, best, unnarrowed, bestN)
}

// cmpOrAlgorithm is the second limit's algorithm of m.
func cmpOrAlgorithm(m model) limiters.Algorithm {
	o, _ := m.second()
	return o.Algorithm
}

// onNginxClock tries best, two buckets, as nginx's two zones: on its
// clock, each refill since the last admission rounded down to a
// thousandth of a request, the zone of a minute falls behind a plain
// bucket's by a request in a few hundred over a press of the first's
// pace; and nginx says a rate in whole requests a second or a minute.
// Each limit's nearest of those (from best, and from unnarrowed, the fit
// before the first limit was narrowed), its burst as found; the one that
// explains more than bestN, else best.
func onNginxClock(keys [][]observation, best, unnarrowed model, bestN int) (model, int) {
	if best.Also.N == 0 || !best.Algorithm.IsBucket() || !cmpOrAlgorithm(best).IsBucket() {
		return best, bestN
	}
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	from := best
	for _, c := range []model{unnarrowed, from} {
		for _, first := range nginxRates(c.Limit) {
			for _, second := range nginxRates(c.Also) {
				cand := c
				cand.Limit, cand.Also, cand.Nginx = first, second, true
				if cand.Validate() != nil {
					continue
				}
				if n, _ := explain(keys, cand, total-bestN); n > bestN {
					best, bestN = cand, n
				}
			}
		}
	}
	return best, bestN
}

// nginxRates are the rates nginx can say within 1% of l's, and one more
// either side: whole requests a second and a minute, its burst kept (a
// plain bucket fitted to nginx's 299r/m said 299/60.3s).
func nginxRates(l limiters.Limit) []limiters.Limit {
	var out []limiters.Limit
	for _, per := range []time.Duration{time.Second, time.Minute} {
		r := float64(l.N) * float64(per) / float64(l.Per)
		for n := max(int(math.Floor(r*0.99))-1, 1); n <= int(math.Ceil(r*1.01))+1; n++ {
			out = append(out, limiters.Limit{N: n, Per: per, Burst: l.Burst})
		}
	}
	return out
}
