package probe

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Calibration is what the probe measured before it planned anything: the
// quota, and how a spent key comes back. A limit given with --limit is
// not measured; its From says so.
type Calibration struct {
	From     string  `json:"from"` // "--limit" or "measured"
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	// Quota is what a fresh key got back to back.
	Quota int `json:"quota,omitempty"`
	// Pressed is a spent key sent requests all along, ever more sparsely:
	// the seconds from its spending to its first admission again (0:
	// none), and the admissions a second after that.
	Recovered float64 `json:"recovered_s,omitempty"`
	// RefusedUntil is the seconds from the spending to the pressed key's
	// last refusal before it came back: it came back between the two.
	RefusedUntil float64 `json:"refused_until_s,omitempty"`
	Rate         float64 `json:"rate,omitempty"`
	// Windowed: the pressed key's admissions came back in runs (a window
	// turning or expiring) rather than one by one (a bucket refilling).
	Windowed bool `json:"windowed,omitempty"`
	// Gap is the seconds between the starts of two runs, when two came.
	Gap float64 `json:"gap_s,omitempty"`
	// Quiet is a second spent key left alone, but for one request after
	// each of growing silences: the seconds from its spending to the
	// first of those admitted (0: none), and the one before it.
	Quiet       float64 `json:"quiet_s,omitempty"`
	QuietBefore float64 `json:"quiet_before_s,omitempty"`
	// QuietSilence is the silence before that admitted request.
	QuietSilence float64 `json:"quiet_silence_s,omitempty"`
	// Counted: the quiet key came back and the pressed key did not, long
	// after: the target counts refused requests.
	Counted bool `json:"counted,omitempty"`
	// InFlight is what was asked to tell a limit on requests in flight
	// from a rate limit.
	InFlight InFlightCheck `json:"in_flight,omitzero"`
	// Lean: the quota is too large for the quiet keys and the whole
	// fingerprint within --max-requests; the spent key was watched
	// sparsely, alone, and a lean fingerprint follows (leanPlan).
	Lean bool `json:"lean,omitempty"`
}

// The calibration's bounds: the most it sends back to back looking for
// the quota, and the share of --max-requests and --max-time it may take.
const calibrationBurst = 1000

// calibrate measures what c.Policy does not give: the quota, sending
// rounds of requests back to back on a fresh key until one has a
// refusal; then how a spent key comes back, pressing that key on a
// schedule whose gaps grow with the time since it was spent (a window or
// a refill longer than t needs no request every t/20), while a second key,
// spent at the same moment, gets one request after each of growing
// silences. A target that counts refused requests lets the quiet key
// back and never the pressed one. first is a fresh key's first answer.
func (p *prober) calibrate(ctx context.Context, first answer, claimed int) (cal Calibration, err error) {
	cal = Calibration{From: "measured"}
	start := p.x.now()
	sent := p.requests
	defer func() { cal.Requests, cal.Seconds = p.requests-sent+1, p.x.now().Sub(start).Seconds() }()
	// Half the budget, at most: the lean fingerprint of a quota that large
	// needs about one and a half more (a bucket's, one).
	limitN := min(calibrationBurst, p.c.MaxRequests/2)
	if claimed > 0 && claimed+8 <= p.c.MaxRequests/2 {
		limitN = max(limitN, claimed+8) // a quota declared within it is spent
	}
	q, err := p.quota(ctx, first, claimed, limitN)
	if err != nil {
		return cal, err
	}
	cal.Quota = q
	if cal.InFlight, err = p.inFlightCheck(ctx, q); err != nil {
		return cal, err
	}
	if named, err := p.inFlightNamed(ctx, &cal.InFlight, q); err != nil || named {
		return cal, err
	}
	w := &watch{p: p, cal: &cal, q: q, pressed: first.Key, quiet: []string{p.key("quiet"), p.key("quiet")},
		deadline: p.x.now().Add(p.c.MaxTime / 2), lastQuiet: map[string]time.Duration{}}
	if err := w.plan(); err != nil {
		return cal, err
	}
	if err := w.spend(ctx); err != nil {
		return cal, err
	}
	w.bounds()
	if err := w.press(ctx); err != nil {
		return cal, err
	}
	return cal, w.read()
}

