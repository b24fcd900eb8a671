package probe

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// watch is the calibration's second step: how a key spent of its quota
// comes back. The pressed key is sent requests all along, ever more
// sparsely; the quiet keys, spent at the same moment, one request after
// each of growing silences. Its fields are what the press has seen so
// far, which each answer read moves on.
type watch struct {
	p   *prober
	cal *Calibration
	q   int // the quota, corrected by the quiet keys' spending

	pressed  string
	quiet    []string
	deadline time.Time
	// pressMost is where the press stops, in requests sent; windowedAt the
	// run of admissions that is a window's.
	pressMost, windowedAt int

	spendPlan []request
	got       []answer  // the spending's answers
	spent     time.Time // when the keys were spent
	together  bool      // the spending and the press sent in one plan

	admits       []time.Time // the pressed key's admissions, in order sent
	refusedUntil time.Time   // its last refusal before the first of them
	runs         [][2]int    // its runs of admissions: first and last index into admits
	prevAdmitted bool
	pressedGot   []answer // its answers, in the order sent (a queue's)
	// The quiet keys' first admission after a silence, the request before
	// it, and each key's last request, since the spending.
	quietAt, quietBefore time.Duration
	lastQuiet            map[string]time.Duration
}

// plan decides how the keys are watched: lean (the spent key alone,
// sparsely) where the quota is too large for the quiet keys and the
// fingerprint within --max-requests; one quiet key where three spent at
// once would pass --max-rate; and the spending, with the pressed key
// again where it may have come back while one request at a time was
// asked.
func (w *watch) plan() error {
	p, cal, q := w.p, w.cal, w.q
	cal.Lean = p.lean(q)
	if need := q + 300; cal.Lean && need > p.c.MaxRequests-p.requests {
		// The press (about 200), and at the least a bucket's lean
		// fingerprint (the quota and 40 more; a window's takes one and a
		// half quotas): say so now rather than after the press's minute.
		return fmt.Errorf("calibration: a fresh key got %d back to back; probing a quota that large takes at least %d requests more (the spent key watched through its return, and the quota spent again), and %d are left: --max-requests %d or more (or give the limit with --limit)", q, need, p.c.MaxRequests-p.requests, p.requests+need)
	}
	if cal.Lean {
		p.say("calibration: a fresh key got %d back to back; the fingerprint of that quota takes %d requests, with the quiet keys and the press %d, more than the %d left: the spent key watched sparsely, alone", q, fingerprintCost(q), fingerprintCost(q)+2*(q+2)+pressCost, p.c.MaxRequests-p.requests)
		w.quiet = nil
	} else {
		p.say("calibration: a fresh key got %d back to back; now how a spent key comes back", q)
	}
	if 3*(q+2) > p.c.MaxRate && len(w.quiet) > 1 {
		// All spent at once would pass --max-rate: one quiet key, which
		// says when a silent key comes back within a factor of 2, not √2.
		w.quiet = w.quiet[:1]
	}
	spending := w.quiet
	if cal.InFlight.OneAtATime > 0 {
		spending = append(slices.Clone(w.quiet), w.pressed)
	}
	for i := range q + 2 {
		for _, k := range spending {
			w.spendPlan = append(w.spendPlan, request{Key: k, At: time.Duration(i) * 100 * time.Microsecond})
		}
	}
	return nil
}

// bounds sets where the press stops and what run of admissions is a
// window's, from the quota as the spending corrected it. The press stops
// at half of --max-requests; when lean, where what is left is a bucket's
// lean fingerprint and the remaining check (the quota, and 60; a
// window's is checked when it is planned).
func (w *watch) bounds() {
	p, q := w.p, w.q
	w.pressMost, w.windowedAt = p.c.MaxRequests/2, q
	if w.cal.Lean {
		w.pressMost = p.c.MaxRequests - (q + 60) - 20
		// Twenty in a row, or a twentieth of the quota: a bucket asked late
		// (--max-rate thinned the press's first second) gives back what
		// it refilled meanwhile in one run (nginx's 10/s, 9 after 0.9s).
		w.windowedAt = max(leanRun, q/10)
	}
}

// spend spends the quiet keys (and the pressed key again, where planned).
// A target that delays answers the spending's last admissions when its
// queue lets them go, its bucket refilled by then: the press is sent
// with the spending, in one plan, on its own time (press).
func (w *watch) spend(ctx context.Context) error {
	w.together = w.p.queued && len(w.spendPlan) > 0
	if w.together {
		last := w.spendPlan[len(w.spendPlan)-1].At + time.Millisecond
		w.spent = w.p.x.now().Add(20 * time.Millisecond).Add(last)
		return nil
	}
	if len(w.spendPlan) > 0 {
		var err error
		if w.got, err = w.p.send(ctx, w.spendPlan, time.Time{}, nil); err != nil {
			return err
		}
	}
	w.spent = w.p.x.now()
	w.quietCorrected()
	return nil
}

