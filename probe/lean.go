package probe

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A quota of hundreds (600 a minute is ordinary) makes the fingerprint,
// which spends a fresh key some thirteen times over, cost more than a
// probe's budget. What tells the families apart costs less: one spent key
// watched through its return tells a bucket (back after one interval,
// then one at a time) from a window (back after most of a window, then
// all at once); a key spent in two halves half a window apart, asked as
// the first half comes back, tells a sliding log (the first half back,
// no more) from a fixed window (all of it, at an edge of its own) and
// from a sliding counter (a share that grows with the window's turn). The
// lean fingerprint is that, each part once.

// The lean calibration's press: leanPress requests in any stretch of e
// at e after the spending (a twentieth: about 170 requests over 90s),
// and the run of admissions, asked at twice the window's rate once the
// key is back, that is a window's rather than a bucket's.
const (
	leanPress = 20
	leanRun   = 20
)

// fingerprintCost is how many requests the fingerprint of a quota of q
// takes: about 13.5q.
func fingerprintCost(q int) int {
	return len(fingerprintPlan(rand.New(rand.NewPCG(0, 1)), "", limiters.Limit{N: q, Per: time.Second}, time.Unix(0, 0)))
}

// lean reports whether a quota of q is too large for the calibration's
// quiet keys and the whole fingerprint within the requests left, with
// room for the press.
func (p *prober) lean(q int) bool {
	return 2*(q+2)+fingerprintCost(q)+pressCost > p.c.MaxRequests-p.requests
}

// pressCost is what lean counts the calibration's press at.
const pressCost = 200

// leanPlan plans the lean fingerprint for about limit (a quota over the
// time a spent quota takes to come back), each part on a key of its own
// (prefix, then the part's name), from start:
//
//   - burst, when the calibration did not spend a key already and the
//     limit is not a bucket's: q+2 back to back, then one request after
//     each twentieth of the time since, to 1.2 windows;
//   - for a bucket, paced instead: q+2 back to back (and what it refills
//     meanwhile), then 40 more at one and a half times its rate, with
//     jitter;
//   - for a window, halves: half the quota back to back, the rest and
//     one more half a window later, then one request every hundredth of a
//     window (every four-hundredth from 0.94 to 1.06 of it, and every
//     1200th from 0.96 to 1.04, where the first half comes back), to 1.15
//     windows, and half the quota and two more
//     just after the first half's window has passed (from a second on,
//     when the burst is sent).
func leanPlan(rng *rand.Rand, prefix string, limit limiters.Limit, start time.Time, bucket, spent bool) []request {
	q, per := max(limit.Quota(), limit.N), limit.Per
	var out []request
	at := func(key string, t time.Duration) {
		out = append(out, request{Key: prefix + key, At: t})
	}
	gap := min(per/time.Duration(40*q), time.Millisecond)
	back := func(key string, from time.Duration, n int) {
		for i := range n {
			at(key, from+time.Duration(i)*gap)
		}
	}
	// A fresh key asked right after a key is spent: whether keys are kept
	// apart, when the checks have no room to ask.
	other := time.Duration(q+2)*gap + time.Millisecond
	if !spent && !bucket {
		back("burst", 0, q+2)
		for e := per / 50; e < per*6/5; e += e / leanPress {
			at("burst", time.Duration(q+2)*gap+e)
		}
	}
	if bucket {
		// The key pressed at once is the paced one: a bucket said by
		// --limit needs no other. Spent with two more than it refills
		// meanwhile.
		interval := per / time.Duration(q)
		n := q + 2 + int(time.Duration(q+2)*gap/interval)
		back("paced", 0, n)
		other = time.Duration(n)*gap + time.Millisecond
		t := time.Duration(n)*gap + interval
		for range 40 {
			at("paced", t)
			t += time.Duration(float64(interval) / 1.5 * (0.5 + rng.Float64()))
		}
	} else {
		h, from := q/2, time.Duration(0)
		if !spent { // the burst's key was spent: later, and a fresh key asked after it
			from = time.Second + 100*time.Millisecond // not in the burst's second
		}
		// Half a second past a second of the clock: a store that keeps
		// time in whole seconds lets the first half back half a second
		// before one that does not, which the press sees.
		from += (time.Second + 500*time.Millisecond - time.Duration(start.Add(from).UnixNano()%int64(time.Second))) % time.Second
		back("halves", from, h)
		back("halves", from+per/2, q-h+1)
		// The window is known to within the calibration's step, a
		// twentieth of it (came back between 56.8s and 59.7s: 58.3s, and
		// it was 60s): the first half is watched closely all through that,
		// and asked again past it.
		again := per + per/25 // the first half's window passed
		for t := per/2 + per/100; t < per*23/20; {
			if t < again || t > again+time.Duration(h+2)*gap {
				at("halves", from+t)
			}
			step := per / 100
			switch {
			case t >= per*96/100 && t < per*104/100:
				step = max(per/1200, time.Millisecond) // where the first half comes back: every 50ms of a minute
			case t >= per*47/50 && t < per*53/50:
				step = per / 400
			}
			t += step
		}
		back("halves", from+again, h+2)
		if spent {
			other = from + per/2 + time.Duration(q-h+1)*gap + time.Millisecond
		}
	}
	at("other", other)
	slices.SortStableFunc(out, func(a, b request) int { return int(a.At - b.At) })
	return out
}
