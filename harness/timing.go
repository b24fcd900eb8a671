package harness

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// timingBatch is how many decisions one clock reading of a timing run
// spans. This machine's clock moves in steps of 10ns and reading it twice
// costs 20ns, five times the harness floor's whole decision (4ns) and half
// a limiter's: timed one by one, a limiter's p90 jumped by a third when
// the floor's moved one step. Over 256 decisions a step is 1% of the
// floor's time.
const timingBatch = 256

// timingMode measures what one decision of each subject in the process
// costs, one goroutine flat out, against the harness floor sampled just
// before and after it (timingRuns). A subject kept in a server is not
// timed: its decision is a round trip, which the real-time runs measure.
const timingModeName = "timing"

var timingMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:  timingModeName,
			About: "what one decision costs, one goroutine flat out, against the harness floor sampled just before and after it",
			Order: 40,
			Gates: []results.Gate{
				timingGate("time/decision × floor", func(c results.Cost) float64 { return c.Throughput }),
				timingGate("p50 × floor", func(c results.Cost) float64 { return c.P50 }),
				timingGate("p90 × floor", func(c results.Cost) float64 { return c.P90 }),
			},
		},
		Heading: "What one decision costs",
		Tables: []report.TableSpec{{
			Name:  "timing",
			Title: "Cost of one decision, one goroutine, against the harness floor",
			Note: "Every limiter takes its turn deciding as fast as one goroutine can for a short sample, the harness floor (a limiter that decides nothing) " +
				"sampled between each two, round after round, so that each of a limiter's samples can be divided by the floor's just before and after it: " +
				"the machine's speed at that moment cancels out. Decisions/s and the time of one decision (p50 and p90 over stretches of 256 decisions, " +
				"the clock being too coarse to time one) are medians over the rounds; × floor is the median over rounds of the limiter's time per decision " +
				"over the floor's: how many floor decisions one of its decisions costs.",
			Header: []string{"workload", "limiter", "decisions/s", "p50", "p90", "× floor", "rounds"},
			Left:   2,
			Keep:   func(r results.Row) bool { return r.Curve(results.Throughput) != nil },
			Cells: func(r results.Row) []string {
				row := []string{r.Workload, r.Limiter, report.Rate(r.Get(results.Throughput)),
					report.Nanos(r.Get(results.Latency + ".p50")), report.Nanos(r.Get(results.Latency + ".p90")),
					"", strconv.Itoa(len(r.Curve(results.Throughput).Y))}
				if c, ok := results.CostOf(r); ok {
					row[5] = report.Fixed(c.Throughput, 2)
				}
				return row
			},
		}},
	},
	steps:   func(Config, []Subject) int { return 3 },
	measure: measureTiming,
	flags: func(c *Config, fs *flag.FlagSet) {
		fs.IntVar(&c.TimingRounds, "timing-rounds", c.TimingRounds, "rounds of the timing runs (default 20, quick 5)")
		fs.DurationVar(&c.TimingSample, "timing-sample", c.TimingSample, "how long each limiter decides in each round of the timing runs (default 10ms)")
	},
}

// timingGate shows in compare how a cost of a limiter against the harness
// floor sampled around it moved, not gated: the two runs were made at
// different moments, and the floor cancels a machine's speed, not its
// kind.
func timingGate(label string, of func(results.Cost) float64) results.Gate {
	return results.Gate{Metric: results.Throughput, Label: label, Check: results.CheckCost, Digits: 2, Relative: true,
		Value: func(r results.Row) (float64, bool) {
			c, ok := results.CostOf(r)
			return of(c), ok
		}}
}

func measureTiming(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	var timed []Subject
	var out []results.Row
	for _, s := range subjects {
		if s.inProcess() {
			timed = append(timed, s)
		}
	}
	if len(timed) > 0 {
		l.p.step(fmt.Sprintf("timing on %s, %d rounds", w.Name, l.c.TimingRounds), 3)
		rows, err := timingRuns(ctx, timed, w, l.c.Limit, l.c.TimingRounds, l.c.TimingSample)
		if err != nil {
			return nil, fmt.Errorf("harness: timing on %s: %w", w.Name, err)
		}
		out = rows
	}
	for _, s := range subjects {
		if s.Remote != nil && !s.Floor && s.New != nil {
			out = append(out, skipped(s, w.Name, "", "not timed: the timing runs measure a decision in the process against the harness floor; "+
				"a decision on "+s.Remote.Server+" is a round trip, measured by the real-time runs"))
		}
	}
	return out, nil
}

