package probe

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Report is what a probe found: probe.json, and the lab's rows of it
// (File).
type Report struct {
	Schema   int       `json:"schema"`
	Target   string    `json:"target"`
	Key      string    `json:"key"`
	Start    time.Time `json:"start"`
	Elapsed  float64   `json:"elapsed_s"`
	Requests int       `json:"requests"`
	// Undecided are the requests answered neither with an admission nor
	// with the refusal: a 5xx, a 400, none at all (Refusal.Other); but the
	// keyless check's, which it judges by their status.
	Undecided int `json:"undecided"`
	// Refusal is the status that means refused, and what else came back.
	Refusal Refusal `json:"refusal"`
	// Claims are what the target's fields declare.
	Claims Claims `json:"claims"`
	// Calibration is what was measured before planning.
	Calibration Calibration `json:"calibration"`
	// Verdict is the answer: the model that explains the target, or that
	// none of the six does.
	Verdict Verdict `json:"verdict"`
	// Fit is the best explanation of each family, best first.
	Fit []Fit `json:"fit"`
	// Asked are the rounds of experiments sent to tell models apart.
	Asked []Round `json:"asked,omitempty"`
	// Longer is what the probe found of a second, longer limit beside the
	// one named.
	Longer *Longer `json:"longer,omitempty"`
	// Queue is what a limiter that delays holds (none for one that
	// answers at once).
	Queue *Queue `json:"queue,omitempty"`
	// Policy is the limit the accuracy and checks were judged against:
	// the verdict's, else --limit's, else the one declared.
	Policy string `json:"policy"`
	// Accuracy is each of the fingerprint's workloads judged against the
	// policy, as the lab judges its limiters.
	Accuracy    []Accuracy   `json:"accuracy"`
	Concurrency Concurrency  `json:"concurrency"`
	Remaining   Remaining    `json:"remaining"`
	RetryAfter  []RetryAfter `json:"retry_after"`
	Keys        Keys         `json:"keys"`
	Headers     Headers      `json:"headers"`
	Timing      Timing       `json:"timing"`
	// Skipped are the checks not run, each with why: "concurrency: 1200
	// requests at once would pass --max-rate 1000".
	Skipped []string `json:"skipped,omitempty"`

	all     []answer // every answer, for Timing
	fp      []answer // the fingerprint's answers, on keys prefix+part
	prefix  string
	planned limiters.Limit // the limit the fingerprint was planned for
	judged  model          // what the accuracy was judged against
}

// interval is the refill interval the fingerprint was planned for: 0
// when none was sent.
func (r *Report) interval() time.Duration {
	if r.planned.N == 0 {
		return 0
	}
	return r.planned.Interval()
}

// ReportSchema is the version of probe.json. Schema 4 added the refusal
// (its status, where it came from, what else came back), the checks not
// run, the calibration's questions of a limit in flight, what the target
// limits beside the model named, and an accuracy row's note. Schema 3
// added the verdict,
// the claims, the rounds asked, the remaining check and a Retry-After
// check per way of spending; 2 the accuracy, fields, timing and
// calibration.
const ReportSchema = 4

// NoLimit is the fit's algorithm when the target refused none of the
// probe's requests.
const NoLimit limiters.Algorithm = "none"

// Verdict is the probe's answer.
type Verdict struct {
	// Named: the best model explains at least 99% of the decisions, and
	// is the answer; when not, none of the six explains the target and
	// the best is shown as such, or (Model empty) another kind of limiter
	// explains as many and the probe cannot tell the two apart: Text
	// names both, and Unresolved says what would tell them apart.
	Named     bool    `json:"named"`
	Model     string  `json:"model,omitempty"`
	Explained int     `json:"explained"`
	Decisions int     `json:"decisions"`
	Share     float64 `json:"share"`
	// Text is the answer in a sentence.
	Text string `json:"text"`
	// Declared compares the claims (or --limit) with the behaviour:
	// "declares 20/11s; behaves as sliding-log 20/10s", or "" when they
	// agree or nothing was declared.
	Declared string `json:"declared,omitempty"`
	// Unresolved are models that explain as much and that the probe could
	// not tell from the answer, each with why.
	Unresolved []string `json:"unresolved,omitempty"`
	// Expect is the model named as --expect takes it: what a later probe
	// of the same target expects ("gcra 10/s burst 5").
	Expect string `json:"expect,omitempty"`
	// Beside is what the target limits beside the model named: a limit
	// on requests in flight beside a rate limit ("in flight: 4 at once,
	// per key (...)"), or a rate limit, measured, beside a limit in
	// flight.
	Beside string `json:"beside,omitempty"`
}

// explainedEnough is the share of decisions a model must explain to be
// named.
const explainedEnough = 0.99

