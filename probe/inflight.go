package probe

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// InFlight is the family beside the six: a limit on the requests in
// flight at once (a semaphore in a handler, nginx's limit_conn, a
// gateway's most concurrent requests), K of them per key or for all
// keys. Such a limiter refuses nothing to a client that sends one request
// at a time, however fast, and everything beyond K at once, however
// slowly the K came: what it admits depends on when the earlier answers
// came back, which no model of the six reads.
const InFlight limiters.Algorithm = "in-flight"

// Variants of the in-flight family: one count per key, or one for all.
const (
	perKey  = "per key"
	allKeys = "for all keys"
)

// InFlightCheck is what the calibration asked to tell a limit on
// requests in flight from a rate limit, before any fit.
type InFlightCheck struct {
	// OneAtATime are the requests sent on a fresh key one after another's
	// answer, and how many of them were refused: a rate limiter refuses
	// after its quota (unless it refills faster than an answer comes
	// back); a limit in flight never does.
	OneAtATime        int `json:"one_at_a_time"`
	OneAtATimeRefused int `json:"one_at_a_time_refused"`
	// Service is the median seconds an admitted answer took.
	Service float64 `json:"service_s,omitempty"`
	// AtOnce are the requests sent at once on a fresh key, and those
	// admitted; Held is what one more on that key met, sent while they
	// were all in flight, after a time in which a rate limiter that never
	// refused one at a time would have refilled ("refused", "admitted",
	// or "not asked"); OtherKey what a fresh key's request met then.
	AtOnce         int    `json:"at_once,omitempty"`
	AtOnceAdmitted int    `json:"at_once_admitted,omitempty"`
	Held           string `json:"held,omitempty"`
	OtherKey       string `json:"other_key,omitempty"`
	// Limit is the limit in flight that explains every decision of the
	// calibration, when one does ("in-flight 4 at once, per key"); Share
	// what the best explained when none did (and the rate limits were
	// asked after).
	Limit string  `json:"limit,omitempty"`
	Share float64 `json:"share,omitempty"`
	// Beside describes a rate limit that refused a key driven at the most
	// the limit in flight lets through, measured (not fitted): its rate a
	// second and, about, its burst.
	Beside      string  `json:"beside,omitempty"`
	BesideRate  float64 `json:"beside_rate,omitempty"`
	BesideBurst int     `json:"beside_burst,omitempty"`
}

// limits reports whether what was asked points to a limit in flight:
// one at a time never refused, and a request held back while the
// admitted were in flight.
func (c InFlightCheck) limits() bool {
	return c.OneAtATime > 0 && c.OneAtATimeRefused == 0 && c.Held == "refused" && c.AtOnceAdmitted < c.AtOnce
}

// inFlightCheck asks, of a target whose admissions take longer than its
// refusals, what tells a limit in flight from a rate limit: up to q+2
// requests on a fresh key one at a time (stopped at the first
// refusal, or after 3 seconds), then, when none was refused, q+1 at once
// on another, with one more on it and one on a fresh key sent at half the
// service time, while the first are in flight.
func (p *prober) inFlightCheck(ctx context.Context, q int) (InFlightCheck, error) {
	var c InFlightCheck
	// Only where answers overlap: a limit in flight refuses only requests
	// that arrive while others are being answered, which on a target
	// whose admissions come back as fast as its refusals is never (and
	// then nothing tells it apart, nor needs to).
	var admitted, refused []time.Duration
	for _, a := range p.r.all {
		switch {
		case a.Admitted:
			admitted = append(admitted, a.Received.Sub(a.Sent))
		case a.Refused:
			refused = append(refused, a.Received.Sub(a.Sent))
		}
	}
	slow, fast := pct(admitted, 0.5), pct(refused, 0.5)
	if slow < 5*time.Millisecond || slow < 4*fast {
		return c, nil
	}
	if p.lean(q) {
		// A quota of hundreds admitted back to back: a limit in flight
		// that let as many through at once is not one a client meets, and
		// its one-at-a-time question would spend the quota again. The
		// admissions are slow because hundreds queued.
		p.say("calibration: admissions answered in %v, refusals in %v, but a fresh key got %d back to back: not asked whether it is a limit in flight", slow.Round(time.Millisecond), fast.Round(100*time.Microsecond), q)
		return c, nil
	}
	p.say("calibration: a fresh key got %d back to back, admissions answered in %v, refusals in %v: one request at a time, to tell a limit in flight from a rate limit", q, slow.Round(time.Millisecond), fast.Round(100*time.Microsecond))
	took, err := p.oneAtATime(ctx, &c, q)
	if err != nil || len(took) == 0 || c.OneAtATimeRefused > 0 {
		return c, err
	}
	slices.Sort(took)
	service := took[len(took)/2]
	c.Service = service.Seconds()
	return c, p.heldAtOnce(ctx, &c, q, service)
}