// timingRuns measures what one decision of each subject costs on w,
// against the harness floor sampled just before and just after it. A sample is one goroutine deciding as fast as it can for
// sample; a round is every subject's sample in turn, a floor sample
// between each two (the first subject moving on by one each round).
//
// The sandwich is the point: a shared machine changes speed from one
// moment to the next (here by 1.6x, in spells of a fraction of a second to
// several seconds), and it slows a no-op less or more than a limiter, so a
// limiter's sample can only be divided by a floor's taken in the same
// spell. The two floor samples around it say whether it was: see
// results.CostOf. Each subject keeps one limiter throughout, and a first
// round, not kept, fills it with the workload's keys.
func timingRuns(ctx context.Context, subjects []Subject, w *workloads.Workload, limit limiters.Limit, rounds int, sample time.Duration) ([]results.Row, error) {
	subjects = append(slices.Clone(subjects), floorSubject()) // the last is the floor
	ls := make([]limiters.Limiter, len(subjects))
	for i, s := range subjects {
		l, stop, err := s.New(limit)
		if err != nil {
			return nil, err
		}
		defer stop()
		ls[i] = l
	}
	floor := len(subjects) - 1
	keys := keysOf(w)
	cursor := make([]int, len(subjects)) // where each subject is in w
	out := make([]results.Row, len(subjects))
	samples := make([]roundSamples, len(subjects))
	decisions := make([]int64, len(subjects))
	for i, s := range subjects {
		out[i] = row(s, w.Name, timingModeName)
		out[i].SetInt(results.Goroutines, 1)
	}
	take := func(i int) results.Sample {
		s, n := timeSample(ctx, ls[i], keys, w.Arrivals, &cursor[i], sample)
		decisions[i] += n
		return s
	}
	for r := -1; r < rounds; r++ { // round -1 fills the limiters
		runtime.GC() // the last round's garbage is not this one's to collect
		before := take(floor)
		for k := range floor {
			i := (k + max(r, 0)) % floor
			s := take(i)
			after := take(floor)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if r >= 0 {
				samples[i].add("", s)
				samples[i].add(results.FloorBefore, before)
				samples[i].add(results.FloorAfter, after)
				samples[floor].add("", after)
			}
			before = after
		}
	}
	for i := range out {
		out[i].Add(results.Decisions, results.UnitCount, float64(decisions[i]))
		for _, s := range samples[i] {
			out[i].AddSeries(s)
			if !strings.Contains(s.Name, "floor_") {
				out[i].Add(s.Name, s.Unit, median(s.Y))
			}
		}
	}
	return out, nil
}

// roundSamples are a timing row's samples, a series a figure: decisions a
// second, p50 and p90, the limiter's, and (under the prefixes
// results.FloorBefore and FloorAfter) the floor's around them.
type roundSamples []results.Series

func (rs *roundSamples) add(prefix string, s results.Sample) {
	for _, v := range []struct {
		name, unit string
		y          float64
	}{
		{results.Throughput, results.UnitPerS, s.ThroughputPerS},
		{results.Latency + ".p50", results.UnitNS, s.P50NS},
		{results.Latency + ".p90", results.UnitNS, s.P90NS},
	} {
		i := slices.IndexFunc(*rs, func(x results.Series) bool { return x.Name == prefix+v.name })
		if i < 0 {
			*rs = append(*rs, results.Series{Name: prefix + v.name, Unit: v.unit})
			i = len(*rs) - 1
		}
		(*rs)[i].Y = append((*rs)[i].Y, v.y)
	}
}

// median is the median of v, 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// timeSample sends seq to l from *at on, wrapping around, as fast as one
// goroutine can for d, and returns the sample (decisions per second, the
// process's CPU time a decision, and quantiles of the time of a decision
// over batches of timingBatch) and how many it decided.
func timeSample(ctx context.Context, l limiters.Limiter, keys []string, seq []workloads.Arrival, at *int, d time.Duration) (results.Sample, int64) {
	var h hist
	var n int64
	i := *at
	cpu := cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	t0 := start
	for {
		for range timingBatch {
			a := seq[i]
			l.AllowN(ctx, keys[a.User], int(a.N))
			if i++; i == len(seq) {
				i = 0
			}
		}
		n += timingBatch
		t1 := time.Now()
		h.record(int64(t1.Sub(t0))) // whole nanoseconds of the batch: a decision's to 1/256ns
		t0 = t1
		if !t1.Before(deadline) || ctx.Err() != nil {
			*at = i
			s := results.Sample{
				ThroughputPerS: float64(n) / t1.Sub(start).Seconds(),
				P50NS:          h.quantile(0.5) / timingBatch,
				P90NS:          h.quantile(0.9) / timingBatch,
			}
			if cpu > 0 {
				s.CPUNS = float64(cpuTime()-cpu) / float64(n)
			}
			return s, n
		}
	}
}