// Fit is one family's best explanation of every decision the probe saw.
type Fit struct {
	Algorithm limiters.Algorithm `json:"algorithm"`
	Limit     string             `json:"limit"`
	// Variants names how the model differs from its algorithm's exact,
	// epoch-aligned form.
	Variants  []string `json:"variants,omitempty"`
	Explained int      `json:"explained"`
	Decisions int      `json:"decisions"`
	Share     float64  `json:"share"`
	// Wrong are the first decisions it does not explain.
	Wrong []string `json:"wrong,omitempty"`
}

// Round is one round of experiments: what each asked, and the requests.
type Round struct {
	Asked    []string `json:"asked"`
	Requests int      `json:"requests"`
}

// conclude reads the verdict off s, the last fit, and returns the model
// named (zero when none is).
func (p *prober) conclude(s *search) model {
	r := p.r
	best := s.best()
	keys := byKey(p.obs)
	r.Fit = nil
	for _, e := range best {
		f := Fit{Algorithm: e.Model.Algorithm, Limit: shown(e.Model.Limit).String(), Variants: e.Model.variants(),
			Explained: e.Explained, Decisions: e.Decisions, Share: e.Share()}
		f.Wrong = wrongOf(keys, e.Model, r.Start, 5)
		r.Fit = append(r.Fit, f)
	}
	if len(best) == 0 {
		// No model of the times searched went through the decisions at
		// all: the calibration pointed the search far from the target.
		r.Verdict = Verdict{Text: fmt.Sprintf("none of the six explains it: no model of the limits searched (around %s) went through the %d decisions", r.planned, len(p.obs)), Decisions: len(p.obs)}
		p.say("%s", r.Verdict.Text)
		return model{}
	}
	top := best[0]
	v := &r.Verdict
	v.Model, v.Explained, v.Decisions, v.Share = top.Model.String(), top.Explained, top.Decisions, top.Share()
	// Named when some model explains 99% of the decisions; the one named
	// may explain a decision or so fewer and be plainer or rounder (the
	// search ranks those as one).
	if float64(s.top) < explainedEnough*float64(top.Decisions)-1e-9 {
		v.Text = fmt.Sprintf("none of the six explains it: the best, %s, explains %.1f%% of %d decisions", describe(top.Model), 100*top.Share(), top.Decisions)
		if s.cut {
			v.Text += fmt.Sprintf(" (the search stopped at --max-time after %d models; a longer --max-time searches further)", len(s.tried))
		}
		p.say("%s", v.Text)
		return model{}
	}
	rivals := p.rivals(s, top.Model)
	v.Unresolved = unresolvedText(rivals)
	// But not when another kind of limiter explains as much and some
	// request would tell the two apart: which of them the search ranks
	// first is then its preference for the plainer or rounder model, not
	// evidence, and a verdict the user cannot trust is worse than none.
	if tied := tiedOf(rivals); len(tied) > 0 {
		names := []string{describe(top.Model)}
		for _, t := range tied[:min(len(tied), 2)] {
			names = append(names, describe(t.m))
		}
		if n := len(tied) - 2; n > 0 {
			names = append(names, fmt.Sprintf("%d more", n))
		}
		last := len(names) - 1
		v.Model = ""
		v.Text = fmt.Sprintf("cannot tell apart %s and %s: they explain as many of %d decisions (%.1f%%, within %d of each other); %d requests on a fresh key would tell the first two apart: %s",
			strings.Join(names[:last], "; "), names[last], top.Decisions, 100*top.Share(), s.noise(), tied[0].requests, tied[0].by)
		p.say("%s", v.Text)
		return model{}
	}
	v.Named = true
	v.Text = fmt.Sprintf("%s: %.1f%% of %d decisions", describe(top.Model), 100*top.Share(), top.Decisions)
	if q := p.queueOf(top.Model); q != nil {
		r.Queue = q
		v.Text = fmt.Sprintf("%s: %.1f%% of %d decisions; %d of %d held answers on its schedule", describeQueued(top.Model, *q), 100*top.Share(), top.Decisions, q.OnSchedule, q.Checked)
	}
	v.Declared = declaredAgainst(p.c.Policy, r.Claims, top.Model)
	v.Expect = expectOf(top.Model, r.Queue).String()
	p.say("behaves as %s (as --expect takes it: %s)", v.Text, v.Expect)
	return top.Model
}

// expectOf is model m, and the queue q found in front of it, as --expect
// takes them: the algorithm the family is named by (a bucket's is gcra),
// and the limit as the report shows it.
func expectOf(m model, q *Queue) Expect {
	e := Expect{Algorithm: m.Algorithm, Limit: shown(m.Limit)}
	if m.Algorithm.IsBucket() {
		e.Algorithm = limiters.GCRA
	}
	if q != nil && q.Held > 0 {
		e.Queue = q.Held
	}
	return e
}

