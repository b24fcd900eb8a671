package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// RetryAfter is the check of the wait a refusal advertises, after one way
// of spending a fresh key: one request at 80% of it on one key (refused,
// or the wait was longer than needed) and one at the advertised instant on
// another spent alike (admitted, or the field lied). Two keys, so that a
// target that counts refusals is not kept refusing by the first.
type RetryAfter struct {
	Spent  string `json:"spent"`            // how the keys were spent
	Header string `json:"header,omitempty"` // which field advertised the wait
	// Advertised is the wait the key asked at it was told, and
	// AdvertisedEarly the one the key asked at 80% of its own was: each
	// key spent alike, each told its own (0: no refusal advertised one).
	Advertised      float64 `json:"advertised_s"`
	AdvertisedEarly float64 `json:"advertised_early_s,omitempty"`
	// Needed is the wait the judged model needs, seconds.
	Needed  float64 `json:"needed_s,omitempty"`
	Early   string  `json:"at_80_percent,omitempty"`
	AtWait  string  `json:"at_wait,omitempty"`
	Verdict string  `json:"verdict"`
}

// Lies reports whether the refusal's wait was too short: refused when it
// said to come back.
func (ra RetryAfter) Lies() bool { return strings.HasPrefix(ra.Verdict, "lies") }

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
		r.Accuracy = judgeFingerprint(r.fp, r.prefix, m)
	}
	q := max(m.quota(), r.Calibration.Quota, 1)
	steps := []struct {
		about string
		run   func(context.Context, int, model) error
	}{
		{fmt.Sprintf("concurrency: %d requests at once on a fresh key", 2*q), p.concurrency},
		{"remaining: one request at a time on a fresh key", p.remaining},
		{"Retry-After and key isolation: keys spent back to back and over half a window, then asked at 80% of the wait and at it", p.retryAfter},
		{"no key: twice the quota without one", p.keyless},
	}
	if p.c.Target.Key.Kind == "source" {
		r.Keys.Keyless = "not asked: every request has an address"
		steps = steps[:len(steps)-1] // the keyless step
	}
	for _, s := range steps {
		p.say("%s", s.about)
		if err := s.run(ctx, q, m); err != nil {
			return err
		}
	}
	return nil
}

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
	answers, err := p.send(ctx, concurrent(p.key("concurrent"), 2*q), time.Time{}, nil)
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
	st, admitted := model{}.stateOr(m), 0
	for _, a := range answers {
		if !a.Decided() {
			continue
		}
		t := a.Sent.UnixNano()
		if a.Admitted {
			admitted++
			if st != nil {
				st.admit(t, 1)
			}
		} else if st != nil {
			st.refuse(t, 1)
		}
		s := read(a.Header, a.Received)
		if !s.hasRemaining {
			continue
		}
		rem.Checked++
		rem.Seen = append(rem.Seen, s.remaining)
		lo, hi := q-admitted, q-admitted
		if st != nil {
			lo, hi = left(st, t, q), left(st, a.Received.UnixNano(), q)
		}
		if s.remaining < lo || s.remaining > hi {
			want := fmt.Sprint(lo)
			if hi != lo {
				want = fmt.Sprintf("%d to %d", lo, hi)
			}
			rem.Verdict = fmt.Sprintf("off: %d remaining after %d admitted one at a time on a fresh key, where %s leaves %s", s.remaining, admitted, or(m.String(), fmt.Sprintf("a quota of %d", q)), want)
			return nil
		}
	}
	switch {
	case rem.Checked == 0:
		rem.Verdict = "not advertised"
	default:
		rem.Verdict = "exact"
	}
	return nil
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

