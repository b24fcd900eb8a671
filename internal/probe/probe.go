package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Config is what a probe is told: the target, the policy it declares (or
// none: the probe then calibrates first), and its bounds.
type Config struct {
	Target Target
	Policy limiters.Limit
	// Seed draws the sustained run's jitter. The keys are fresh for every
	// probe (a key the target saw before is not fresh).
	Seed uint64
	// Timeout bounds each request.
	Timeout time.Duration
	// MaxRequests bounds the probe's requests, all checks together, and
	// MaxRate those it sends in any one second.
	MaxRequests, MaxRate int
}

// Validate reports whether c can be run, and checks its request budget.
func (c Config) Validate() error {
	if err := c.Target.Validate(); err != nil {
		return err
	}
	if c.Timeout <= 0 || c.MaxRequests < 1 || c.MaxRate < 1 {
		return fmt.Errorf("probe: the timeout (%v), the most requests (%d) and the most a second (%d) must be positive", c.Timeout, c.MaxRequests, c.MaxRate)
	}
	if src := c.Target.Sources; src != nil && len(src.addrs) < sourcesNeeded {
		return fmt.Errorf("probe: --source has %d addresses; the probe's users need %d", len(src.addrs), sourcesNeeded)
	}
	if c.Policy == (limiters.Limit{}) {
		return nil // calibrated first; checked against what is left then
	}
	if c.Policy.N < 1 || c.Policy.Per <= 0 {
		return fmt.Errorf("probe: the policy %s: want a count and a period, as in 10/s burst 6 or 100/1m", c.Policy)
	}
	if n := c.Budget(); n > c.MaxRequests {
		return fmt.Errorf("probe: judging %s takes %d requests, more than --max-requests %d", c.Policy, n, c.MaxRequests)
	}
	if n := c.plan(rand.New(rand.NewPCG(c.Seed, 0)), "").busiest(); n > c.MaxRate {
		return fmt.Errorf("probe: judging %s sends %d requests in its busiest second, more than --max-rate %d", c.Policy, n, c.MaxRate)
	}
	return nil
}

// busiest is the most requests p sends in any one second: of the
// fingerprint, whose parts overlap, or of one of the other checks, which
// run one after another.
func (p plan) busiest() int {
	most := 0
	for _, part := range [][]Request{p.fingerprint, p.concurrent, p.spend, p.keyless} {
		lo := 0
		for hi := range part {
			for part[hi].At-part[lo].At >= time.Second {
				lo++
			}
			most = max(most, hi-lo+1)
		}
	}
	return most
}

// plan is what a probe sends, each part on keys of its own: the
// fingerprint; K at once on a fresh key; a quota and one more on a fresh
// key and then one on another (the Retry-After and isolation checks,
// which then send two more); and twice the quota without a key.
type plan struct {
	fingerprint, concurrent, spend, keyless []Request
}

func (c Config) plan(rng *rand.Rand, prefix string) plan {
	q := max(c.Policy.Quota(), c.Policy.N)
	p := plan{
		fingerprint: Fingerprint(rng, prefix, c.Policy),
		concurrent:  Concurrent(prefix+"concurrent", 2*q),
		spend:       make([]Request, q+2),
		keyless:     make([]Request, 2*q),
	}
	for i := range p.spend {
		p.spend[i] = Request{Key: prefix + "retry", At: time.Duration(i) * time.Millisecond / 10}
	}
	p.spend[q+1].Key = prefix + "other"
	for i := range p.keyless {
		p.keyless[i].At = time.Duration(i) * time.Millisecond / 10
	}
	if c.Target.Key.Kind == "source" {
		p.keyless = nil // every request has an address
	}
	return p
}

// Budget is how many requests the probe sends.
func (c Config) Budget() int {
	p := c.plan(rand.New(rand.NewPCG(c.Seed, 0)), "")
	return len(p.fingerprint) + len(p.concurrent) + len(p.spend) + 2 + len(p.keyless)
}

// Duration is about how long the probe takes.
func (c Config) Duration() time.Duration {
	f := c.plan(rand.New(rand.NewPCG(c.Seed, 0)), "").fingerprint
	// The fingerprint starts on the next edge of a window; the Retry-After
	// check starts a tenth into a window and waits for the advertised
	// time, about a window. (A target that keeps requests waiting for
	// their timeout takes longer.)
	return c.Policy.Per + f[len(f)-1].At + c.Policy.Window() + min(c.Policy.Per, 10*time.Second) + time.Second
}

// Report is what a probe found: probe.json.
type Report struct {
	Schema   int       `json:"schema"`
	Target   string    `json:"target"`
	Key      string    `json:"key"`
	Policy   string    `json:"policy"`
	Start    time.Time `json:"start"`
	Elapsed  float64   `json:"elapsed_s"`
	Requests int       `json:"requests"`
	// Undecided are the requests answered with a 5xx or not at all.
	Undecided int `json:"undecided"`
	// Fit is the best explanation of each family, best first.
	// Calibration says where the policy judged against came from.
	Calibration Calibration `json:"calibration"`
	Fit         []Fit       `json:"fit"`
	// Accuracy is each of the fingerprint's workloads judged against the
	// policy, as the lab judges its limiters.
	Accuracy    []Accuracy  `json:"accuracy"`
	Concurrency Concurrency `json:"concurrency"`
	RetryAfter  RetryAfter  `json:"retry_after"`
	Keys        Keys        `json:"keys"`
	Headers     Headers     `json:"headers"`
	Timing      Timing      `json:"timing"`

	all []Answer // every answer, for Timing
	// The fingerprint's answers and its keys' prefix, to judge them
	// against another policy (Strays).
	fp     []Answer
	prefix string
}

// Keys is how the target treats keys: whether exhausting one user leaves
// another alone, and what it does with requests that carry no key.
type Keys struct {
	// Isolated: a fresh key was admitted right after another was
	// exhausted.
	Isolated bool `json:"isolated"`
	// Keyless is what twice the quota without a key met: "refused (400)",
	// "limited, as one key", or "not limited".
	Keyless string `json:"keyless"`
}

// NoLimit is the fit's algorithm when the target refused none of the
// fingerprint's requests.
const NoLimit limiters.Algorithm = "none"

// ReportSchema is the version of probe.json.
const ReportSchema = 2

// Fit is one family's best explanation of the fingerprint's decisions.
type Fit struct {
	Algorithm     limiters.Algorithm `json:"algorithm"`
	Limit         string             `json:"limit"`
	Anchored      bool               `json:"anchored,omitempty"`
	CountsRefused bool               `json:"counts_refused,omitempty"`
	Explained     int                `json:"explained"`
	Decisions     int                `json:"decisions"`
	Share         float64            `json:"share"`
}

// Concurrency is K requests at once on a fresh key, from K connections:
// a limiter that reads its store and writes it in two steps admits more
// than the quota.
type Concurrency struct {
	Sent     int `json:"sent"`
	Admitted int `json:"admitted"`
	Quota    int `json:"quota"`
	// Allowed is the most the fitted policy could admit of these
	// requests, each decided at the instant of its interval most in its
	// favour: the quota, and what refilled or turned while they were sent.
	Allowed   int `json:"allowed"`
	Undecided int `json:"undecided"`
}

// OverAdmits reports whether the target admitted more than the fitted
// policy allows.
func (c Concurrency) OverAdmits() bool { return c.Admitted > max(c.Allowed, c.Quota) }

// bound is the model the concurrency check holds the target to: the
// fitted family at the declared policy, unless the policy was measured
// (or the family cannot take it: a burst on a window), then the fit.
func bound(fit Model, declared limiters.Limit, from string) Model {
	if from != "--policy" && from != "RateLimit-Policy" && from != "X-RateLimit-Limit" {
		return fit
	}
	m := fit
	m.Limit = declared
	if m.Algorithm.IsBucket() && m.Limit.Burst == 0 {
		m.Limit.Burst = m.Limit.N
	}
	if m.Validate() != nil {
		return fit
	}
	return m
}

// mostAdmitted is the most of obs m admits, each decided at the instant
// of its interval that favours admitting it most: tested at the interval's
// end, and recorded, when admitted, at the earliest instant it would
// have been (so that a bucket's refills start as soon as they could).
func mostAdmitted(m Model, obs []Observation) int {
	obs = slices.Clone(obs)
	slices.SortStableFunc(obs, func(a, b Observation) int { return a.Sent.Compare(b.Sent) })
	st, n := m.newState(), 0
	for _, o := range obs {
		lo, hi := o.Sent.UnixNano(), max(o.Received.UnixNano(), o.Sent.UnixNano())
		if st.admits(hi, o.N) {
			n++
			st.admit(firstAdmitting(st, lo, hi, o.N), o.N)
		} else {
			st.refuse(lo, o.N)
		}
	}
	return n
}

// RetryAfter is the check of the wait a refusal advertises: one request
// at 80% of it (refused, or the wait was longer than needed) and one at
// the advertised instant (admitted, or the header lied).
type RetryAfter struct {
	Header     string  `json:"header,omitempty"` // which header advertised the wait
	Advertised float64 `json:"advertised_s"`     // 0: no refusal advertised a wait
	Early      string  `json:"at_80_percent,omitempty"`
	AtWait     string  `json:"at_wait,omitempty"`
	Verdict    string  `json:"verdict"`
}

// Run probes c.Target: the fingerprint, then the concurrency check, the
// Retry-After and isolation checks and the keyless one, each on keys of
// its own. progress, if not nil, is
// told what runs.
func Run(ctx context.Context, c Config, progress func(string)) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	// The keys are fresh for every probe; the plans are the seed's, as
	// Budget counted them.
	prefix := fmt.Sprintf("ratelab-probe-%08x-", rand.Uint32())
	r := &Report{Schema: ReportSchema, Target: c.Target.URL, Key: c.Target.Key.String(), Start: time.Now(), Calibration: Calibration{From: "--policy"}, prefix: prefix}
	var fingerprint []Request
	defer func() {
		r.Elapsed = time.Since(r.Start).Seconds()
		r.Timing = timingOf(r.all, r.fp, fingerprint)
		r.Timing.KeptPace = r.Timing.keptPace(c.Policy.Interval())
	}()
	if c.Policy == (limiters.Limit{}) {
		l, err := r.calibrate(ctx, c, say)
		if err != nil {
			return r, err
		}
		c.Policy = l
	}
	r.Policy = c.Policy.String()
	p := c.plan(rand.New(rand.NewPCG(c.Seed, 0)), prefix)
	fingerprint = p.fingerprint
	best, err := r.fingerprint(ctx, c, fingerprint, say)
	if err != nil {
		return r, err
	}
	say("concurrency: %d requests at once on a fresh key", len(p.concurrent))
	if err := r.concurrency(ctx, c, p.concurrent, best); err != nil {
		return r, err
	}
	say("Retry-After and key isolation: a quota and one more on a fresh key, one on another, then at 80%% of the wait and at the wait")
	if err := r.retryAfter(ctx, c, p.spend); err != nil {
		return r, err
	}
	if len(p.keyless) > 0 {
		say("no key: %d requests without one", len(p.keyless))
	}
	return r, r.keyless(ctx, c, p.keyless)
}