// shown is l as a report shows it: its period to three significant
// digits (a fit's limit is a point of a range the decisions allow, and
// 20/6038639547ns says more than is known).
func shown(l limiters.Limit) limiters.Limit {
	if l.Per <= 0 {
		return l
	}
	step := time.Duration(math.Pow(10, math.Floor(math.Log10(float64(l.Per)))-2))
	if step > 1 {
		l.Per = max(l.Per.Round(step), step)
	}
	return l
}

// describe names a model for a person: the family (the three buckets as
// one), the limit, the variants.
func describe(m model) string {
	name := string(m.Algorithm)
	if m.Algorithm.IsBucket() {
		name = "bucket (token bucket, leaky bucket, GCRA)"
	}
	first, nginx := m.first(), false
	if _, two := m.second(); two && m.Nginx {
		first.Nginx, nginx = false, true // said once, of both
	}
	s := strings.Join(append([]string{name + " " + shown(m.Limit).String()}, first.variants()...), ", ")
	if o, ok := m.second(); ok {
		o.Nginx = false
		s += "; and " + describe(o)
	}
	if nginx {
		s += "; both on nginx's clock (whole milliseconds and thousandths of a request)"
	}
	return s
}

// describeQueued names a bucket with a queue: its rate, what it admits
// at once, what it holds and for how long, and its variants.
func describeQueued(m model, q Queue) string {
	rate := shown(limiters.Limit{N: m.Limit.N, Per: m.Limit.Per}).String()
	if per := m.Limit.Per / time.Duration(max(m.Limit.N, 1)); per < time.Second && time.Second%per != 0 {
		rate = fmt.Sprintf("%.3g/s", float64(m.Limit.N)/m.Limit.Per.Seconds()) // 1/50.4ms is 19.8/s
	}
	return strings.Join(append([]string{fmt.Sprintf("a bucket with a queue: %s, %s", rate, q)}, m.variants()...), ", ")
}

// rival is a model that explains at least 99% of the decisions, as the
// best does, and is another answer than the best (another, below).
type rival struct {
	m model
	// kind: it is another kind of limiter, of another family or with
	// other variants, not the best's at another limit.
	kind bool
	// tied: it explains as many decisions as the best, within the
	// search's noise (search.better ranks the two as one): the evidence
	// prefers neither.
	tied bool
	// alike: it decides as the best does on any traffic; at these limits
	// the two are one policy.
	alike bool
	// by is an experiment that tells it from the best, as the designer
	// words it, and requests how many requests it takes; "" when no
	// request the probe can time within its clock's uncertainty does.
	by       string
	requests int
}

// rivals returns the models that explain at least 99% of the decisions
// and are another answer than best, one of each family and variant (the
// roundest, which contenders lists first), each with whether it ties
// with best and what would tell the two apart.
func (p *prober) rivals(s *search, best model) []rival {
	models := []model{best}
	seen := map[string]bool{}
	for _, m := range contenders(s, explainedEnough, 40) {
		k := m.Family() + fmt.Sprint(m.kind())
		if m != best && another(m, best) && !seen[k] {
			seen[k] = true
			models = append(models, m)
		}
	}
	explained := map[model]int{}
	for _, e := range s.tried {
		explained[e.Model] = e.Explained
	}
	s.tier()
	d := designer{u: max(p.lat+p.late, time.Millisecond), start: p.x.now(), most: best.Limit.Window()*5/2 + time.Second}
	cs := d.candidates(models)
	var out []rival
	for j, m := range models[1:] {
		// Within the search's noise of the most explained, a tie; but not
		// one that explains fewer than the best and is against what the
		// target claims, where the best keeps to it: two findings, however
		// small, against it (a counter of 599 that truncates, beside the
		// 600 declared, errs on a quota's burst or two of 1,700 decisions).
		tied := explained[m] >= s.top-s.noise() && !(s.claim.agrees(best) && !s.claim.agrees(m) && explained[m] < explained[best])
		r := rival{m: m, kind: m.Family() != best.Family() || !slices.Equal(m.kind(), best.kind()),
			tied: tied, alike: agreement(best, m, 1) == 1}
		if c, ok := separating(cs, 0, j+1); ok {
			r.by, r.requests = c.about, len(c.at)
		}
		out = append(out, r)
	}
	return out
}

// undecided reports whether the probe cannot name the best over r: r is
// another kind of limiter, explains as many decisions, decides otherwise
// on some traffic, and some request the probe can time would tell the two
// apart. (One of the best's kind at another limit is shown as not told
// apart, and the best named: the limit named is a point of the range the
// decisions allow.)
func (r rival) undecided() bool { return r.kind && r.tied && !r.alike && r.by != "" }

// tiedOf returns the rivals the probe cannot name the best over.
func tiedOf(rivals []rival) []rival {
	var out []rival
	for _, r := range rivals {
		if r.undecided() {
			out = append(out, r)
		}
	}
	return out
}

