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
	deadline := p.x.now().Add(p.c.MaxTime / 2)
	pressed, quiet := first.Key, []string{p.key("quiet"), p.key("quiet")}
	cal.Lean = p.lean(q)
	if need := q + 300; cal.Lean && need > p.c.MaxRequests-p.requests {
		// The press (about 200), and at the least a bucket's lean
		// fingerprint (the quota and 40 more; a window's takes one and a
		// half quotas): say so now rather than after the press's minute.
		return cal, fmt.Errorf("calibration: a fresh key got %d back to back; probing a quota that large takes at least %d requests more (the spent key watched through its return, and the quota spent again), and %d are left: --max-requests %d or more (or give the limit with --limit)", q, need, p.c.MaxRequests-p.requests, p.requests+need)
	}
	if cal.Lean {
		p.say("calibration: a fresh key got %d back to back; the fingerprint of that quota takes %d requests, with the quiet keys and the press %d, more than the %d left: the spent key watched sparsely, alone", q, fingerprintCost(q), fingerprintCost(q)+2*(q+2)+pressCost, p.c.MaxRequests-p.requests)
		quiet = nil
	} else {
		p.say("calibration: a fresh key got %d back to back; now how a spent key comes back", q)
	}
	if 3*(q+2) > p.c.MaxRate && len(quiet) > 1 {
		// All spent at once would pass --max-rate: one quiet key, which
		// says when a silent key comes back within a factor of 2, not √2.
		quiet = quiet[:1]
	}
	// The quiet keys spent, and the pressed key again with them when it
	// may have come back while one request at a time was asked.
	spending := quiet
	if cal.InFlight.OneAtATime > 0 {
		spending = append(slices.Clone(quiet), pressed)
	}
	var spend []request
	for i := range q + 2 {
		for _, k := range spending {
			spend = append(spend, request{Key: k, At: time.Duration(i) * 100 * time.Microsecond})
		}
	}
	var got []answer
	var spent time.Time
	// A target that delays answers the spending's last admissions when
	// its queue lets them go, its bucket refilled by then: the press is
	// sent with the spending, in one plan, on its own time (below).
	together := p.queued && len(spend) > 0
	if together {
		last := spend[len(spend)-1].At + time.Millisecond
		spent = p.x.now().Add(20 * time.Millisecond).Add(last)
	} else {
		if len(spend) > 0 {
			if got, err = p.send(ctx, spend, time.Time{}, nil); err != nil {
				return cal, err
			}
		}
		spent = p.x.now()
	}
	quietCorrected := func() {
		var quietGot []answer
		for _, a := range got {
			if a.Key != pressed {
				quietGot = append(quietGot, a)
			}
		}
		if n := admittedOf(quietGot); len(quiet) > 0 && n != len(quiet)*q {
			each := admittedEach(quietGot)
			m := each[quiet[0]]
			same := m > 0 && m < q && !slices.ContainsFunc(quiet, func(k string) bool { return each[k] != m })
			if same {
				// Each got the same, fewer: the first key's rounds, sent one
				// after another, straddled a window's edge or took a refill
				// (a fixed window of 20/s gave 40 to rounds that took 0.8s
				// on a busy host); the quiet keys, sent at once, did not.
				p.say("calibration: %d more fresh keys got %d each back to back, not %d: the first key's rounds straddled a refill; the quota is %d", len(quiet), m, q, m)
				q, cal.Quota = m, m
			} else {
				p.say("calibration: %d more fresh keys got %d back to back in all, not %d each", len(quiet), n, q)
				q = max(q, (n+len(quiet)-1)/len(quiet))
			}
		}
	}
	if !together {
		quietCorrected()
	}
	var admits []time.Time     // the pressed key's admissions, in order sent
	var refusedUntil time.Time // its last refusal before the first of them
	var runs [][2]int          // the pressed key's runs of admissions: first and last index into admits
	prevAdmitted := false
	// The quiet keys' requests after growing silences, the second's
	// silences longer by √2 than the first's: the first admitted says
	// when a silent key comes back, to within a factor of √2.
	quietAt, quietBefore := time.Duration(0), time.Duration(0)
	lastQuiet := map[string]time.Duration{}
	// The press stops at half of --max-requests; when lean, where what
	// is left is a bucket's lean fingerprint and the remaining check (the
	// quota, and 60; a window's is checked when it is planned).
	pressMost := p.c.MaxRequests / 2
	if cal.Lean {
		pressMost = p.c.MaxRequests - (q + 60) - 20
	}
	windowedAt := q // the run of admissions that is a window's
	if cal.Lean {
		// Twenty in a row, or a twentieth of the quota: a bucket asked late
		// (--max-rate thinned the press's first second) gives back what
		// it refilled meanwhile in one run (nginx's 10/s, 9 after 0.9s).
		windowedAt = max(leanRun, q/10)
	}
	done := func() bool {
		switch {
		case len(runs) >= 6 && !windowed(runs, windowedAt):
			return true // one by one: enough for a rate
		case len(runs) >= 2 && windowed(runs, windowedAt):
			return true // two runs: a window's length apart
		case cal.Lean && windowed(runs, windowedAt):
			return true // one run: its length unspent, when lean
		case len(admits) == 0 && quietAt > 0 && p.x.now().Sub(spent) > max(quietAt*6/5, quietAt+time.Second)+p.mostHeld():
			return true // the quiet key came back a while ago; the pressed one never (nor held)
		}
		return false
	}
	var pressedGot []answer // the pressed key's, in the order sent
	// pressedOne reads the pressed key's next answer in the order sent.
	pressedOne := func(a answer) {
		if !a.Admitted && len(admits) == 0 {
			refusedUntil = a.Sent
		}
		if a.Admitted {
			admits = append(admits, a.Sent)
			if prevAdmitted {
				runs[len(runs)-1][1] = len(admits) - 1
			} else {
				runs = append(runs, [2]int{len(admits) - 1, len(admits) - 1})
			}
		}
		prevAdmitted = a.Admitted
	}
	stop := func(a answer) bool {
		if !a.Decided() {
			return true
		}
		switch a.Key {
		case pressed:
			if !p.queued {
				pressedOne(a)
				break
			}
			// A held admission comes back after refusals sent later: the
			// key's answers read again in the order sent.
			i, _ := slices.BinarySearchFunc(pressedGot, a.Sent, func(x answer, t time.Time) int { return x.Sent.Compare(t) })
			pressedGot = slices.Insert(pressedGot, i, a)
			admits, runs, refusedUntil, prevAdmitted = nil, nil, time.Time{}, false
			for _, a := range pressedGot {
				pressedOne(a)
			}
		default:
			at := a.Sent.Sub(spent)
			if a.Admitted && quietAt == 0 {
				quietAt, quietBefore = at, lastQuiet[a.Key]
			}
			lastQuiet[a.Key] = at
		}
		return !done() && p.x.now().Before(deadline) && p.requests+1 < pressMost
	}
	pressing := stop
	if cal.Lean {
		// The sparse press ends at the key's first admission: what follows
		// is asked faster, below.
		pressing = func(a answer) bool { return stop(a) && len(admits) == 0 }
	}
	// Its first second thinned where the spending just sent would pass
	// --max-rate with it.
	most := p.c.pacedMost()
	if c := cal.InFlight; c.Share > 0 {
		// A limit in flight may be in front: pressed slowly enough that
		// fewer than its K are in flight at once.
		most = min(most, max(int(float64(max(c.AtOnceAdmitted-1, 1))/c.Service), 1))
	}
	per := 2 * q // requests a press sends in any stretch of e at e after the spending
	if cal.Lean {
		per = leanPress
	}
	plan := p.thin(pressPlan(pressed, quiet, per, deadline.Sub(spent), most), spent)
	if together {
		// The spending and the press in one plan: the press on its own
		// time after the spending, whose answers (the queue's late ones
		// among them) are read once all are in.
		begin := spent.Add(-(spend[len(spend)-1].At + time.Millisecond))
		offset := spent.Sub(begin)
		both := slices.Clone(spend)
		for _, r := range plan {
			both = append(both, request{Key: r.Key, At: r.At + offset})
		}
		both = p.thin(both, begin)
		answers, err := p.send(ctx, both, begin, func(a answer) bool {
			if a.Intended.Before(spent) {
				return true // the spending's
			}
			return pressing(a)
		})
		if err != nil {
			return cal, err
		}
		for _, a := range answers {
			if a.Intended.Before(spent) {
				got = append(got, a)
			}
		}
		quietCorrected()
	} else if _, err := p.send(ctx, plan, spent, pressing); err != nil {
		return cal, err
	}
	if len(admits) > 0 && !done() && p.x.now().Before(deadline) {
		// Back, but not yet clear how: keep pressing it at the pace it
		// came back at, for a rate or a second run.
		gap := max(admits[0].Sub(spent)/time.Duration(2*q), time.Second/time.Duration(p.c.pacedMost()))
		var more []request
		for t := time.Duration(0); t < deadline.Sub(p.x.now()) && p.requests+len(more) < pressMost; t += gap {
			more = append(more, request{Key: pressed, At: t})
		}
		if _, err := p.send(ctx, more, time.Time{}, stop); err != nil {
			return cal, err
		}
	}
	if len(admits) > 0 {
		cal.Recovered = admits[0].Sub(spent).Seconds()
		if refusedUntil.After(spent) {
			cal.RefusedUntil = refusedUntil.Sub(spent).Seconds()
		}
	}
	if len(admits) > 1 {
		cal.Rate = float64(len(admits)-1) / admits[len(admits)-1].Sub(admits[0]).Seconds()
	}
	if cal.Lean && len(runs) >= 3 {
		// From the second run on: a bucket asked late (--max-rate thinned
		// the press's first second) gives back what it refilled meanwhile
		// in one run first, which is no rate (nginx's 10/s read 18/s).
		from := runs[1][0]
		if span := admits[len(admits)-1].Sub(admits[from]).Seconds(); span > 0 {
			cal.Rate = float64(len(admits)-1-from) / span
		}
	}
	cal.Windowed = windowed(runs, windowedAt)
	if len(runs) >= 2 {
		cal.Gap = admits[runs[1][0]].Sub(admits[runs[0][0]]).Seconds()
	}
	cal.Quiet, cal.QuietBefore = quietAt.Seconds(), quietBefore.Seconds()
	if quietAt > 0 {
		cal.QuietSilence = (quietAt - quietBefore).Seconds()
	}
	cal.Counted = len(admits) == 0 && quietAt > 0
	if len(admits) == 0 && quietAt == 0 && p.requests+1 >= pressMost {
		return cal, fmt.Errorf("calibration: a quota of %d at once, and then no room within --max-requests %d to watch how a spent key comes back (%d sent): give more with --max-requests, or the limit with --limit", q, p.c.MaxRequests, p.requests)
	}
	if len(admits) == 0 && quietAt == 0 {
		waited := p.x.now().Sub(spent).Round(time.Second)
		// Settling a window takes about six of them: the calibration's
		// two, the fingerprint's three, and a round; when lean, three.
		pay := (6 * waited).Round(time.Minute) + time.Minute
		if cal.Lean {
			return cal, fmt.Errorf("calibration: a quota of %d at once, then nothing admitted again in %v, asked ever more sparsely: the window or the refill is longer than half of --max-time %v; settling it takes about three of them, --max-time %v or more (or give the limit with --limit)",
				q, waited, p.c.MaxTime, (3*waited).Round(time.Minute)+time.Minute)
		}
		last := quiet[len(quiet)-1]
		silence := max(lastQuiet[quiet[0]]/2, lastQuiet[last]-lastQuiet[last]*100/241).Round(time.Second)
		return cal, fmt.Errorf("calibration: a quota of %d at once, then nothing admitted again in %v, pressed or after %v of silence: the window or the refill is longer than half of --max-time %v; settling it takes about six of them, --max-time %v or more (or give the limit with --limit)",
			q, waited, silence, p.c.MaxTime, pay)
	}
	return cal, nil
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