// retryAfter spends four fresh keys, two back to back (q+1 at once) and
// two over half of m's window (spread evenly, so that a log's entries are
// of different ages), reads the wait each last refusal advertises (a
// target that counts refusals, or restarts a window on each, moves it on
// with every one), and asks one key of each pair at 80% of it and the
// other at it. A fresh key asked right after the first was spent is the
// keys' isolation.
func (p *prober) retryAfter(ctx context.Context, q int, m model) error {
	w := time.Second
	if m.Algorithm != "" {
		w = m.Limit.Window()
	}
	type pair struct {
		spent string
		keys  [2]string
		at    []time.Duration
	}
	burst := pair{spent: "back to back", keys: [2]string{p.key("wait"), p.key("wait")}}
	spread := pair{spent: "over half a window", keys: [2]string{p.key("wait"), p.key("wait")}}
	for i := range q + 1 {
		burst.at = append(burst.at, time.Duration(i)*100*time.Microsecond)
	}
	// Spread evenly over half a window, the last at its end: the quota
	// and one more, or for a bucket, which refills meanwhile, half as much
	// again.
	n := q + 1
	if m.Algorithm.IsBucket() {
		n = q + q/2 + 2
	}
	for i := range n {
		spread.at = append(spread.at, time.Duration(i)*(w/2)/time.Duration(n-1))
	}
	other := p.key("other")
	plan := []request{{Key: other, At: burst.at[len(burst.at)-1] + time.Millisecond}}
	for _, pr := range []pair{burst, spread} {
		for _, k := range pr.keys {
			for _, t := range pr.at {
				plan = append(plan, request{Key: k, At: t})
			}
		}
	}
	slices.SortStableFunc(plan, func(a, b request) int { return int(a.At - b.At) })
	start := p.x.now().Add(50 * time.Millisecond)
	if (m.Algorithm == limiters.FixedWindow || m.Algorithm == limiters.SlidingCounter) && !m.Anchored && w <= 10*time.Second {
		// A tenth into the next of the epoch's windows, so that a window
		// does not turn in the middle of a spending and give the quota
		// again: the refusal's wait would then be the rest of a window
		// that has turned.
		start = start.Truncate(w).Add(w + w/10)
	}
	answers, err := p.send(ctx, plan, start, nil)
	if err != nil {
		return err
	}
	for _, a := range answers {
		if a.Key == other {
			p.r.Keys.Isolated = a.Admitted
		}
	}
	// The follow-ups, each at its share of the wait its key's last refusal
	// advertised, after that refusal; into records what each met.
	base := p.x.now()
	var follow []request
	into := map[string]*string{}
	checks := make([]RetryAfter, 2)
	for i, pr := range []pair{burst, spread} {
		ra := &checks[i]
		ra.Spent = pr.spent
		for j, k := range pr.keys {
			refusal, ok := lastRefusal(answers, k)
			if !ok {
				continue
			}
			s := read(refusal.Header, refusal.Received)
			if s.waitFrom == "" {
				continue
			}
			after := s.wait
			if j == 0 {
				ra.AdvertisedEarly, into[k] = s.wait.Seconds(), &ra.Early
				after = s.wait * 4 / 5 // asked at 80% of it
			} else {
				into[k] = &ra.AtWait
			}
			if j == 1 || ra.Header == "" {
				ra.Header, ra.Advertised = s.waitFrom, s.wait.Seconds()
				if m.Algorithm != "" {
					ra.Needed = needed(m, answers, k, refusal).Seconds()
				}
			}
			follow = append(follow, request{Key: k, At: max(refusal.Received.Add(after).Sub(base), 0)})
		}
	}
	slices.SortStableFunc(follow, func(a, b request) int { return int(a.At - b.At) })
	got, err := p.send(ctx, follow, base, nil)
	if err != nil {
		return err
	}
	for _, a := range got {
		*into[a.Key] = outcome(a)
	}
	for i := range checks {
		checks[i].Verdict = waitVerdict(checks[i], 20*time.Millisecond+p.lat+p.late)
	}
	p.r.RetryAfter = checks
	return nil
}

// lastRefusal returns the last refused answer for key, in the order
// sent.
func lastRefusal(answers []answer, key string) (answer, bool) {
	for i := len(answers) - 1; i >= 0; i-- {
		if a := answers[i]; a.Key == key && a.Decided() && !a.Admitted {
			return a, true
		}
	}
	return answer{}, false
}

// needed is the wait m needs after refusal: m following what the target
// decided of key up to it (every request sent before its answer came
// back: requests in flight together are decided in any order), the first
// instant after which it admits one.
func needed(m model, answers []answer, key string, refusal answer) time.Duration {
	st := m.newState()
	for _, a := range answers {
		if a.Key != key || !a.Decided() || a.Sent.After(refusal.Received) {
			continue
		}
		if a.Admitted {
			st.admit(a.Sent.UnixNano(), 1)
		} else {
			st.refuse(a.Sent.UnixNano(), 1)
		}
	}
	lo := refusal.Received.UnixNano()
	hi := lo + int64(m.Limit.Window()) + int64(time.Second)
	for !st.admits(hi, 1) {
		hi += int64(m.Limit.Window())
		if hi-lo > int64(24*time.Hour) {
			return 0
		}
	}
	return time.Duration(firstAt(st, lo, hi, 1, int64(time.Millisecond)) - lo)
}

func outcome(a answer) string {
	switch {
	case !a.Decided():
		return "undecided"
	case a.Admitted:
		return "admitted"
	}
	return "refused"
}

// waitVerdict judges one Retry-After check. A wait admitted at 80% of it
// was longer than needed, unless it was what was needed rounded up to
// whole seconds (as delta-seconds must be: a bucket that refills in 100ms
// says 1), to within slack of how long answers take.
func waitVerdict(ra RetryAfter, slack time.Duration) string {
	switch {
	case ra.Header == "":
		return "no refusal advertised a wait"
	case ra.AtWait == "refused":
		return "lies: refused at the advertised instant"
	case ra.Early == "admitted" && ra.Needed > 0 && ra.Advertised == math.Trunc(ra.Advertised) &&
		ra.Advertised <= math.Ceil(ra.Needed+slack.Seconds()):
		return "honest, rounded up to whole seconds"
	case ra.Early == "admitted":
		return "longer than needed: admitted at 80% of it"
	case ra.AtWait == "admitted":
		return "honest"
	}
	return "not judged: " + or(ra.AtWait, "no answer at the wait")
}

// keyless sends twice the quota without a key, judged by status.
func (p *prober) keyless(ctx context.Context, q int, _ model) error {
	plan := make([]request, 2*q)
	for i := range plan {
		plan[i].At = time.Duration(i) * 100 * time.Microsecond
	}
	answers, err := p.send(ctx, plan, time.Time{}, nil)
	if err != nil && !errors.Is(err, errNotDeciding) {
		return err
	}
	// By status, not by Admitted: a 400 for a missing key is no
	// admission.
	served, limited, rejected, status := 0, 0, 0, 0
	for _, a := range answers {
		switch {
		case !a.Decided():
		case p.c.Target.denies(a.Status):
			limited++
		case a.Status >= 400:
			rejected, status = rejected+1, a.Status
		default:
			served++
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
