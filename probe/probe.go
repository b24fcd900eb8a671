package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Config is what a probe is told: the target, a policy it is said to
// keep (none: the probe measures it), and its bounds.
type Config struct {
	Target Target
	// Policy is what the user says the target keeps (--limit): where the
	// fit starts looking, and what the accuracy is judged against. The
	// fit still searches around it, and says so when the target behaves
	// otherwise.
	Policy limiters.Limit
	// Seed draws the sustained run's jitter. The keys are fresh for every
	// probe (a key the target saw before is not fresh).
	Seed uint64
	// Timeout bounds each request.
	Timeout time.Duration
	// MaxRequests bounds the probe's requests, all checks together,
	// MaxRate those it sends in any one second, and MaxTime its time.
	MaxRequests, MaxRate int
	MaxTime              time.Duration
	// PolicyAlso is a second, longer limit the user says the target keeps
	// beside Policy (--limit "5/s, 40/min"): where the look for one
	// presses to, and where its fit looks.
	PolicyAlso limiters.Limit
	// Look is how long at most, once a limit is named, the probe presses
	// a fresh key just under its rate for a second, longer limit (longer
	// where the target declares one, within MaxTime and MaxRequests); 0:
	// it does not look.
	Look time.Duration
}

// Validate reports whether c can be run.
func (c Config) Validate() error {
	if err := c.Target.Validate(); err != nil {
		return err
	}
	if c.Timeout <= 0 || c.MaxRequests < 1 || c.MaxRate < 1 || c.MaxTime <= 0 {
		return fmt.Errorf("probe: the timeout (%v), the most requests (%d), the most a second (%d) and the most time (%v) must be positive", c.Timeout, c.MaxRequests, c.MaxRate, c.MaxTime)
	}
	if src := c.Target.Sources; src != nil && len(src.addrs) < sourcesNeeded {
		return fmt.Errorf("probe: --source has %d addresses; the probe's users need %d", len(src.addrs), sourcesNeeded)
	}
	if c.Policy == (limiters.Limit{}) {
		return nil // measured; each plan is checked against what is left
	}
	if c.Policy.N < 1 || c.Policy.Per <= 0 {
		return fmt.Errorf("probe: the policy %s: want a count and a period, as in 10/s burst 6 or 100/1m", c.Policy)
	}
	plan := fingerprintPlan(rand.New(rand.NewPCG(c.Seed, 0)), "", shapeOf(c.Policy), time.Now())
	which := "fingerprint"
	if len(plan) > c.MaxRequests {
		// The lean one, which the probe sends then.
		plan = leanPlan(rand.New(rand.NewPCG(c.Seed, 0)), "", shapeOf(c.Policy), time.Now(), c.Policy.Burst > 0, false)
		which = "lean fingerprint"
	}
	if n := len(plan); n > c.MaxRequests {
		return fmt.Errorf("probe: the %s of %s takes %d requests, more than --max-requests %d", which, c.Policy, n, c.MaxRequests)
	}
	if n := busiest(plan); n > c.MaxRate {
		return fmt.Errorf("probe: the fingerprint of %s sends %d requests in its busiest second, more than --max-rate %d", c.Policy, n, c.MaxRate)
	}
	return nil
}

// shapeOf is the limit a fingerprint is planned for when l is given: its
// quota over the time a spent quota takes to come back.
func shapeOf(l limiters.Limit) limiters.Limit { return limiters.Limit{N: l.Quota(), Per: l.Window()} }

// pacedMost is the fastest the probe paces one key: half of --max-rate,
// and no more than 200 a second.
func (c Config) pacedMost() int { return max(min(200, c.MaxRate/2), 1) }

// sourcesNeeded is how many users a probe keyed by source has at least,
// each with an address of its own.
const sourcesNeeded = 16

// prober is one probe under way: what it was told, how it talks to the
// target, and what it has found so far.
type prober struct {
	c        Config
	x        exchange
	progress func(string)
	r        *Report
	prefix   string
	rng      *rand.Rand
	requests int
	keys     int // fresh keys used, for their names
	// obs are the decided requests the fit explains: the calibration's,
	// the fingerprint's and the experiments'.
	obs []observation
	// lat is how long answers take, at the 99th percentile, and late how
	// late the sender sends.
	lat, late time.Duration
	// refusal is the refusal's status learned (0: none yet; 429 always
	// is one), when --deny-status does not say it.
	refusal int
	// inFlight is the limit in flight the calibration named, if it did.
	inFlight inFlightModel
	// leanBucket: the lean fingerprint is a bucket's (leanPlan).
	leanBucket bool
	// service is the target's own time to answer (its fastest
	// admission), holdAfter the time past which an admission was held,
	// and queued whether the target holds admissions as a queue does
	// (holding).
	service, holdAfter time.Duration
	queued             bool
	backlogSaid        bool          // a backlog's slow answers said once
	longest            time.Duration // the longest admission held (holding)
	// secondRivals are second limits of other families that explain as
	// many decisions as the one named (fitSecond).
	secondRivals []string
	// until is when --max-time runs out, on the wall clock: the fits'
	// searches stop there (a fit of a noisy lean run tried 1.3 million
	// models over 9.5 minutes).
	until time.Time
}

