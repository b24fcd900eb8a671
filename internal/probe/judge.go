package probe

import (
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Accuracy is one workload of the fingerprint judged against the policy,
// as the lab judges a limiter: against the ideal, the sliding window log
// at the policy (a bucket of capacity C refilled at R judged as C per
// C/R), on the same requests, following what the target decided (judge
// says how). Ideal is what the log admits of the same requests on its own,
// each decided at the end of its interval.
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
	// interval, so a ratio over 1 is more than the policy allows, surely.
	MaxWindowRatio float64 `json:"max_window_ratio"`
}

// The fingerprint's parts and the lab's workloads they stand for.
var workloadOf = []struct{ part, workload string }{
	{"paced", "uniform"},
	{"burst", "bursty"},
	{"edge", "boundary-attack"},
	{"anchored", "anchored-attack"},
}

// judgeFingerprint judges each part of the fingerprint's answers (keys
// prefix+part) against limit.
func judgeFingerprint(answers []Answer, prefix string, limit limiters.Limit) []Accuracy {
	var out []Accuracy
	for _, w := range workloadOf {
		var obs []Observation
		for _, a := range answers {
			if a.Key == prefix+w.part && a.Decided() {
				obs = append(obs, a.Observation)
			}
		}
		if len(obs) > 0 {
			out = append(out, judge(w.workload, obs, limit))
		}
	}
	return out
}

// judge judges one key's decisions, obs, against limit: the ideal, the
// sliding log at the judged limit, follows what the target decided, as
// the fit's models do (fit.go), so that one tie, or two requests that
// overtook each other, costs one decision, not every later one. A false
// allow is an admission the log refuses at every instant of its interval
// (the key had N admitted in the window before it, whenever it was
// decided), a false deny a refusal it admits at every instant.
func judge(workload string, obs []Observation, limit limiters.Limit) Accuracy {
	judged := limiters.Limit{N: limit.Quota(), Per: limit.Window()}
	ideal := Model{Algorithm: limiters.SlidingLog, Limit: judged}
	a := Accuracy{Workload: workload, Requests: len(obs)}
	follow(obs, ideal, func(o Observation, explained bool) {
		switch {
		case o.Admitted && !explained:
			a.FalseAllows++
		case !o.Admitted && !explained:
			a.FalseDenies++
		}
		if o.Admitted {
			a.Admitted++
		}
	})
	a.Ideal = mostAdmitted(ideal, obs) // the log's own decisions, each at its interval's end
	a.MaxWindowRatio = float64(mostInWindow(obs, judged.Per)) / float64(judged.N)
	return a
}

// mostInWindow is the most of obs admitted within any interval of length
// per, counting a request only when it was both sent and answered in it.
func mostInWindow(obs []Observation, per time.Duration) int {
	obs = slices.Clone(obs)
	slices.SortStableFunc(obs, func(a, b Observation) int { return a.Sent.Compare(b.Sent) })
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