// quietCorrected corrects the quota by what the quiet keys got when
// spent: each the same, fewer, where the first key's rounds straddled a
// refill; else as many as they got in all, each.
func (w *watch) quietCorrected() {
	var quietGot []answer
	for _, a := range w.got {
		if a.Key != w.pressed {
			quietGot = append(quietGot, a)
		}
	}
	q := w.q
	if n := admittedOf(quietGot); len(w.quiet) > 0 && n != len(w.quiet)*q {
		each := admittedEach(quietGot)
		m := each[w.quiet[0]]
		same := m > 0 && m < q && !slices.ContainsFunc(w.quiet, func(k string) bool { return each[k] != m })
		if same {
			// Each got the same, fewer: the first key's rounds, sent one
			// after another, straddled a window's edge or took a refill
			// (a fixed window of 20/s gave 40 to rounds that took 0.8s
			// on a busy host); the quiet keys, sent at once, did not.
			w.p.say("calibration: %d more fresh keys got %d each back to back, not %d: the first key's rounds straddled a refill; the quota is %d", len(w.quiet), m, q, m)
			w.q, w.cal.Quota = m, m
		} else {
			w.p.say("calibration: %d more fresh keys got %d back to back in all, not %d each", len(w.quiet), n, q)
			w.q = max(q, (n+len(w.quiet)-1)/len(w.quiet))
		}
	}
}

// done reports whether the watch has seen enough: a rate, two runs a
// window apart, a lean window's one run, or the quiet key back a while
// ago and the pressed one never.
func (w *watch) done() bool {
	switch {
	case len(w.runs) >= 6 && !windowed(w.runs, w.windowedAt):
		return true // one by one: enough for a rate
	case len(w.runs) >= 2 && windowed(w.runs, w.windowedAt):
		return true // two runs: a window's length apart
	case w.cal.Lean && windowed(w.runs, w.windowedAt):
		return true // one run: its length unspent, when lean
	case len(w.admits) == 0 && w.quietAt > 0 && w.p.x.now().Sub(w.spent) > max(w.quietAt*6/5, w.quietAt+time.Second)+w.p.mostHeld():
		return true // the quiet key came back a while ago; the pressed one never (nor held)
	}
	return false
}

// pressedOne reads the pressed key's next answer in the order sent.
func (w *watch) pressedOne(a answer) {
	if !a.Admitted && len(w.admits) == 0 {
		w.refusedUntil = a.Sent
	}
	if a.Admitted {
		w.admits = append(w.admits, a.Sent)
		if w.prevAdmitted {
			w.runs[len(w.runs)-1][1] = len(w.admits) - 1
		} else {
			w.runs = append(w.runs, [2]int{len(w.admits) - 1, len(w.admits) - 1})
		}
	}
	w.prevAdmitted = a.Admitted
}

// stop reads an answer of the press, and says whether to go on.
func (w *watch) stop(a answer) bool {
	if !a.Decided() {
		return true
	}
	switch a.Key {
	case w.pressed:
		if !w.p.queued {
			w.pressedOne(a)
			break
		}
		// A held admission comes back after refusals sent later: the
		// key's answers read again in the order sent.
		i, _ := slices.BinarySearchFunc(w.pressedGot, a.Sent, func(x answer, t time.Time) int { return x.Sent.Compare(t) })
		w.pressedGot = slices.Insert(w.pressedGot, i, a)
		w.admits, w.runs, w.refusedUntil, w.prevAdmitted = nil, nil, time.Time{}, false
		for _, a := range w.pressedGot {
			w.pressedOne(a)
		}
	default:
		at := a.Sent.Sub(w.spent)
		if a.Admitted && w.quietAt == 0 {
			w.quietAt, w.quietBefore = at, w.lastQuiet[a.Key]
		}
		w.lastQuiet[a.Key] = at
	}
	return !w.done() && w.p.x.now().Before(w.deadline) && w.p.requests+1 < w.pressMost
}