// calibrate finds the policy c declares none of, and checks that judging
// it fits in what is left of the budget.
func (r *Report) calibrate(ctx context.Context, c Config, say func(string, ...any)) (limiters.Limit, error) {
	n, d := c.CalibrationBudget()
	say("no policy declared: calibrating first, at most %d requests in about %v", n, d.Round(time.Second))
	l, cal, answers, err := calibrate(ctx, c, r.prefix+"calibrate", say)
	r.count(answers)
	r.Calibration = cal
	if err != nil {
		return l, err
	}
	c.Policy = l
	if n, left := c.Budget(), c.MaxRequests-r.Requests; n > left {
		return l, fmt.Errorf("probe: judging %s, found by calibration, takes %d requests, more than the %d --max-requests leaves", l, n, left)
	}
	if n := c.plan(rand.New(rand.NewPCG(c.Seed, 0)), "").busiest(); n > c.MaxRate {
		return l, fmt.Errorf("probe: judging %s, found by calibration, sends %d requests in its busiest second, more than --max-rate %d", l, n, c.MaxRate)
	}
	say("judging %s (%s): %d requests more, within about %v", l, cal.From, c.Budget(), c.Duration().Round(time.Second))
	return l, nil
}

// fingerprint sends the fingerprint, from the next edge of the epoch's
// windows (where its edge attacks are planned), and judges what came
// back: the fit, the accuracy of each workload, the fields. It returns
// the best explanation of each family, best first.
func (r *Report) fingerprint(ctx context.Context, c Config, plan []Request, say func(string, ...any)) ([]Explained, error) {
	per := c.Policy.Per
	start := time.Now().Add(100 * time.Millisecond).Truncate(per).Add(per)
	say("the fingerprint: %d requests over %v, from %s", len(plan), plan[len(plan)-1].At.Round(time.Millisecond), start.Format("15:04:05.000"))
	answers, err := Send(ctx, c.Target, plan, start, c.Timeout)
	r.count(answers)
	r.fp = answers
	// Stopped (Ctrl-C): what was answered is judged all the same, and the
	// error returned after.
	if err != nil && (ctx.Err() == nil || len(answers) == 0) {
		return nil, err
	}
	stopped := err
	var decided []Observation
	var burst []Answer
	for _, a := range answers {
		if a.Decided() {
			decided = append(decided, a.Observation)
		}
		if a.Key == r.prefix+"burst" {
			burst = append(burst, a)
		}
	}
	if len(decided) == 0 {
		return nil, fmt.Errorf("none of the fingerprint's %d requests was decided (admitted or refused): %s", len(answers), firstFailure(answers))
	}
	r.Accuracy = judgeFingerprint(answers, r.prefix, c.Policy)
	if !slices.ContainsFunc(decided, func(o Observation) bool { return !o.Admitted }) {
		// Nothing refused: every model loose enough explains it all, and
		// the fit would name the loosest candidate. There is no limit to
		// name.
		r.Fit = []Fit{{Algorithm: NoLimit, Limit: "none seen", Explained: len(decided), Decisions: len(decided), Share: 1}}
		return []Explained{{Model: Model{Algorithm: limiters.SlidingLog, Limit: c.Policy}}}, stopped
	}
	best := Best(Rank(decided, candidatesFor(c.Policy, answers, r.prefix, r.Calibration.window()...)))
	// The remaining quota the fields advertise is judged against the
	// quota the target showed (the best fit's), not the declared one.
	r.Headers = headersOf(answers, burst, max(best[0].Model.Limit.Quota(), 1))
	for _, e := range best {
		r.Fit = append(r.Fit, Fit{Algorithm: e.Model.Algorithm, Limit: e.Model.Limit.String(), Anchored: e.Model.Anchored, CountsRefused: e.Model.CountsRefused,
			Explained: e.Explained, Decisions: e.Decisions, Share: e.Share()})
	}
	return best, stopped
}