// windowed reports whether a key's runs of admissions are a window's
// (a run of at least 3, and of half of at) rather than a bucket's, one at
// a time.
func windowed(runs [][2]int, at int) bool {
	for _, r := range runs {
		if n := r[1] - r[0] + 1; n >= 3 && n >= at/2 {
			return true
		}
	}
	return false
}

// pressPlan plans the keys the calibration watches after spending them:
// pressed, sent a request every e/per at e after the spending (no faster
// than most a second): with per twice the quota, enough to keep a target
// that counts refusals of q per any window longer than e refusing, and to
// see a bucket that refills slower than every e; and the quiet keys, one
// request each after silences of a quarter of a second, then half, one,
// two, ... seconds, the second's √2 times the first's.
func pressPlan(pressed string, quiet []string, per int, within time.Duration, most int) []request {
	var plan []request
	least := time.Second / time.Duration(max(most, 1))
	for e := 20 * time.Millisecond; e < within; e += max(e/time.Duration(per), least) {
		plan = append(plan, request{Key: pressed, At: e})
	}
	for i, first := range []time.Duration{250 * time.Millisecond, 354 * time.Millisecond}[:len(quiet)] {
		for s, at := first, first; at < within; s, at = 2*s, at+2*s {
			plan = append(plan, request{Key: quiet[i], At: at})
		}
	}
	slices.SortStableFunc(plan, func(a, b request) int { return int(a.At - b.At) })
	return plan
}

// quota sends rounds of requests back to back on first's key (a fresh
// key's first answer), growing from the quota the target claims (or 8)
// and doubling, at most most in all, until a round has a refusal, and
// returns every admission: a round's requests are in flight together and
// decided in any order.
func (p *prober) quota(ctx context.Context, first answer, claimed, most int) (int, error) {
	admitted, refused := 0, !first.Admitted
	if first.Admitted {
		admitted = 1
	}
	round := 8
	if claimed > 0 {
		round = claimed + 4
	}
	// Until a round has a refusal, and one admission at least: a first
	// request refused may be a target that refuses at random.
	for sent := 1; sent < most && (!refused || (admitted == 0 && sent <= 32)); round *= 2 {
		// As many as --max-rate leaves in this second, so that the rounds
		// go within one as far as it allows: rounds a second apart would
		// take a bucket's refill for its burst.
		n := min(round, most-sent, max(p.c.MaxRate-len(p.sentSince(p.x.now().Add(-time.Second))), 1))
		plan := make([]request, n)
		for i := range plan {
			plan[i] = request{Key: first.Key, At: time.Duration(i) * 100 * time.Microsecond}
		}
		// No round stops early: the answers in flight when a send stops
		// are not kept, and a round's requests arrive in any order (one
		// that stopped at four refusals counted nginx's 601 as 552).
		got, err := p.send(ctx, plan, time.Time{}, nil)
		if err != nil {
			return 0, err
		}
		sent += n
		for _, a := range got {
			switch {
			case !a.Decided():
			case a.Admitted:
				admitted++
			default:
				refused = true
			}
		}
	}
	switch {
	case !refused && p.r.Claims.Policy.N > admitted:
		// It declares more than was sent: say what probing that takes
		// (the quota, the press, the lean fingerprint's halves and the
		// checks that fit; the quota within half of --max-requests), rather
		// than that there is no limit.
		l := p.r.Claims.Policy
		fp := len(leanPlan(p.rng, "", shapeOf(l), p.x.now(), false, true))
		need := max(l.Quota()+8+200+fp+20, 2*(l.Quota()+8))             // and the press, and the remaining check
		pay := (l.Window() * 5 / 2).Truncate(time.Minute) + time.Minute // the press's window, the halves', and room
		return 0, fmt.Errorf("calibration: %d requests back to back on one key were all admitted, and the target declares %s: a quota of %d is more than half of --max-requests %d spends on it; probing it takes about %d requests (its lean fingerprint %d) and two and a half of its windows: --max-requests %d and --max-time %v or more", admitted, p.r.Claims.PolicyText, l.Quota(), p.c.MaxRequests, need, fp, need, pay)
	case !refused:
		return 0, fmt.Errorf("calibration: %d requests back to back on one key were all admitted: no limit found within half of --max-requests; give the limit with --limit", admitted)
	case admitted == 0:
		return 0, fmt.Errorf("calibration: a fresh key's first requests were all refused: the target refuses everything, or keys users otherwise than --key says")
	}
	return admitted, nil
}

