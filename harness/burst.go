package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// burstMode asks each subject that decides at explicit times, once, what a
// new key gets through in one instant: three times the limit at the same
// nanosecond, one request at a time.
const burstModeName = "burst"

var _ = register(mode{
	Mode: results.Mode{
		Name:  burstModeName,
		About: "what a new key gets through in one instant, asking for three times the limit",
		Order: 35,
		Tables: []results.TableSpec{{
			Name:   "burst",
			Title:  "A new key's first burst: three times the limit in one instant",
			Note:   "A fresh key sends 3N requests at the same nanosecond, in simulated time; admitted is how many got through, × N that over the limit.",
			Header: []string{"limiter", "admitted", "× N"},
			Left:   1,
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, results.Count(r.Count(results.Admitted)), results.Fixed(r.Get(results.Admitted)/r.SettingFloat(results.JudgedN), 2)}
			},
		}},
		Gates: []results.Gate{{Metric: results.Admitted, Label: "admitted at once", Check: results.CheckExact}},
	},
	once:    true,
	steps:   func(c Config, subjects []Subject) int { return 1 },
	measure: measureBurst,
})

func measureBurst(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	l.p.step("a first burst of each limiter", 1)
	var out []results.Row
	at := time.Unix(1_800_000_000, 0)
	for _, s := range subjects {
		if s.NewAt == nil || !s.inProcess() || s.Floor || s.OwnLimits != "" {
			continue
		}
		d, stop, err := s.NewAt(l.c.Limit)
		if err != nil {
			return nil, fmt.Errorf("harness: %s: %w", s.Name, err)
		}
		n := 0
		for range 3 * l.c.Limit.N {
			if decideAt(d, "burst", at, 1).Allowed {
				n++
			}
		}
		stop()
		r := row(s, "", burstModeName)
		r.SetInt(results.JudgedN, l.c.Limit.N)
		r.Add(results.Admitted, results.UnitCount, float64(n))
		out = append(out, r)
	}
	return out, ctx.Err()
}