// oneAtATime asks a fresh key's requests one at a time (q+2, four at
// least, within 3 s), each sent once the one before is answered: how
// long each took to be admitted, or that one was refused (a rate
// limiter's, or at least not only in flight), into c.
func (p *prober) oneAtATime(ctx context.Context, c *InFlightCheck, q int) ([]time.Duration, error) {
	one := p.key("one-at-a-time")
	var took []time.Duration
	for began := p.x.now(); c.OneAtATime < max(q+2, 4) && p.x.now().Sub(began) < 3*time.Second; {
		got, err := p.send(ctx, []request{{Key: one}}, time.Time{}, nil)
		if err != nil {
			return took, err
		}
		if len(got) == 0 || !got[0].Decided() {
			continue
		}
		c.OneAtATime++
		if !got[0].Admitted {
			c.OneAtATimeRefused++
			return took, nil
		}
		took = append(took, got[0].Received.Sub(got[0].Sent))
	}
	return took, nil
}

// heldAtOnce sends q+1 requests of a fresh key at once, then, while its
// admitted ones are still being answered (service each), one more of
// that key and one of another: a limit in flight refuses the first and
// admits the second, a rate limit refuses the first only once its quota
// is spent. Into c.
func (p *prober) heldAtOnce(ctx context.Context, c *InFlightCheck, q int, service time.Duration) error {
	held, other := p.key("held"), p.key("other")
	var plan []request
	for i := range q + 1 {
		plan = append(plan, request{Key: held, At: time.Duration(i) * 100 * time.Microsecond})
	}
	later := max(service/2, time.Duration(q+1)*100*time.Microsecond+time.Millisecond)
	plan = append(plan, request{Key: held, At: later}, request{Key: other, At: later})
	got, err := p.send(ctx, plan, time.Time{}, nil)
	if err != nil {
		return err
	}
	c.AtOnce, c.Held, c.OtherKey = q+1, "not asked", "not asked"
	// The burst's answers, and the two sent later (by when they were
	// meant to go: a request not answered has no answer here).
	var burst, after []answer
	for _, a := range got {
		switch {
		case !a.Decided():
		case a.Intended.Sub(got[0].Intended) >= later/2:
			after = append(after, a)
		default:
			burst = append(burst, a)
			if a.Admitted {
				c.AtOnceAdmitted++
			}
		}
	}
	for _, a := range after {
		// Asked only while every admitted request of the burst was still
		// unanswered: else a slot may have come back. It arrived before
		// its answer came back; theirs left at most u before they came
		// back.
		inFlight, u := 0, p.uncertainty()
		for _, b := range burst {
			if b.Admitted && b.Received.Add(-u).After(a.Received) {
				inFlight++
			}
		}
		if inFlight < c.AtOnceAdmitted {
			continue
		}
		what := "refused"
		if a.Admitted {
			what = "admitted"
		}
		if a.Key == held {
			c.Held = what
		} else {
			c.OtherKey = what
		}
	}
	return nil
}