// guess is where the fit looks, from what the calibration measured and
// what the target claims: the quota seen, and the times that the way a
// spent key came back points to, widely.
func (cal Calibration) guess(claims Claims) guess {
	g := guess{quotas: []int{cal.Quota}}
	var w time.Duration
	switch {
	case cal.Windowed && cal.Gap > 0:
		w = seconds(cal.Gap)
	case cal.Windowed && cal.Lean && cal.RefusedUntil > 0:
		// Asked sparsely, it came back between its last refusal and its
		// first admission: the middle, or the window the target declares
		// when that falls between.
		lo, hi := seconds(cal.RefusedUntil), seconds(cal.Recovered)
		w = (lo + hi) / 2
		if d := claims.Policy.Window(); claims.Policy.Per > 0 && d >= lo*49/50 && d <= hi*51/50 {
			w = d
		}
	case cal.Windowed:
		w = seconds(cal.Recovered)
	case cal.Rate > 0:
		w = seconds(float64(cal.Quota) / cal.Rate)
	case cal.Counted:
		// The quiet key came back after a silence of QuietSilence, and
		// QuietBefore after the spending of not: a window that a refusal
		// restarts is longer than half the first and at most it; one that
		// counts refusals at most the time since the spending.
		lo, hi := seconds(cal.QuietSilence)/2, seconds(cal.Quiet)
		w = time.Duration(math.Sqrt(float64(lo) * float64(hi)))
	}
	switch {
	case cal.Counted:
		g.windows = span{seconds(cal.QuietSilence) * 2 / 5, seconds(cal.Quiet) * 6 / 5}
	case cal.Windowed && cal.Gap == 0:
		g.windows = span{w * 2 / 3, w * 3} // the first run may come early: the epoch's windows
	default:
		g.windows = span{w / 2, w * 2}
	}
	g.window, g.interval = w, w/time.Duration(cal.Quota)
	g.intervals = span{g.windows.lo / time.Duration(cal.Quota), g.windows.hi / time.Duration(cal.Quota)}
	if cal.Rate > 0 && !cal.Windowed {
		g.interval = seconds(1 / cal.Rate)
		g.intervals = span{min(g.intervals.lo, g.interval/2), max(g.intervals.hi, g.interval*2)}
	}
	return g.with(claims)
}

// with returns g widened to take in what the target claims.
func (g guess) with(claims Claims) guess {
	if l := claims.Policy; l.N > 0 {
		if !slices.Contains(g.quotas, l.Quota()) {
			g.quotas = append(g.quotas, l.Quota())
		}
		if l.Per <= 0 {
			return g // a quota, and no window
		}
		w := l.Window()
		// A window read off a reset is whole seconds, rounded up.
		lo, hi := w, w
		if !claims.Exact {
			lo = max(w-time.Second, w/2)
		}
		g.windows = span{min(g.windows.lo, lo*9/10), max(g.windows.hi, hi*11/10)}
		g.claim = claim{quota: l.Quota(), lo: lo, hi: hi}
		t := l.Interval()
		if l.Burst > 0 {
			g.intervals = span{min(g.intervals.lo, t*9/10), max(g.intervals.hi, t*11/10)}
		}
	}
	return g
}

// admittedEach is how many of answers were admitted, a key.
func admittedEach(answers []answer) map[string]int {
	each := map[string]int{}
	for _, a := range answers {
		if a.Admitted {
			each[a.Key]++
		}
	}
	return each
}

func admittedOf(answers []answer) int {
	n := 0
	for _, a := range answers {
		if a.Admitted {
			n++
		}
	}
	return n
}
