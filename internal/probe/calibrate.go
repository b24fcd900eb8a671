package probe

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Calibration is how the probe came by the policy it judged against: given
// (--policy), declared in the target's fields, or measured.
type Calibration struct {
	From     string  `json:"from"` // "--policy", "RateLimit-Policy", "X-RateLimit-Limit" or "measured"
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	// What was measured: the quota a fresh key got back to back, the
	// rate it was admitted at once spent, and whether those admissions
	// came in clumps (a window turning or expiring) or one by one (a
	// bucket refilling).
	Quota    int     `json:"quota,omitempty"`
	Rate     float64 `json:"rate,omitempty"`
	Windowed bool    `json:"windowed,omitempty"`
}

// The calibration's bounds: the most it sends back to back looking for
// the quota (and a share of --max-requests), and how long it paces a
// spent key looking for the rate.
const (
	calibrationBurst  = 1000
	calibrationPaced  = 6 * time.Second
	calibrationMaxPps = 200
)

// CalibrationBudget is the most requests and about the longest time the
// calibration takes, for a probe with no policy declared: a quarter of
// --max-requests back to back, and a quarter in each of at most two paced
// runs.
func (c Config) CalibrationBudget() (int, time.Duration) {
	return 1 + min(calibrationBurst, c.MaxRequests/4) + 2*c.MaxRequests/4, 2*calibrationPaced + time.Second
}

// pacedMost is the fastest the calibration paces a spent key: half of
// --max-rate, and a quarter of --max-requests over the paced run.
func (c Config) pacedMost() int {
	return max(min(calibrationMaxPps, c.MaxRate/2, c.MaxRequests/4/int(calibrationPaced/time.Second)), 1)
}

// calibrate finds the policy of a target that declares none to the probe:
// from its fields on a fresh key's first answer (RateLimit-Policy, else
// X-RateLimit-Limit over the window X-RateLimit-Reset gives), else by
// measuring: requests back to back on the key, in growing rounds, until
// one is refused (the quota: all the rounds admitted), then a spent key paced above the rate for
// six seconds (the rate, and whether it comes back in clumps). It returns
// the answers it got, which count against the probe's budget.
func calibrate(ctx context.Context, c Config, key string, say func(string, ...any)) (limiters.Limit, Calibration, []Answer, error) {
	start := time.Now()
	cal := Calibration{}
	var all []Answer
	send := func(plan []Request) ([]Answer, error) {
		got, err := Send(ctx, c.Target, plan, time.Time{}, c.Timeout)
		all = append(all, got...)
		cal.Requests, cal.Seconds = len(all), time.Since(start).Seconds()
		return got, err
	}
	first, err := send([]Request{{Key: key}})
	if err != nil {
		return limiters.Limit{}, cal, all, err
	}
	if !first[0].Decided() {
		return limiters.Limit{}, cal, all, fmt.Errorf("%w: the first request: %s", ErrNotDeciding, firstFailure(first))
	}
	if l, from, ok := declared(first[0].Header, first[0].Received); ok {
		cal.From = from
		say("calibration: the target declares %s in %s", l, from)
		return l, cal, all, nil
	}
	cal.From = "measured"

	admitted, err := quotaOf(first[0], send, min(calibrationBurst, c.MaxRequests/4))
	if err != nil {
		return limiters.Limit{}, cal, all, err
	}
	cal.Quota = admitted
	say("calibration: a fresh key got %d back to back; now the rate, for %v", admitted, calibrationPaced)
	paced, err := c.paceSpent(key, admitted, send)
	if err != nil {
		return limiters.Limit{}, cal, all, err
	}
	l, cal, err := fromPaced(cal, paced, first[0].Sent)
	return l, cal, all, err
}

// fromPaced reads the policy off the answers to a spent key paced above
// its rate: in clumps, a window of the quota, the clumps a window apart
// (or the first a window after the burst); one by one, a bucket of the
// quota refilled at the rate the admissions came.
func fromPaced(cal Calibration, paced []Answer, burstStart time.Time) (limiters.Limit, Calibration, error) {
	var admits []time.Time
	for _, a := range paced {
		if a.Admitted {
			admits = append(admits, a.Sent)
		}
	}
	if len(admits) < 2 {
		return limiters.Limit{}, cal, fmt.Errorf("calibration: a quota of %d at once, then %d admitted in the next %v: the window or the refill is longer than the probe can settle within its budget; give the policy with --policy (as in %d/1h)",
			cal.Quota, len(admits), calibrationPaced, cal.Quota)
	}
	cal.Rate = float64(len(admits)-1) / admits[len(admits)-1].Sub(admits[0]).Seconds()
	if clumps := clumpsOf(paced, cal.Rate, max(3, cal.Quota/2)); len(clumps) > 0 {
		cal.Windowed = true
		w := clumps[0].Sub(burstStart)
		if len(clumps) > 1 {
			var gaps []time.Duration
			for i := 1; i < len(clumps); i++ {
				gaps = append(gaps, clumps[i].Sub(clumps[i-1]))
			}
			slices.Sort(gaps)
			w = gaps[len(gaps)/2]
		}
		return limiters.Limit{N: cal.Quota, Per: roundWindow(w)}, cal, nil
	}
	unit := time.Second
	if cal.Rate < 1 {
		unit = time.Minute
	}
	n := max(int(math.Round(cal.Rate*unit.Seconds())), 1)
	return limiters.Limit{N: n, Per: unit, Burst: cal.Quota}, cal, nil
}