// inFlightNamed goes on, where c (what inFlightCheck asked) points to a
// limit in flight, to name it: waves of K, K and K+1; if the limit in
// flight explains every decision, one key driven at the most it lets
// through, and what refused that with fewer than K in flight measured as
// a rate limit beside it. It reports whether it named one (c.Limit); if
// not, c.Share is what the best explained, and the rate limits are asked
// after.
func (p *prober) inFlightNamed(ctx context.Context, c *InFlightCheck, q int) (bool, error) {
	if !c.limits() {
		return false, nil
	}
	p.say("calibration: %d one at a time never refused (each answered in %.0fms); of %d at once %d admitted, and one more on that key, while they were in flight, refused: a limit on requests in flight?", c.OneAtATime, 1000*c.Service, c.AtOnce, c.AtOnceAdmitted)
	fitted := func() (inFlightModel, float64) {
		m, explained := fitInFlight(p.obs, q+1, p.uncertainty())
		return m, float64(explained) / float64(max(len(p.obs), 1))
	}
	if _, err := p.inFlightWaves(ctx, *c, false); err != nil {
		return false, err
	}
	m, share := fitted()
	if share < explainedEnough {
		c.Share = share
		p.say("calibration: the best limit in flight, %s, explains %.1f%% of %d decisions", describeInFlight(m), 100*share, len(p.obs))
		return false, nil
	}
	key, err := p.inFlightWaves(ctx, *c, true)
	if err != nil {
		return false, err
	}
	if driven, share := fitted(); share >= explainedEnough {
		m = driven
	} else {
		// Refused, driven at the most the limit in flight lets one key
		// send, with fewer than K in flight: a rate limit beside it.
		c.Beside, c.BesideRate, c.BesideBurst = p.rateBeside(key, m)
	}
	p.inFlight, c.Limit = m, m.String()
	return true, nil
}

// inFlightWaves sends, on a fresh key, waves of requests at once, each a
// while after the last wave's answers should have come back: the K the
// calibration saw admitted, again K (a limit in flight admits them all,
// its slots back; a rate limiter that admitted the first K has not
// refilled K), then K+1 (it refuses exactly one). With drive, then K a
// wave for 3 seconds more: the most the limit in flight lets one key
// send, which a rate limit beside it (a rate under K per answer's time)
// refuses.
func (p *prober) inFlightWaves(ctx context.Context, c InFlightCheck, drive bool) (string, error) {
	k := c.AtOnceAdmitted
	var slowest time.Duration
	for _, a := range p.r.all {
		if a.Admitted {
			slowest = max(slowest, a.Received.Sub(a.Sent))
		}
	}
	gap := slowest*13/10 + 10*time.Millisecond
	waves := []int{k, k, k + 1}
	what := fmt.Sprintf("waves of %d, %d and %d at once on a fresh key, %v apart", k, k, k+1, gap.Round(time.Millisecond))
	if drive {
		waves = make([]int, max(3, int(3*time.Second/gap)))
		for i := range waves {
			waves[i] = k
		}
		what = fmt.Sprintf("%d waves of %d at once on a fresh key, %v apart: a rate limit beside it?", len(waves), k, gap.Round(time.Millisecond))
	}
	key := p.key("waves")
	var plan []request
	for w, n := range waves {
		for i := range n {
			plan = append(plan, request{Key: key, At: time.Duration(w)*gap + time.Duration(i)*100*time.Microsecond})
		}
	}
	p.say("in flight: %s", what)
	_, err := p.send(ctx, plan, time.Time{}, nil)
	return key, err
}

