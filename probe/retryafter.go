package probe

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

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
	pairs := p.spentPairs(q, m, w)
	other := p.key("other")
	plan := []request{{Key: other, At: pairs[0].at[len(pairs[0].at)-1] + time.Millisecond}}
	for _, pr := range pairs {
		for _, k := range pr.keys {
			for _, t := range pr.at {
				plan = append(plan, request{Key: k, At: t})
			}
		}
	}
	slices.SortStableFunc(plan, func(a, b request) int { return int(a.At - b.At) })
	start, err := p.pace(plan, p.x.now().Add(50*time.Millisecond))
	if err != nil {
		return err
	}
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
	checks, err := p.followUps(ctx, pairs, answers, m)
	if err != nil {
		return err
	}
	for i := range checks {
		checks[i].Verdict = waitVerdict(checks[i], 20*time.Millisecond+p.lat+p.late)
	}
	p.r.RetryAfter = checks
	return nil
}

// spentPair is two fresh keys spent alike (how, in words), each a request
// at each of at.
type spentPair struct {
	spent string
	keys  [2]string
	at    []time.Duration
}

// spentPairs are the two pairs retryAfter spends: one back to back, the
// quota and one more; one spread evenly over half a window (w), the last
// at its end, the quota and one more, or for a bucket, which refills
// meanwhile, half as much again.
func (p *prober) spentPairs(q int, m model, w time.Duration) []spentPair {
	burst := spentPair{spent: "back to back", keys: [2]string{p.key("wait"), p.key("wait")}}
	spread := spentPair{spent: "over half a window", keys: [2]string{p.key("wait"), p.key("wait")}}
	for i := range q + 1 {
		burst.at = append(burst.at, time.Duration(i)*100*time.Microsecond)
	}
	n := q + 1
	if m.Algorithm.IsBucket() {
		n = q + q/2 + 2
	}
	for i := range n {
		spread.at = append(spread.at, time.Duration(i)*(w/2)/time.Duration(n-1))
	}
	return []spentPair{burst, spread}
}

// followUps asks each key again at its share of the wait its last
// refusal advertised, after that refusal (the first of a pair at 80% of
// it, the second at it), and says what each met, a check a pair.
func (p *prober) followUps(ctx context.Context, pairs []spentPair, answers []answer, m model) ([]RetryAfter, error) {
	base := p.x.now()
	var follow []request
	into := map[string]*string{}
	checks := make([]RetryAfter, len(pairs))
	for i, pr := range pairs {
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
		return nil, err
	}
	for _, a := range got {
		*into[a.Key] = outcome(a)
	}
	return checks, nil
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
