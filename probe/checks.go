package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Concurrency is K requests at once on a fresh key, from K connections:
// a limiter that reads its store and writes it in two steps admits more
// than the quota.
type Concurrency struct {
	Sent     int `json:"sent"`
	Admitted int `json:"admitted"`
	Quota    int `json:"quota"`
	// Allowed is the most the judged model could admit of these
	// requests, each decided at the instant of its interval most in its
	// favour: the quota, and what refilled or turned while they were sent.
	Allowed   int `json:"allowed"`
	Undecided int `json:"undecided"`
}

// OverAdmits reports whether the target admitted more than the judged
// model allows.
func (c Concurrency) OverAdmits() bool { return c.Admitted > max(c.Allowed, c.Quota) }

// Remaining is the check of the remaining quota the fields advertise, on
// requests sent one at a time on a fresh key, each after the previous
// answer, so that their order is known.
type Remaining struct {
	Checked int    `json:"checked"`
	Seen    []int  `json:"seen,omitempty"`
	Verdict string `json:"verdict"` // "exact", "off: ...", or "not advertised"
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

// Headers is which rate-limit fields the target sends, and what they say.
type Headers struct {
	// OnAdmitted and OnRefused name the rate-limit fields present on the
	// first admitted and the first refused answer.
	OnAdmitted []string `json:"on_admitted"`
	OnRefused  []string `json:"on_refused"`
	// Malformed are fields seen that did not parse, with their text.
	Malformed []string `json:"malformed,omitempty"`
}

// checks judges the fingerprint against the model the verdict named (or,
// with none named, the policy given or declared), then runs the checks,
// each on keys of its own.
func (p *prober) checks(ctx context.Context, named model) error {
	r := p.r
	m := named
	if m.Algorithm == "" {
		m = p.fallback()
	}
	r.judged = m
	r.Headers = headersOf(r.all)
	if m.Algorithm == "" {
		r.Policy = "none"
	} else {
		r.Policy = m.Limit.String()
		notes, err := p.edgesAgain(ctx, named)
		if err != nil {
			return err
		}
		r.Accuracy = judgeFingerprint(r.fp, r.prefix, m)
		for i := range r.Accuracy {
			r.Accuracy[i].Note = notes[r.Accuracy[i].Workload]
		}
	}
	q := max(m.quota(), r.Calibration.Quota, 1)
	w := time.Second
	if m.Algorithm != "" {
		w = m.Limit.Window()
	}
	steps := []struct {
		about string
		run   func(context.Context, int, model) error
		// cost is about what the check takes: requests, and time.
		requests int
		takes    time.Duration
	}{
		{fmt.Sprintf("concurrency: %d requests at once on a fresh key", 2*q), p.concurrency, p.burst(2*q, q+1), time.Second},
		{"remaining: one request at a time on a fresh key", p.remaining, min(q+1, 12), time.Second},
		{retryAbout, p.retryAfter, 2*(q+1) + 2*(q+q/2+2) + 5, w*3/2 + time.Second},
		{"no key: twice the quota without one", p.keyless, 2 * q, time.Second},
	}
	if p.c.Target.Key.Kind == "source" {
		r.Keys.Keyless = "not asked: every request has an address"
		steps = steps[:len(steps)-1] // the keyless step
	}
	for _, s := range steps {
		left, remains := p.c.MaxRequests-p.requests, p.c.MaxTime-p.x.now().Sub(r.Start)
		// Time is planned for by the rounds (checksTake); a lean probe's
		// long window may leave too little all the same.
		if s.requests > left || (r.Calibration.Lean && s.takes > remains) {
			// A check the budget has no room for is said as such: the
			// lean fingerprint of a large quota leaves little.
			why := fmt.Sprintf("%s: not run: it takes about %d requests and %v; %d requests and %v left (--max-requests, --max-time)", s.about, s.requests, s.takes.Round(time.Second), max(left, 0), max(remains, 0).Round(time.Second))
			r.Skipped = append(r.Skipped, why)
			p.say("%s", why)
			if s.about == retryAbout {
				// Whether keys are kept apart, from what was sent before:
				// the lean fingerprint asks a fresh key right after one
				// is spent.
				r.Keys.Isolated = isolatedIn(r.all)
			}
			continue
		}
		p.say("%s", s.about)
		err := s.run(ctx, q, m)
		if errors.Is(err, errOverRate) {
			// A check of a burst larger than --max-rate allows is not
			// one the probe may send: said, and the rest run.
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s: not run: %v", s.about, strings.TrimPrefix(err.Error(), errOverRate.Error()+": ")))
			p.say("not run: %v", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const retryAbout = "Retry-After and key isolation: spent keys asked again at 80% of the wait and at it"

// isolatedIn reports whether a key's first request was admitted within a
// second of another key's refusal.
func isolatedIn(all []answer) bool {
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(a, b answer) int { return a.Sent.Compare(b.Sent) })
	seen := map[string]bool{}
	var refused time.Time // the last refusal so far
	refusedKey := ""
	for _, a := range all {
		if !a.Decided() || a.Key == "" {
			continue
		}
		if !seen[a.Key] && a.Admitted && refusedKey != "" && refusedKey != a.Key && a.Sent.Sub(refused) < time.Second {
			return true
		}
		seen[a.Key] = true
		if !a.Admitted {
			refused, refusedKey = a.Sent, a.Key
		}
	}
	return false
}

// edgesAgain sends the fingerprint's edge attacks again when the window
// named is not the one the fingerprint was planned for (the calibration's
// guess): an attack at the edges of 100ms windows says nothing of a 1s
// window's. They go on fresh keys at the named window's edges, and take
// the place of the first ones in the accuracy table; when the budget of
// requests, time or --max-rate leaves no room, the rows say they were not
// judged at the named edges. It returns each workload's note.
func (p *prober) edgesAgain(ctx context.Context, named model) (map[string]string, error) {
	r := p.r
	if named.Algorithm == "" || named.Algorithm.IsBucket() || r.planned.Per <= 0 {
		return nil, nil
	}
	w, planned := named.Limit.Window(), r.planned.Window()
	if near(w, planned, 0.02) {
		return nil, nil
	}
	parts := map[string]string{"edge": "boundary-attack", "anchored": "anchored-attack"}
	again := p.prefix + "again-"
	start := p.x.now().Add(200 * time.Millisecond)
	var plan []request
	for _, q := range fingerprintPlan(p.rng, again, limiters.Limit{N: named.quota(), Per: w}, start) {
		if _, ok := parts[strings.TrimPrefix(q.Key, again)]; ok {
			plan = append(plan, q)
		}
	}
	notes := map[string]string{}
	why := ""
	switch left := p.c.MaxTime - p.x.now().Sub(r.Start) - checksTake(named); {
	case len(plan) == 0:
		return nil, nil
	case p.requests+len(plan)+checksCost(named.quota()) > p.c.MaxRequests:
		why = fmt.Sprintf("again at them would take %d requests, more than --max-requests leaves beside the checks", len(plan))
	case plan[len(plan)-1].At+time.Second > left:
		why = fmt.Sprintf("again at them would take %v, more than --max-time leaves", plan[len(plan)-1].At.Round(time.Millisecond))
	default:
		if at, err := p.pace(plan, start); err != nil || at.After(start) {
			why = "again at them would pass --max-rate"
		}
	}
	if why != "" {
		for _, wl := range parts {
			notes[wl] = fmt.Sprintf("not judged at the edges of the named %v windows: the fingerprint was planned for %v; %s", shown(named.Limit).Per, planned, why)
		}
		return notes, nil
	}
	p.say("the edge attacks again, at the edges of the named %v windows (the fingerprint was planned for %v): %d requests", shown(named.Limit).Per, planned, len(plan))
	got, err := p.send(ctx, plan, start, nil)
	if err != nil {
		return nil, err
	}
	// The new answers judged as the fingerprint's, in place of its own.
	fp := slices.DeleteFunc(r.fp, func(a answer) bool {
		_, ok := parts[strings.TrimPrefix(a.Key, r.prefix)]
		return ok
	})
	for _, a := range got {
		a.Key = r.prefix + strings.TrimPrefix(a.Key, again)
		fp = append(fp, a)
	}
	r.fp = fp
	for _, wl := range parts {
		notes[wl] = fmt.Sprintf("sent again at the edges of the named %v windows (the fingerprint was planned for %v)", shown(named.Limit).Per, planned)
	}
	return notes, nil
}

// checksCost is about the most requests the checks after the fit send
// for a quota of q: 2q at once, up to 12 one at a time, four keys spent
// for the waits (a bucket's over half a window half as much again) and
// their follow-ups, and 2q without a key.
func checksCost(q int) int { return 2*q + 12 + 2*(q+1) + 2*(q+q/2+2) + 5 + 2*q }

// fallback is the model the checks judge against when the verdict names
// none: the policy given, else the one declared, as a sliding log (the
// ideal); none when neither.
func (p *prober) fallback() model {
	l := p.c.Policy
	if l == (limiters.Limit{}) && p.r.Claims.Policy.Per > 0 {
		l = p.r.Claims.Policy
	}
	if l == (limiters.Limit{}) {
		return model{}
	}
	return model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: l.Quota(), Per: l.Window()}}
}

// concurrency sends 2q requests at once on a fresh key, and counts what
// they met against what m allows of them.
func (p *prober) concurrency(ctx context.Context, q int, m model) error {
	answers, err := p.send(ctx, concurrent(p.key("concurrent"), p.burst(2*q, q+1)), time.Time{}, nil)
	if err != nil {
		return err
	}
	c := &p.r.Concurrency
	*c = Concurrency{Sent: len(answers), Quota: q}
	var sent []observation
	for _, a := range answers {
		switch {
		case !a.Decided():
			c.Undecided++
		case a.Admitted:
			c.Admitted++
		}
		sent = append(sent, a.observation)
	}
	// "At once" is as at once as the sender and the network make it: the
	// requests go out over some milliseconds, in which a bucket refills
	// and a window may turn. The most the model could admit of them, each
	// decided when it favours admitting most, is the bound.
	c.Allowed = q
	if m.Algorithm != "" {
		c.Allowed = mostAdmitted(m, sent)
	}
	return nil
}

// mostAdmitted is the most of obs m admits, each decided at the instant
// of its interval that favours admitting it most: tested at the interval's
// end, and recorded, when admitted, at the earliest instant it would
// have been (so that a bucket's refills start as soon as they could).
func mostAdmitted(m model, obs []observation) int {
	obs = slices.Clone(obs)
	slices.SortStableFunc(obs, func(a, b observation) int { return a.Sent.Compare(b.Sent) })
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

// remaining sends up to q+1 requests (at most 12) on a fresh key one at a
// time, each after the previous answer, and compares the remaining quota
// each answer advertises with what m leaves after it: with requests in
// flight together the order they were decided in is unknown, and a check
// that assumed it would raise false alarms.
func (p *prober) remaining(ctx context.Context, q int, m model) error {
	key := p.key("remaining")
	rem := &p.r.Remaining
	var answers []answer
	for range min(q+1, 12) {
		got, err := p.send(ctx, []request{{Key: key}}, time.Time{}, nil)
		if err != nil {
			return err
		}
		answers = append(answers, got...)
		if len(got) == 1 && got[0].Decided() && !got[0].Admitted {
			break
		}
	}
	judgeRemaining(rem, answers, q, m)
	return nil
}

// judgeRemaining compares the remaining quota each of answers (one at a
// time on a fresh key) advertises with what m leaves, into rem.
func judgeRemaining(rem *Remaining, answers []answer, q int, m model) {
	st, admitted := model{}.stateOr(m), 0
	for _, a := range answers {
		if !a.Decided() {
			continue
		}
		t, r := a.Sent.UnixNano(), max(a.Received.UnixNano(), a.Sent.UnixNano())
		// The target decided at some instant between the send and the
		// answer: an admission is tried at both ends (a window may turn
		// in between), and the one the advertised figure agrees with is
		// kept, else the earlier.
		type decided struct {
			st state
			at int64 // the instant it was decided at
		}
		var at []decided
		if a.Admitted {
			admitted++
			if st != nil {
				early, late := st.clone(), st.clone()
				early.admit(t, 1)
				late.admit(r, 1)
				at, st = []decided{{early, t}, {late, r}}, early
			}
		} else if st != nil {
			st.refuse(t, 1)
			at = []decided{{st, t}}
		}
		s := read(a.Header, a.Received)
		if !s.hasRemaining {
			continue
		}
		rem.Checked++
		rem.Seen = append(rem.Seen, s.remaining)
		lo, hi := q-admitted, q-admitted
		if st != nil {
			// The state kept: the one whose figure at its instant is the
			// advertised one, else the first whose interval's figures
			// span it, else the earlier.
			lo, hi = q, 0
			exact, spans := -1, -1
			for i, c := range at {
				clo, chi := left(c.st, t, q), left(c.st, r, q)
				lo, hi = min(lo, clo, chi), max(hi, clo, chi)
				if exact < 0 && left(c.st, c.at, q) == s.remaining {
					exact = i
				}
				if spans < 0 && s.remaining >= min(clo, chi) && s.remaining <= max(clo, chi) {
					spans = i
				}
			}
			switch {
			case exact >= 0:
				st = at[exact].st
			case spans >= 0:
				st = at[spans].st
			}
		}
		if s.remaining < lo || s.remaining > hi {
			want := fmt.Sprint(lo)
			if hi != lo {
				want = fmt.Sprintf("%d to %d", lo, hi)
			}
			rem.Verdict = fmt.Sprintf("off: %d remaining after %d admitted one at a time on a fresh key, where %s leaves %s", s.remaining, admitted, or(m.String(), fmt.Sprintf("a quota of %d", q)), want)
			return
		}
	}
	switch {
	case rem.Checked == 0:
		rem.Verdict = "not advertised"
	default:
		rem.Verdict = "exact"
	}
}

// burst is n requests at once, or as many as --max-rate allows when that
// is least or more; n when it is fewer (and pace says so).
func (p *prober) burst(n, least int) int {
	if n > p.c.MaxRate && p.c.MaxRate >= least {
		return p.c.MaxRate
	}
	return n
}

// stateOr returns a fresh state of m, or nil when m is no model.
func (model) stateOr(m model) state {
	if m.Algorithm == "" {
		return nil
	}
	return m.newState()
}

// left is how many more of q st would admit at once at t.
func left(st state, t int64, q int) int {
	n := 0
	for n < q && st.admits(t, n+1) {
		n++
	}
	return n
}

// keyless sends twice the quota without a key, judged by status.
func (p *prober) keyless(ctx context.Context, q int, _ model) error {
	plan := make([]request, p.burst(2*q, q+1))
	for i := range plan {
		plan[i].At = time.Duration(i) * 100 * time.Microsecond
	}
	answers, err := p.send(ctx, plan, time.Time{}, nil)
	if err != nil && !errors.Is(err, errNotDeciding) {
		return err
	}
	// A 400 for a missing key is no admission: counted apart.
	served, limited, rejected, status := 0, 0, 0, 0
	for _, a := range answers {
		switch {
		case a.Refused:
			limited++
		case a.Admitted:
			served++
		case a.Status != 0:
			rejected, status = rejected+1, a.Status
		}
	}
	k := &p.r.Keys.Keyless
	switch {
	case rejected > 0 && served == 0 && limited == 0:
		*k = fmt.Sprintf("refused (%d)", status)
	case limited > 0:
		*k = fmt.Sprintf("limited, as one key (%d of %d served)", served, len(answers))
	case served > 0:
		*k = "not limited"
	default:
		*k = "not decided"
	}
	return nil
}

// headersOf names the rate-limit fields on the first admitted and the
// first refused answer, and collects the fields that did not parse.
func headersOf(answers []answer) Headers {
	var h Headers
	for _, a := range answers {
		switch {
		case !a.Decided():
			continue
		case a.Admitted && h.OnAdmitted == nil:
			h.OnAdmitted = fieldsOf(a.Header)
		case !a.Admitted && h.OnRefused == nil:
			h.OnRefused = fieldsOf(a.Header)
		}
		for _, m := range read(a.Header, a.Received).malformed {
			if !slices.Contains(h.Malformed, m) && len(h.Malformed) < 5 {
				h.Malformed = append(h.Malformed, m)
			}
		}
	}
	return h
}

// concurrent plans k requests on one fresh key, all at once.
func concurrent(key string, k int) []request {
	out := make([]request, k)
	for i := range out {
		out[i] = request{Key: key}
	}
	return out
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