// rateBeside measures the rate limit that refused key's waves with
// fewer than m's K in flight: how many it admitted before its first such
// refusal, in how long; its rate, the slope of the admissions counted
// from then on against time (least squares, over the requests sent after
// the first refusal); and its burst, about, where that line meets the
// first request: what it admits driven from a fresh key is its burst and
// its rate's refill.
func (p *prober) rateBeside(key string, m inFlightModel) (text string, rate float64, burst int) {
	hs := heldAt(p.obs, p.uncertainty())
	type point struct {
		at       time.Time
		admitted bool
		rate     bool // refused with fewer than K in flight
	}
	var pts []point
	for i, o := range p.obs {
		if o.Key != key {
			continue
		}
		maybe := hs[i].maybeKey
		if m.shared {
			maybe = hs[i].maybe
		}
		pts = append(pts, point{o.Sent, o.Admitted, !o.Admitted && maybe < m.k})
	}
	slices.SortStableFunc(pts, func(a, b point) int { return a.at.Compare(b.at) })
	first := slices.IndexFunc(pts, func(p point) bool { return p.rate })
	if first < 0 {
		return "", 0, 0
	}
	before := 0
	for _, pt := range pts[:first] {
		if pt.admitted {
			before++
		}
	}
	t0 := pts[0].at
	took := pts[first].at.Sub(t0).Seconds()
	seen := fmt.Sprintf("%d admitted in %.1fs of %d at a time, then refused with fewer than %d in flight", before, took, m.k, m.k)
	text = "a rate limit beside it: " + seen
	// What had been admitted after each wave from the first refusal's on,
	// against the wave's time: a rate limiter driven beyond its rate
	// spends in each wave what it refilled since the last.
	var xs, ys []float64
	n := 0
	for i, pt := range pts {
		if pt.admitted {
			n++
		}
		if i >= first && (i+1 == len(pts) || pts[i+1].at.Sub(pt.at) > 5*time.Millisecond) {
			xs, ys = append(xs, pt.at.Sub(t0).Seconds()), append(ys, float64(n))
		}
	}
	if len(xs) < 4 || xs[len(xs)-1] <= xs[0] {
		return text, 0, 0
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	rate = sxy / sxx
	// The line at the first request is what there was to spend, less
	// the part of a request each wave leaves unspent: half of one, on
	// average.
	burst = max(int(math.Round(my-rate*mx+0.5)), 1)
	text = fmt.Sprintf("a rate limit beside it, about %.3g/s burst %d (measured: %s)", rate, burst, seen)
	return text, rate, burst
}

// concludeInFlight names the in-flight model that explains every
// decision so far, or says that none of the seven explains the target,
// and checks what a limit in flight can be checked for: 2K at once on a
// fresh key, the keys kept apart, and what twice K without a key meets.
func (p *prober) concludeInFlight(ctx context.Context) error {
	r := p.r
	m := p.inFlight
	explained := m.explain(heldAt(p.obs, p.uncertainty()))
	share := float64(explained) / float64(max(len(p.obs), 1))
	r.Fit = []Fit{{Algorithm: InFlight, Limit: fmt.Sprintf("%d at once", m.k), Variants: []string{m.variant()},
		Explained: explained, Decisions: len(p.obs), Share: share}}
	v := &r.Verdict
	v.Model, v.Explained, v.Decisions, v.Share = m.String(), explained, len(p.obs), share
	if beside := r.Calibration.InFlight.Beside; beside != "" {
		// Named, with the rate limit beside it: the limit in flight
		// explains every refusal but that rate's.
		v.Named, v.Beside = true, beside
		v.Text = fmt.Sprintf("%s, and %s (the limit in flight explains %.1f%% of %d decisions)", describeInFlight(m), beside, 100*share, len(p.obs))
		p.say("behaves as %s", v.Text)
	} else if share < explainedEnough {
		v.Model = ""
		v.Text = fmt.Sprintf("none of the seven explains it: one request at a time was never refused and one more was held back while the first were in flight, as a limit in flight does; the best, %s, explains %.1f%% of %d decisions (a rate limit as well?)", describeInFlight(m), 100*share, len(p.obs))
		p.say("%s", v.Text)
	} else {
		v.Named = true
		v.Text = fmt.Sprintf("%s: %.1f%% of %d decisions", describeInFlight(m), 100*share, len(p.obs))
		p.say("behaves as %s", v.Text)
	}
	r.Policy = fmt.Sprintf("%d in flight", m.k)
	r.Headers = headersOf(r.all)
	k := m.k
	p.say("concurrency: %d requests at once on a fresh key", 2*k)
	if err := p.concurrency(ctx, k, model{}); err != nil { // no model: K allowed
		return err
	}
	r.Keys.Isolated = r.Calibration.InFlight.OtherKey != "refused"
	r.Remaining.Verdict = "not asked: a limit in flight"
	if p.c.Target.Key.Kind == "source" {
		r.Keys.Keyless = "not asked: every request has an address"
		return nil
	}
	p.say("no key: twice the limit without one")
	return p.keyless(ctx, k, model{})
}

// describeInFlight names m for a person: "in flight: 4 at once, per key".
func describeInFlight(m inFlightModel) string {
	return fmt.Sprintf("in flight: %d at once, %s", m.k, m.variant())
}

// uncertainty is how far a request's arrival, or an answer's leaving,
// may be from the instant the probe recorded: a refusal's round trip, or
// how late the sender is (a busy host's sender records its instants as
// late as it sends), at least a millisecond. (make test-clocked, three
// probes at once: nginx limit_conn 4 read 95.7% once, four of its 93
// decisions judged on instants recorded late.)
func (p *prober) uncertainty() time.Duration {
	return max(p.refusedLatency(), p.late, time.Millisecond)
}

// refusedLatency is the 99th percentile of the refused answers' round
// trips: a refusal is answered before any handler runs, so its round trip
// is the network's and the limiter's alone.
func (p *prober) refusedLatency() time.Duration {
	var ls []time.Duration
	for _, a := range p.r.all {
		if a.Refused {
			ls = append(ls, a.Received.Sub(a.Sent))
		}
	}
	return pct(ls, 0.99)
}

// besideInFlight asks, when the calibration saw a limit in flight that
// did not explain every decision and none of the six does either,
// whether the two together do: the refusals the limit in flight the
// calibration measured explains (K or more may have been in flight) are
// its, and the six are fitted to the rest, as a rate limiter behind it
// sees them (a request the limit in flight refused never reached it). It
// returns the rate model named beside it, zero when none is.
func (p *prober) besideInFlight(ctx context.Context, g guess) model {
	c := p.r.Calibration.InFlight
	m := inFlightModel{k: c.AtOnceAdmitted, shared: c.OtherKey == "refused"}
	hs := heldAt(p.obs, p.uncertainty())
	var rest []observation
	for i, o := range p.obs {
		maybe := hs[i].maybeKey
		if m.shared {
			maybe = hs[i].maybe
		}
		if o.Admitted || maybe < m.k {
			rest = append(rest, o)
		}
	}
	theirs := len(p.obs) - len(rest)
	if theirs == 0 || len(rest) == 0 {
		return model{}
	}
	p.say("%d refusals came with %d or more in flight: the six fitted to the other %d decisions, as a rate limiter behind %s", theirs, m.k, len(rest), describeInFlight(m))
	all := p.obs
	p.obs = rest
	defer func() { p.obs = all }()
	v := p.r.Verdict
	rate := p.conclude(p.fit(rest, g))
	if rate.Algorithm == "" {
		p.r.Verdict = v
		return model{}
	}
	r := p.r
	r.Verdict.Beside = fmt.Sprintf("%s (%d refusals with %d or more in flight)", describeInFlight(m), theirs, m.k)
	r.Verdict.Text = fmt.Sprintf("%s, and %s", describeInFlight(m), r.Verdict.Text)
	r.Verdict.Decisions += theirs
	r.Verdict.Explained += theirs
	r.Verdict.Share = float64(r.Verdict.Explained) / float64(r.Verdict.Decisions)
	p.say("behaves as %s", r.Verdict.Text)
	return rate
}