// fitLeast is the least time a fit is given when --max-time has run out.
const fitLeast = 10 * time.Second

// fit is fit(obs, g) stopping at --max-time, or fitLeast from now.
func (p *prober) fit(obs []observation, g guess) *search {
	g.until = p.until
	if least := time.Now().Add(fitLeast); g.until.Before(least) {
		g.until = least
	}
	s := fit(obs, g)
	if s.cut {
		p.say("the fit stopped at --max-time after trying %d models: the best of those", len(s.tried))
	}
	return s
}

func (p *prober) say(format string, args ...any) {
	if p.progress != nil {
		p.progress(fmt.Sprintf(format, args...))
	}
}

// key returns a fresh key, named for what it is for.
func (p *prober) key(what string) string {
	p.keys++
	return fmt.Sprintf("%s%s-%d", p.prefix, what, p.keys)
}

// send sends plan and counts its answers against the budget, keeping the
// decided ones for the fit. A zero start is as soon as --max-rate allows
// (pace); a plan for a start of its own must fit it there.
func (p *prober) send(ctx context.Context, plan []request, start time.Time, stop func(answer) bool) ([]answer, error) {
	if n := p.c.MaxRequests - p.requests; len(plan) > n {
		return nil, fmt.Errorf("probe: %d requests more would go past --max-requests %d (%d sent)", len(plan), p.c.MaxRequests, p.requests)
	}
	at, err := p.pace(plan, start)
	switch {
	case err != nil:
		return nil, err
	case start.IsZero():
		start = at
	case at.After(start):
		return nil, fmt.Errorf("%w: %d requests planned from %v would send more than --max-rate %d in a second, with those sent before", errOverRate, len(plan), start.Format("15:04:05.000"), p.c.MaxRate)
	}
	received, decided, dead := 0, 0, false
	counted := func(a answer) bool {
		p.requests++
		received++
		if a = p.classify(a); a.Decided() {
			decided++
		}
		if received >= deadAfter && decided == 0 {
			// Nothing behind the URL decides: stop, rather than send the
			// rest of the plan to a target that only fails.
			dead = true
			return false
		}
		return stop == nil || stop(a)
	}
	if w, ok := p.x.(interface{ wait(time.Duration) }); ok && p.queued {
		// A queue's last admissions come when it lets them go: wait for
		// them twice as long as the longest held yet, and a second.
		w.wait(min(max(p.c.Timeout, 2*p.mostHeld()+time.Second), p.c.MaxTime/2))
	}
	got, err := p.x.send(ctx, plan, start, counted)
	for i := range got {
		got[i] = p.classify(got[i])
	}
	p.r.all = append(p.r.all, got...)
	if p.learn(p.r.all) {
		p.say("refusals answer %d: it appeared once a fresh key pressed back to back had been admitted", p.refusal)
		p.reclassify() // what came before, as the refusal now known says
		for i := range got {
			got[i] = p.classify(got[i])
		}
	} else {
		p.observe(got)
	}
	p.holding()
	p.r.Requests = p.requests
	p.lat, p.late = spreadOf(p.r.all, p.held)
	if dead && err == nil {
		err = fmt.Errorf("%w: %s", errNotDeciding, undecidedWhy(p.c.Target, got))
	}
	return got, err
}

// observe keeps the decided of answers for the fit, and counts the rest.
func (p *prober) observe(answers []answer) {
	for _, a := range answers {
		switch {
		case a.Decided():
			p.obs = append(p.obs, p.decided(a))
		case a.Key != "":
			// Requests without a key are the keyless check's, judged by
			// their status there (a 400 for a missing key is an answer).
			p.r.Undecided++
		}
	}
}

// reclassify reads every answer again as the refusal now known says,
// and what the fit explains with them.
func (p *prober) reclassify() {
	for i := range p.r.all {
		p.r.all[i] = p.classify(p.r.all[i])
	}
	for i := range p.r.fp {
		p.r.fp[i] = p.classify(p.r.fp[i])
	}
	p.obs, p.r.Undecided = p.obs[:0], 0
	p.observe(p.r.all)
}