// clumpsOf returns when each clump of admissions in paced began: a run of
// admissions more than a bucket refilled at rate could have admitted, by
// at least excess, counting what it refilled over the run and over the
// silence before it (a sender that stalls lets a bucket fill, and then
// sends a run at once).
func clumpsOf(paced []Answer, rate float64, excess int) []time.Time {
	var out []time.Time
	for i := 0; i < len(paced); {
		if !paced[i].Admitted {
			i++
			continue
		}
		j := i
		for j+1 < len(paced) && paced[j+1].Admitted {
			j++
		}
		span := paced[j].Sent.Sub(paced[i].Sent)
		if i > 0 {
			span += paced[i].Sent.Sub(paced[i-1].Sent)
		}
		if float64(j-i+1) > 1+rate*span.Seconds()+float64(excess) {
			out = append(out, paced[i].Sent)
		}
		i = j + 1
	}
	return out
}

// roundWindow rounds a measured window to what a configuration would
// say: whole seconds from 10s, tenths of one from 1s, hundredths below.
func roundWindow(w time.Duration) time.Duration {
	step := 10 * time.Millisecond
	switch {
	case w >= 10*time.Second:
		step = time.Second
	case w >= time.Second:
		step = 100 * time.Millisecond
	}
	return max(w.Round(step), step)
}

// quotaOf sends rounds of 8, 16, 32, ... requests back to back on the key
// of first (a fresh key's first answer), at most most in all, until a
// round has a refusal, and returns every admission: a round's requests are
// in flight together and decided in any order.
func quotaOf(first Answer, send func([]Request) ([]Answer, error), most int) (int, error) {
	admitted, refused := 0, !first.Admitted
	if first.Admitted {
		admitted = 1
	}
	for round, sent := 8, 1; !refused && sent < most; round *= 2 {
		n := min(round, most-sent)
		plan := make([]Request, n)
		for i := range plan {
			plan[i] = Request{Key: first.Key, At: time.Duration(i) * 100 * time.Microsecond}
		}
		got, err := send(plan)
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
	case !refused:
		return 0, fmt.Errorf("calibration: %d requests back to back on one key were all admitted: no limit found within a quarter of --max-requests; give the policy with --policy", admitted)
	case admitted == 0:
		return 0, fmt.Errorf("calibration: a fresh key's first request was refused: the target refuses everything, or keys users otherwise than --key says")
	}
	return admitted, nil
}

// paceSpent paces key, just spent of its quota, above the rate for
// calibrationPaced, with jitter; once more four times faster if nearly
// all were admitted, as --max-rate and --max-requests allow.
func (c Config) paceSpent(key string, quota int, send func([]Request) ([]Answer, error)) ([]Answer, error) {
	pps := min(c.pacedMost(), max(3*quota, 20))
	for try := 0; ; try++ {
		rng := rand.New(rand.NewPCG(c.Seed, uint64(try)+1))
		var plan []Request
		gap := float64(time.Second) / float64(pps)
		for t := time.Duration(0); t < calibrationPaced; t += time.Duration(gap * (0.5 + rng.Float64())) {
			plan = append(plan, Request{Key: key, At: t})
		}
		got, err := send(plan)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, a := range got {
			if a.Admitted {
				n++
			}
		}
		if n < len(got)*9/10 {
			return got, nil
		}
		if try == 1 || pps == c.pacedMost() {
			return nil, fmt.Errorf("calibration: a quota of %d at once, and %d of %d admitted paced at %d a second once spent: the rate is above what --max-rate and --max-requests let the probe send; give the policy with --policy", quota, n, len(got), pps)
		}
		pps = min(4*pps, c.pacedMost())
	}
}

// window is, for a policy measured as a bucket, the same quota as a
// window of its length (quota over rate), which the fit tries beside it:
// a sliding counter, once spent, lets requests through one by one as a
// bucket does.
func (cal Calibration) window() []limiters.Limit {
	if cal.From != "measured" || cal.Windowed || cal.Rate <= 0 || cal.Quota < 1 {
		return nil
	}
	return []limiters.Limit{{N: cal.Quota, Per: roundWindow(time.Duration(float64(cal.Quota) / cal.Rate * float64(time.Second)))}}
}
