package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
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
type timingMode struct{}

func (timingMode) name() string { return ModeTiming }
func (timingMode) once() bool   { return false }

func (timingMode) steps(Config, []Subject) int { return 3 }

func (timingMode) measure(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	var timed []Subject
	var out []results.Run
	for _, s := range subjects {
		if s.inProcess() {
			timed = append(timed, s)
		}
	}
	if len(timed) > 0 {
		l.p.step(fmt.Sprintf("timing on %s, %d rounds", w.Name, l.c.TimingRounds), 3)
		runs, err := timingRuns(ctx, timed, w, l.c.Limit, l.c.TimingRounds, l.c.TimingSample)
		if err != nil {
			return nil, fmt.Errorf("harness: timing on %s: %w", w.Name, err)
		}
		out = runs
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
// results.Costs. Each subject keeps one limiter throughout, and a first
// round, not kept, fills it with the workload's keys.
func timingRuns(ctx context.Context, subjects []Subject, w *workloads.Workload, limit limiters.Limit, rounds int, sample time.Duration) ([]results.Run, error) {
	subjects = append(slices.Clone(subjects), Floor()) // the last is the floor
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
	out := make([]results.Run, len(subjects))
	for i, s := range subjects {
		out[i] = results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend,
			Workload: w.Name, Mode: ModeTiming, Goroutines: 1, Rounds: make([]results.Round, 0, rounds)}
	}
	take := func(i int) results.Sample {
		s, n := timeSample(ctx, ls[i], keys, w.Arrivals, &cursor[i], sample)
		out[i].Decisions += n
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
				b, a := before, after // copies: before is overwritten next
				out[i].Rounds = append(out[i].Rounds, results.Round{Sample: s, FloorBefore: &b, FloorAfter: &a})
				out[floor].Rounds = append(out[floor].Rounds, results.Round{Sample: after})
			}
			before = after
		}
	}
	for i := range out {
		out[i].ThroughputPerS = results.MedianOf(out[i].Rounds, func(r results.Round) float64 { return r.ThroughputPerS })
	}
	return out, nil
}

// timeSample sends seq to l from *at on, wrapping around, as fast as one
// goroutine can for d, and returns the sample (decisions per second, and
// quantiles of the time of a decision over batches of timingBatch) and how
// many it decided.
func timeSample(ctx context.Context, l limiters.Limiter, keys []string, seq []workloads.Arrival, at *int, d time.Duration) (results.Sample, int64) {
	var h hist
	var n int64
	i := *at
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
			return results.Sample{
				ThroughputPerS: float64(n) / t1.Sub(start).Seconds(),
				P50NS:          h.quantile(0.5) / timingBatch,
				P90NS:          h.quantile(0.9) / timingBatch,
			}, n
		}
	}
}