// concurrency sends plan, K requests at once on a fresh key, and counts
// what they met against what the policy allows of them.
func (r *Report) concurrency(ctx context.Context, c Config, plan []Request, best []Explained) error {
	answers, err := Send(ctx, c.Target, plan, time.Time{}, c.Timeout)
	r.count(answers)
	if err != nil {
		return err
	}
	r.Concurrency = Concurrency{Sent: len(answers), Quota: max(c.Policy.Quota(), 1)}
	var sent []Observation
	for _, a := range answers {
		switch {
		case !a.Decided():
			r.Concurrency.Undecided++
		case a.Admitted:
			r.Concurrency.Admitted++
		}
		sent = append(sent, a.Observation)
	}
	// "At once" is as at once as the sender and the network make it: the
	// requests go out over some milliseconds, in which a bucket refills
	// and a window may turn. The most the policy could admit of them,
	// each decided when it favours admitting most, is the bound: the
	// declared policy, as the family the fit names, when one was declared
	// (a limiter that loses updates over-admits in the fingerprint too,
	// and a fit to that would excuse it), else the fit.
	r.Concurrency.Allowed = mostAdmitted(bound(best[0].Model, c.Policy, r.Calibration.From), sent)
	return nil
}

// sourcesNeeded is how many users a probe has, each with a key of its
// own: the calibration's, the fingerprint's four, the concurrency check's,
// and the Retry-After and isolation checks' two.
const sourcesNeeded = 8