// unresolvedText says of each rival why the probe could not tell it from
// the best (the verdict's Unresolved), at most four: first those it
// cannot name the best over.
func unresolvedText(rivals []rival) []string {
	var alike, out, rest []string
	for _, r := range rivals {
		m := r.m
		m.Limit = shown(m.Limit) // as the report shows it; told apart above at its own
		switch {
		case r.alike:
			alike = append(alike, m.String())
		case r.by == "":
			rest = append(rest, fmt.Sprintf("%s: no request the probe can time within its clock's uncertainty tells them apart", m))
		case r.tied:
			line := fmt.Sprintf("%s: explains as many decisions; told apart by %d requests on a fresh key: %s", m, r.requests, r.by)
			if r.undecided() {
				out = append(out, line)
			} else {
				rest = append([]string{line}, rest...)
			}
		default:
			rest = append(rest, fmt.Sprintf("%s: told apart by requests the budget did not leave room for", m))
		}
	}
	if len(alike) > 0 {
		out = append(out, fmt.Sprintf("%s: decide alike on any traffic; at these limits they are one policy", strings.Join(alike, "; ")))
	}
	out = append(out, rest...)
	return out[:min(len(out), 4)]
}

// another reports whether a and b are different answers: they differ
// (differs), or in their variants.
func another(a, b model) bool {
	return differs(a, b) || !slices.Equal(a.kind(), b.kind()) || phaseApart(a, b)
}

// phaseApart reports whether a's and b's windows start more than 2% of a
// window apart.
func phaseApart(a, b model) bool {
	d := (a.Phase - b.Phase).Abs()
	d = min(d, a.Limit.Per-d)
	return d > a.Limit.Per/50
}

// differs reports whether a and b are different answers: another
// family, another quota, or a rate more than 2% off.
func differs(a, b model) bool {
	if a.Family() != b.Family() || a.quota() != b.quota() {
		return true
	}
	ra, rb := float64(a.Limit.N)/a.Limit.Per.Seconds(), float64(b.Limit.N)/b.Limit.Per.Seconds()
	return ra > rb*1.02 || rb > ra*1.02
}

// declaredAgainst compares what was declared (--limit, else the
// target's fields) with m: "" when they agree.
func declaredAgainst(given limiters.Limit, c Claims, m model) string {
	behaves := "behaves as " + describe(m)
	switch {
	case given != (limiters.Limit{}):
		if given.Quota() != m.quota() || !near(given.Window(), m.Limit.Window(), 0.02) {
			return fmt.Sprintf("given %s with --limit; %s", given, behaves)
		}
	case c.Policy.N > 0:
		w, lo := c.Policy.Window(), c.Policy.Window()
		if !c.Exact {
			lo = w - time.Second // a reset in whole seconds, rounded up
		}
		fw := m.Limit.Window()
		if c.Policy.Quota() != m.quota() || (c.Policy.Per > 0 && (fw < lo*98/100 || fw > w*102/100)) {
			return fmt.Sprintf("declares %s; %s", c.PolicyText, behaves)
		}
	}
	return ""
}

// wrongOf describes the first most decisions m does not explain, at
// seconds from start.
func wrongOf(keys [][]observation, m model, start time.Time, most int) []string {
	var out []string
	follow(keys, m, func(o observation, ok bool) bool {
		if !ok {
			what := "refused, where it admits"
			if o.Admitted {
				what = "admitted, where it refuses"
			}
			out = append(out, fmt.Sprintf("%s at +%.3fs on %s", what, o.Sent.Sub(start).Seconds(), shortKey(o.Key)))
		}
		return len(out) < most
	})
	return out
}

// shortKey is a probe's key without the probe's prefix: "burst",
// "ask-12".
func shortKey(k string) string {
	if rest, ok := strings.CutPrefix(k, "ratelab-probe-"); ok {
		if _, after, ok := strings.Cut(rest, "-"); ok {
			return after
		}
	}
	return k
}

// WriteExchange writes every request the probe sent and what came back,
// one CSV line each, in the order sent: its key (without the probe's
// prefix), when it was sent and answered in seconds from the probe's
// start, and the status (0: no answer). With it a probe's fit can be read
// again, or checked by other means.
func (r *Report) WriteExchange(w io.Writer) error {
	all := slices.Clone(r.all)
	slices.SortStableFunc(all, func(a, b answer) int { return a.Sent.Compare(b.Sent) })
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, "key,sent_s,received_s,status")
	for _, a := range all {
		fmt.Fprintf(b, "%s,%.6f,%.6f,%d\n", shortKey(a.Key), a.Sent.Sub(r.Start).Seconds(), a.Received.Sub(r.Start).Seconds(), a.Status)
	}
	return b.Flush()
}
