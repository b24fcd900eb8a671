package gate

import (
	"slices"

	"github.com/ratelab/ratelab/results"
)

// Again is the plan that times again the cells of changes that regressed:
// their limiters on their workloads, in rounds drawn from another seed.
// A regression stands when it shows again (Confirmed): a run of the same
// two builds moved a p90 by 1.135× once in four here, and not the next
// run, while one build slower by its code is slower in every run.
func Again(p Plan, changes []ABChange) Plan {
	p.Limiters, p.Workloads = nil, nil
	for _, c := range changes {
		if c.Verdict != results.Regressed {
			continue
		}
		if !slices.Contains(p.Limiters, c.Limiter) {
			p.Limiters = append(p.Limiters, c.Limiter)
		}
		if !slices.Contains(p.Workloads, c.Workload) {
			p.Workloads = append(p.Workloads, c.Workload)
		}
	}
	p.Seed++
	return p
}

// Confirmed returns the regressions of first that again, the verdicts
// on the rounds timed again, holds as regressions too: the same metric
// of the same cell.
func Confirmed(first, again []ABChange) []ABChange {
	var out []ABChange
	for _, c := range first {
		if c.Verdict != results.Regressed {
			continue
		}
		if slices.ContainsFunc(again, func(a ABChange) bool {
			return a.Verdict == results.Regressed && a.Limiter == c.Limiter && a.Workload == c.Workload && a.Metric == c.Metric
		}) {
			out = append(out, c)
		}
	}
	return out
}