// Run probes c.Target: calibration (unless c.Policy is given), the
// fingerprint, rounds of experiments where the fit leaves models it
// cannot tell apart, then the checks, each on keys of its own. progress,
// if not nil, is told what runs. On an error the report holds what was
// found before it.
func Run(ctx context.Context, c Config, progress func(string)) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return run(ctx, c, &wire{c.Target, c.Timeout}, progress)
}

func run(ctx context.Context, c Config, x exchange, progress func(string)) (*Report, error) {
	p := &prober{c: c, x: x, progress: progress, rng: rand.New(rand.NewPCG(c.Seed, 0)),
		prefix: fmt.Sprintf("ratelab-probe-%08x-", rand.Uint32()), until: time.Now().Add(c.MaxTime)}
	r := &Report{Schema: ReportSchema, Target: c.Target.URL, Key: c.Target.Key.String(), Start: x.now(), prefix: p.prefix}
	p.r = r
	defer func() {
		r.Elapsed = x.now().Sub(r.Start).Seconds()
		r.Timing = timingOf(r.all, r.fp, r.Calibration.Lean, p.held, p.service)
		r.Timing.KeptPace = r.Timing.keptPace(r.interval())
		r.Refusal = p.refusalSeen()
	}()
	return r, p.probe(ctx)
}

// probe runs the probe's steps in turn.
func (p *prober) probe(ctx context.Context) error {
	r, c := p.r, p.c
	first, err := p.firstDecided(ctx)
	if err != nil {
		return err
	}
	r.Claims = claimsOf(first)
	if r.Claims.PolicyText != "" {
		p.say("the target declares %s: a claim to check", r.Claims.PolicyText)
	}
	var g guess
	if c.Policy != (limiters.Limit{}) {
		r.Calibration = Calibration{From: "--limit"}
		g = guessAround(c.Policy).with(r.Claims)
		w := c.Policy.Window()
		g.claim = claim{quota: c.Policy.Quota(), lo: w, hi: w}
	} else {
		r.Calibration, err = p.calibrate(ctx, first, r.Claims.Policy.Quota())
		if err != nil {
			return err
		}
		if r.Calibration.InFlight.Limit != "" {
			return p.concludeInFlight(ctx)
		}
		g = r.Calibration.guess(r.Claims)
	}
	return p.fingerprinted(ctx, g)
}

// firstDecided is a fresh key's first answer that the target decided:
// the first's, or of four more, each on a fresh key, before saying what
// the target answers instead of deciding.
func (p *prober) firstDecided(ctx context.Context) (answer, error) {
	first, err := p.send(ctx, []request{{Key: p.key("first")}}, time.Time{}, nil)
	if err != nil {
		return answer{}, err
	}
	if len(first) == 1 && first[0].Decided() {
		return first[0], nil
	}
	tried := first
	for range 4 {
		got, err := p.send(ctx, []request{{Key: p.key("first")}}, time.Time{}, nil)
		if err != nil {
			return answer{}, err
		}
		tried = append(tried, got...)
		if len(got) == 1 && got[0].Decided() {
			return got[0], nil
		}
	}
	return answer{}, fmt.Errorf("%w: %s", errNotDeciding, undecidedWhy(p.c.Target, tried))
}

// fingerprinted fingerprints the target on the shape the guess g says
// (lean where the quota is too large for the budget), fits the models to
// what it answered, asks rounds to tell the best apart, looks for a
// second limit, and runs the checks.
func (p *prober) fingerprinted(ctx context.Context, g guess) error {
	r, c := p.r, p.c
	shape := shapeOf(c.Policy)
	if c.Policy == (limiters.Limit{}) {
		shape = g.shape(r.Calibration)
		shape.Per = roundish(shape.Per)
	}
	r.planned = shape
	if cal := r.Calibration; cal.Lean || (cal.From == "--limit" && fingerprintCost(shape.N) > c.MaxRequests-p.requests) {
		r.Calibration.Lean = true
		// A bucket: back one at a time, and soon after it was spent (a
		// window's first admission comes most of a window later), unless
		// the press began after it was back (no refusal before).
		p.leanBucket = c.Policy.Burst > 0 || (cal.Rate > 0 && !cal.Windowed && (cal.RefusedUntil == 0 || cal.Recovered < 3/cal.Rate))
		g.lean = true
	}
	if err := p.fingerprint(ctx, shape); err != nil {
		if ctx.Err() != nil && len(p.obs) > 0 {
			p.conclude(p.fit(p.obs, g)) // stopped: what was answered is judged all the same
		}
		return err
	}
	s := p.fit(p.obs, g)
	if !slices.ContainsFunc(p.obs, func(o observation) bool { return !o.Admitted }) {
		r.Verdict = Verdict{Text: fmt.Sprintf("no limit: all %d decided requests were admitted", len(p.obs)), Decisions: len(p.obs)}
		r.Fit = []Fit{{Algorithm: NoLimit, Limit: "none seen", Explained: len(p.obs), Decisions: len(p.obs), Share: 1}}
		return p.checks(ctx, model{})
	}
	s, err := p.ask(ctx, s, g)
	if err != nil && ctx.Err() != nil {
		p.conclude(s)
		return err
	}
	best := p.conclude(s)
	if best.Algorithm == "" && r.Calibration.InFlight.Share > 0 {
		best = p.besideInFlight(ctx, g)
	}
	if best.Algorithm != "" && r.Verdict.Named && c.Look > 0 {
		if best, err = p.longer(ctx, best); err != nil {
			return err
		}
	}
	return p.checks(ctx, best)
}

