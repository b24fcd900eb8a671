package probe

import (
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Accuracy is one workload of the fingerprint judged as the lab judges a
// limiter: against the ideal of the judged model's policy, on the same
// requests, following what the target decided (judge says how). For a
// window algorithm the ideal is the sliding window log at N per W; for a
// bucket, the bucket itself, whose promise is at most C + R·t in any
// interval t (a window of C per C/R, the lab's view, is shown beside it).
// Ideal is what the ideal admits of the same requests on its own, each
// decided at the end of its interval.
type Accuracy struct {
	Workload    string `json:"workload"`
	Requests    int    `json:"requests"`
	Admitted    int    `json:"admitted"`
	Ideal       int    `json:"ideal_admitted"`
	FalseAllows int    `json:"false_allows"`
	FalseDenies int    `json:"false_denies"`
	// MaxWindowRatio is the most admitted in any interval of the judged
	// window's length, over the judged N (the lab's most_in_window): a
	// request counts only if both its send and its answer fall in the
	// interval, so a ratio over 1 is more than N per W, surely. For a
	// bucket it is the window view, C per C/R, which a bucket keeping its
	// promise exceeds.
	MaxWindowRatio float64 `json:"max_window_ratio"`
	// MostOverPromise is, for a bucket, the most admitted in any interval
	// over what the bucket promises in it, C + R·t: over 1 is surely more
	// than the bucket allows.
	MostOverPromise float64 `json:"most_over_promise,omitempty"`
	// Note says where the attack was not where the fingerprint planned
	// it: sent again at the named window's edges, or not judged there.
	Note string `json:"note,omitempty"`
}

// The fingerprint's parts and the lab's workloads they stand for.
var workloadOf = []struct{ part, workload string }{
	{"paced", "uniform"},
	{"burst", "bursty"},
	{"edge", "boundary-attack"},
	{"anchored", "anchored-attack"},
}

// judgeFingerprint judges each part of the fingerprint's answers (keys
// prefix+part) against m.
func judgeFingerprint(answers []answer, prefix string, m model) []Accuracy {
	var out []Accuracy
	for _, w := range workloadOf {
		var obs []observation
		for _, a := range answers {
			if a.Key == prefix+w.part && a.Decided() {
				obs = append(obs, a.observation)
			}
		}
		if len(obs) > 0 {
			out = append(out, judge(w.workload, obs, m))
		}
	}
	return out
}

// ideal is the model m is judged against: the sliding log at N per W
// for a window algorithm, the exact bucket for a bucket.
func ideal(m model) model {
	if m.Algorithm.IsBucket() {
		return model{Algorithm: limiters.GCRA, Limit: m.Limit}
	}
	return model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: m.quota(), Per: m.Limit.Window()}}
}

// judge judges one key's decisions, obs, against m's ideal, which
// follows what the target decided, as the fit's models do (fit.go), so
// that one tie, or two requests that overtook each other, costs one
// decision, not every later one. A false allow is an admission the ideal
// refuses at every instant of its interval (for the log, the key had N
// admitted in the window before it, whenever it was decided), a false
// deny a refusal it admits at every instant.
func judge(workload string, obs []observation, m model) Accuracy {
	id := ideal(m)
	a := Accuracy{Workload: workload, Requests: len(obs)}
	follow(byKey(obs), id, func(o observation, explained bool) bool {
		switch {
		case o.Admitted && !explained:
			a.FalseAllows++
		case !o.Admitted && !explained:
			a.FalseDenies++
		}
		if o.Admitted {
			a.Admitted++
		}
		return true
	})
	a.Ideal = mostAdmitted(id, obs)
	w := m.Limit.Window()
	a.MaxWindowRatio = float64(mostInWindow(obs, w)) / float64(m.quota())
	if m.Algorithm.IsBucket() {
		a.MostOverPromise = overPromise(obs, m.quota(), m.Limit.Interval())
	}
	return a
}

// overPromise is the most admitted of obs in any interval, over what a
// bucket of capacity c refilled every t promises in it, c + (its length)/t:
// counting the admissions sent at or after one's send and answered by
// another's answer, against the length between the two and a millisecond
// (a limiter that keeps time in milliseconds, as nginx does, sees an
// interval up to one shorter or longer than it was: nginx at 10r/s with
// no burst admitted 4 in 299.9ms, once in five probes).
func overPromise(obs []observation, c int, t time.Duration) float64 {
	var ad []observation
	for _, o := range obs {
		if o.Admitted {
			ad = append(ad, o)
		}
	}
	slices.SortStableFunc(ad, func(a, b observation) int { return a.Sent.Compare(b.Sent) })
	most := 0.0
	for i, first := range ad {
		for _, last := range ad[i:] {
			n := 0
			for _, o := range ad[i:] {
				if !o.Sent.Before(first.Sent) && !o.Received.After(last.Received) {
					n++
				}
			}
			promised := float64(c) + float64(max(last.Received.Sub(first.Sent), 0)+time.Millisecond)/float64(t)
			most = max(most, float64(n)/promised)
		}
	}
	return most
}

// mostInWindow is the most of obs admitted within any interval of length
// per, counting a request only when it was both sent and answered in it.
func mostInWindow(obs []observation, per time.Duration) int {
	obs = slices.Clone(obs)
	slices.SortStableFunc(obs, func(a, b observation) int { return a.Sent.Compare(b.Sent) })
	best := 0
	for i, o := range obs {
		if !o.Admitted {
			continue
		}
		end, n := o.Sent.Add(per), 0
		for _, p := range obs[i:] {
			if !p.Sent.Before(end) {
				break
			}
			if p.Admitted && p.Received.Before(end) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}