// press sends the press (pressPlan), its first second thinned where the
// spending just sent would pass --max-rate with it; with the spending,
// where the two go together; then, the key back but not yet clear how,
// more at the pace it came back at, for a rate or a second run.
func (w *watch) press(ctx context.Context) error {
	p, cal, q := w.p, w.cal, w.q
	pressing := w.stop
	if cal.Lean {
		// The sparse press ends at the key's first admission: what follows
		// is asked faster, below.
		pressing = func(a answer) bool { return w.stop(a) && len(w.admits) == 0 }
	}
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
	plan := p.thin(pressPlan(w.pressed, w.quiet, per, w.deadline.Sub(w.spent), most), w.spent)
	if w.together {
		if err := w.pressWithSpending(ctx, plan, pressing); err != nil {
			return err
		}
	} else if _, err := p.send(ctx, plan, w.spent, pressing); err != nil {
		return err
	}
	if len(w.admits) > 0 && !w.done() && p.x.now().Before(w.deadline) {
		gap := max(w.admits[0].Sub(w.spent)/time.Duration(2*w.q), time.Second/time.Duration(p.c.pacedMost()))
		var more []request
		for t := time.Duration(0); t < w.deadline.Sub(p.x.now()) && p.requests+len(more) < w.pressMost; t += gap {
			more = append(more, request{Key: w.pressed, At: t})
		}
		if _, err := p.send(ctx, more, time.Time{}, w.stop); err != nil {
			return err
		}
	}
	return nil
}

// pressWithSpending sends the spending and the press in one plan: the
// press on its own time after the spending, whose answers (the queue's
// late ones among them) are read once all are in.
func (w *watch) pressWithSpending(ctx context.Context, plan []request, pressing func(answer) bool) error {
	spend := w.spendPlan
	begin := w.spent.Add(-(spend[len(spend)-1].At + time.Millisecond))
	offset := w.spent.Sub(begin)
	both := slices.Clone(spend)
	for _, r := range plan {
		both = append(both, request{Key: r.Key, At: r.At + offset})
	}
	both = w.p.thin(both, begin)
	answers, err := w.p.send(ctx, both, begin, func(a answer) bool {
		if a.Intended.Before(w.spent) {
			return true // the spending's
		}
		return pressing(a)
	})
	if err != nil {
		return err
	}
	for _, a := range answers {
		if a.Intended.Before(w.spent) {
			w.got = append(w.got, a)
		}
	}
	w.quietCorrected()
	return nil
}

// read fills the calibration from what the watch saw, or says why it saw
// too little: no room to watch, or a window or refill too long for
// --max-time.
func (w *watch) read() error {
	p, cal, q := w.p, w.cal, w.q
	admits, runs := w.admits, w.runs
	if len(admits) > 0 {
		cal.Recovered = admits[0].Sub(w.spent).Seconds()
		if w.refusedUntil.After(w.spent) {
			cal.RefusedUntil = w.refusedUntil.Sub(w.spent).Seconds()
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
	cal.Windowed = windowed(runs, w.windowedAt)
	if len(runs) >= 2 {
		cal.Gap = admits[runs[1][0]].Sub(admits[runs[0][0]]).Seconds()
	}
	cal.Quiet, cal.QuietBefore = w.quietAt.Seconds(), w.quietBefore.Seconds()
	if w.quietAt > 0 {
		cal.QuietSilence = (w.quietAt - w.quietBefore).Seconds()
	}
	cal.Counted = len(admits) == 0 && w.quietAt > 0
	if len(admits) == 0 && w.quietAt == 0 && p.requests+1 >= w.pressMost {
		return fmt.Errorf("calibration: a quota of %d at once, and then no room within --max-requests %d to watch how a spent key comes back (%d sent): give more with --max-requests, or the limit with --limit", q, p.c.MaxRequests, p.requests)
	}
	if len(admits) == 0 && w.quietAt == 0 {
		return w.tooLong()
	}
	return nil
}

// tooLong says that nothing came back within half of --max-time, and
// what --max-time would settle it.
func (w *watch) tooLong() error {
	p, q := w.p, w.q
	waited := p.x.now().Sub(w.spent).Round(time.Second)
	if w.cal.Lean {
		return fmt.Errorf("calibration: a quota of %d at once, then nothing admitted again in %v, asked ever more sparsely: the window or the refill is longer than half of --max-time %v; settling it takes about three of them, --max-time %v or more (or give the limit with --limit)",
			q, waited, p.c.MaxTime, (3*waited).Round(time.Minute)+time.Minute)
	}
	// Settling a window takes about six of them: the calibration's two,
	// the fingerprint's three, and a round; when lean, three.
	pay := (6 * waited).Round(time.Minute) + time.Minute
	last := w.quiet[len(w.quiet)-1]
	silence := max(w.lastQuiet[w.quiet[0]]/2, w.lastQuiet[last]-w.lastQuiet[last]*100/241).Round(time.Second)
	return fmt.Errorf("calibration: a quota of %d at once, then nothing admitted again in %v, pressed or after %v of silence: the window or the refill is longer than half of --max-time %v; settling it takes about six of them, --max-time %v or more (or give the limit with --limit)",
		q, waited, silence, p.c.MaxTime, pay)
}