// guessAround is where the fit looks around a limit the user gave.
func guessAround(l limiters.Limit) guess {
	return guess{quotas: []int{l.Quota(), l.N}, windows: span{l.Window() * 4 / 5, l.Window() * 5 / 4},
		intervals: span{l.Interval() * 4 / 5, l.Interval() * 5 / 4}, window: l.Window(), interval: l.Interval()}
}

// shape is the limit the fingerprint is planned for: the quota, over the
// time a spent quota takes to come back (a bucket's refill of it, not its
// rate's unit: 60/min with a burst of one is probed as 1/s).
func (g guess) shape(cal Calibration) limiters.Limit {
	q := g.quotas[0]
	w := time.Duration(q) * g.interval
	switch {
	case cal.Counted:
		// A spent key stays refused while pressed: the fingerprint tells
		// little, and a window as short as the calibration allows does.
		w = g.windows.lo
	case cal.Windowed || g.interval == 0:
		w = g.window
	}
	return limiters.Limit{N: q, Per: max(w, time.Millisecond)}
}

// roundish rounds a measured window to what a configuration would say,
// so that the fingerprint's edge attacks meet the edges of the epoch's
// windows of that length: whole seconds from 2s, or from 850ms within
// 15% of one; tenths from 200ms; hundredths below.
func roundish(d time.Duration) time.Duration {
	step := 10 * time.Millisecond
	switch s := d.Round(time.Second); {
	case d >= 2*time.Second, s > 0 && (d-s).Abs() <= s*15/100:
		step = time.Second
	case d >= 200*time.Millisecond:
		step = 100 * time.Millisecond
	}
	return max(d.Round(step), step)
}

// fingerprint sends the fingerprint for limit, the lean one when the
// calibration said, and keeps its answers.
func (p *prober) fingerprint(ctx context.Context, limit limiters.Limit) error {
	start := p.x.now().Add(200 * time.Millisecond)
	seed := p.rng.Uint64()
	planFor := func(rng *rand.Rand, start time.Time) []request {
		if p.r.Calibration.Lean {
			return leanPlan(rng, p.prefix, limit, start, p.leanBucket, p.r.Calibration.From != "--limit")
		}
		return fingerprintPlan(rng, p.prefix, limit, start)
	}
	plan := planFor(rand.New(rand.NewPCG(seed, 1)), start)
	lean := ""
	if p.r.Calibration.Lean {
		lean = "lean "
	}
	// Later, if the requests just sent and the fingerprint's first second
	// would pass --max-rate together: planned again from there, for its
	// edges are the epoch's.
	for range 50 {
		at, err := p.pace(plan, start)
		if err != nil || !at.After(start) {
			break
		}
		start = at
		plan = planFor(rand.New(rand.NewPCG(seed, 1)), start)
	}
	if n := len(plan); p.requests+n > p.c.MaxRequests {
		return fmt.Errorf("probe: the %sfingerprint of %s takes %d requests, more than the %d --max-requests leaves: --max-requests %d or more", lean, limit, n, p.c.MaxRequests-p.requests, p.requests+n+20)
	}
	if busiest := busiest(plan); busiest > p.c.MaxRate {
		return fmt.Errorf("probe: the fingerprint of %s sends %d requests in its busiest second, more than --max-rate %d", limit, busiest, p.c.MaxRate)
	}
	p.say("the %sfingerprint: %d requests over %v, for about %s", lean, len(plan), plan[len(plan)-1].At.Round(time.Millisecond), limit)
	answers, err := p.send(ctx, plan, start, nil)
	p.r.fp = answers
	if err != nil && (ctx.Err() == nil || len(answers) == 0) {
		return err
	}
	return err
}