// keyless sends plan, requests without a key, and says what they met.
func (r *Report) keyless(ctx context.Context, c Config, plan []Request) error {
	if c.Target.Key.Kind == "source" {
		r.Keys.Keyless = "not asked: every request has an address"
		return nil
	}
	answers, err := Send(ctx, c.Target, plan, time.Time{}, c.Timeout)
	r.count(answers)
	if err != nil && !errors.Is(err, ErrNotDeciding) {
		return err
	}
	// By status, not by Admitted: a 400 for a missing key is no
	// admission.
	served, limited, rejected, status := 0, 0, 0, 0
	for _, a := range answers {
		switch {
		case !a.Decided():
		case c.Target.denies(a.Status):
			limited++
		case a.Status >= 400:
			rejected, status = rejected+1, a.Status
		default:
			served++
		}
	}
	switch {
	case rejected > 0 && served == 0 && limited == 0:
		r.Keys.Keyless = fmt.Sprintf("refused (%d)", status)
	case limited > 0:
		r.Keys.Keyless = fmt.Sprintf("limited, as one key (%d of %d served)", served, len(answers))
	case served > 0:
		r.Keys.Keyless = "not limited"
	default:
		r.Keys.Keyless = "not decided"
	}
	return nil
}

// candidatesFor returns the models the fit tries: those near the declared
// policy first, then those near what the fingerprint saw, for a target
// whose declaration is off: the quota is what the burst's fresh key got
// in its first window, and the rate what the sustained run got a window.
// (nginx's limit_req at 10r/s with no burst admits one at a time: a
// declaration of 10/s explains two thirds of it, the observed quota of 1
// all of it.)
func candidatesFor(declared limiters.Limit, answers []Answer, prefix string, also ...limiters.Limit) []Model {
	per := declared.Per
	var burstStart time.Time
	// quota is what the burst's key got in its first window; atOnce what
	// it got of the requests sent within a twentieth of a refill of the
	// first (back to back, as the plan meant them: a sender that stalls
	// spreads the burst, and a bucket refills meanwhile).
	quota, atOnce, paced := 0, 0, 0
	once := max(declared.Interval()/20, time.Millisecond)
	var first, last time.Time
	for _, a := range answers {
		switch a.Key {
		case prefix + "burst":
			if burstStart.IsZero() {
				burstStart = a.Sent
			}
			if a.Admitted && a.Sent.Sub(burstStart) < per {
				quota++
			}
			if a.Admitted && a.Sent.Sub(burstStart) < once {
				atOnce++
			}
		case prefix + "paced":
			if first.IsZero() {
				first = a.Sent
			}
			last = a.Sent
			if a.Admitted {
				paced++
			}
		}
	}
	out := Candidates(declared)
	seen := map[Model]bool{}
	for _, m := range out {
		seen[m] = true
	}
	more := func(l limiters.Limit) {
		for _, m := range Candidates(l) {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	rate := 0
	if span := last.Sub(first); span > 0 {
		rate = int(math.Round(float64(paced) / span.Seconds() * per.Seconds()))
	}
	for _, l := range also {
		more(l)
	}
	if quota > 0 {
		more(limiters.Limit{N: quota, Per: per})
	}
	if rate > 0 {
		more(limiters.Limit{N: rate, Per: per})
		more(limiters.Limit{N: rate, Per: per, Burst: declared.Quota()})
		if quota > 0 {
			more(limiters.Limit{N: rate, Per: per, Burst: quota})
		}
	}
	// A sender that stalls spreads the burst (a bucket refills meanwhile,
	// and the quota seen is more than the burst) and slows the paced run
	// (the rate seen is less): the declared rate with the burst seen, and
	// the rate seen with the declared burst, are tried too.
	for _, q := range []int{quota, atOnce} {
		if q > 0 {
			more(limiters.Limit{N: declared.N, Per: per, Burst: q})
			if rate > 0 {
				more(limiters.Limit{N: rate, Per: per, Burst: q})
			}
		}
	}
	return out
}

// inWindow returns when a plan that spends a quota at once should start:
// a tenth into the next of the epoch's windows of per, so that a fixed
// window does not turn in the middle of it and give the quota again
// (it did, on a busy host: no refusal came to read a wait from). A window
// over ten seconds is not waited for: a few milliseconds' plan rarely
// meets its edge.
func inWindow(per time.Duration) time.Time {
	if per > 10*time.Second {
		return time.Time{}
	}
	return time.Now().Add(10 * time.Millisecond).Truncate(per).Add(per + per/10)
}

// count adds answers to the report's totals.
func (r *Report) count(answers []Answer) {
	r.Requests += len(answers)
	r.all = append(r.all, answers...)
	for _, a := range answers {
		if !a.Decided() {
			r.Undecided++
		}
	}
}

// retryAfter sends spend, a quota and one more on a key and then one on
// another: the other key admitted is the keys' isolation; a refusal of the
// first that advertises a wait is followed by a request at 80% of it and
// one at it.
func (r *Report) retryAfter(ctx context.Context, c Config, spend []Request) error {
	answers, err := Send(ctx, c.Target, spend, inWindow(c.Policy.Per), c.Timeout)
	r.count(answers)
	if err != nil {
		return err
	}
	r.Keys.Isolated = answers[len(answers)-1].Admitted
	answers = answers[:len(answers)-1]
	ra := &r.RetryAfter
	var last Answer
	for _, a := range answers {
		if a.Decided() && !a.Admitted {
			if wait, header, ok := advertised(a.Header, a.Received); ok {
				ra.Advertised, ra.Header, last = wait.Seconds(), header, a
				break
			}
		}
	}
	if ra.Header == "" {
		ra.Verdict = "no refusal advertised a wait"
		return nil
	}
	wait := time.Duration(ra.Advertised * float64(time.Second))
	key := spend[0].Key
	for _, step := range []struct {
		share float64
		into  *string
	}{{0.8, &ra.Early}, {1, &ra.AtWait}} {
		at := last.Received.Add(time.Duration(step.share * float64(wait)))
		got, err := Send(ctx, c.Target, []Request{{Key: key}}, at, c.Timeout)
		r.count(got)
		if err != nil {
			return err
		}
		switch a := got[0]; {
		case !a.Decided():
			*step.into = "undecided"
		case a.Admitted:
			*step.into = "admitted"
		default:
			*step.into = "refused"
		}
	}
	switch {
	case ra.AtWait != "admitted":
		ra.Verdict = "lies: refused at the advertised instant"
	case ra.Early == "admitted":
		ra.Verdict = "longer than needed: admitted at 80% of it"
	default:
		ra.Verdict = "honest"
	}
	return nil
}

// advertised reads the wait a refusal advertises: Retry-After (seconds),
// else the IETF draft's RateLimit t parameter, else X-RateLimit-Reset
// (seconds, or a Unix time when larger than a year).
func advertised(h http.Header, at time.Time) (time.Duration, string, bool) {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return seconds(s), "Retry-After", true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(at), 0), "Retry-After", true
		}
	}
	if v := h.Get("RateLimit"); v != "" {
		for _, p := range strings.Split(v, ";") {
			if k, s, ok := strings.Cut(strings.TrimSpace(p), "="); ok && k == "t" {
				if n, err := strconv.ParseFloat(s, 64); err == nil && n >= 0 {
					return seconds(n), "RateLimit", true
				}
			}
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
			if n > 365*24*3600 {
				return max(time.Unix(int64(n), 0).Sub(at), 0), "X-RateLimit-Reset", true
			}
			return seconds(n), "X-RateLimit-Reset", true
		}
	}
	return 0, "", false
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
