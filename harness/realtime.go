package harness

import (
	"context"
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// realTimeMode runs each subject, and the harness floor, on the real
// clock: unpaced, as fast as each of a growing number of goroutines can
// send (throughput, contention); then paced at an offered rate, open loop,
// several times over (latency from each request's intended send time). A
// subject kept in a server runs its own shorter, slower runs. Its tables
// show too the accuracy the simulated mode measured on the real clock.
const realTimeModeName = "realtime"

var realtimeMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:   realTimeModeName,
			About:  "on the real clock: decisions a second and lock contention as goroutines grow, and latency at a steady rate",
			Order:  20,
			Scored: true,
			Gates:  accuracyGates(results.CheckShown),
		},
		Heading: "Speed on the real clock",
		Tables: []report.TableSpec{{
			Name:  "accuracy-realtime",
			Title: "Accuracy against the ideal, in real time, for limiters that take no explicit time",
			Note: "The workload is replayed by one sender on the real clock with time compressed (the limit's window alike), " +
				"and the ideal is run on the times the requests were really sent. A workload too dense to send on time at the most compression is compressed less; " +
				"time: how many times faster than the workload's clock it was sent; send lag: how late requests went against their compressed schedule. Not reproducible to the request: the clock is real. " +
				"The quick lab replays each workload's first 8s.",
			Header: append(slices.Clone(accuracyHeader), "time, send lag p99"), Left: 3,
			Keep: func(r results.Row) bool { return r.Has(results.MostInWindow) },
			Cells: func(r results.Row) []string {
				lag := ""
				if v, ok := r.Value(sendLagP99); ok {
					lag = "\n" + report.Nanos(v)
				}
				return append(accuracyCells(r), strconv.FormatFloat(1/r.Get(results.TimeScale), 'f', 0, 64)+"× faster"+lag)
			},
			Last: report.Twins,
		}, {
			Name:  "latency",
			Title: "Latency of a decision, from its intended send time, paced (open loop)",
			Note: "Senders send the workload's requests at a fixed total rate; each request's latency runs from when it was due, so a stall counts against every request it delays. " +
				"The limit's window is scaled so that each key is asked for the same multiple of its limit as in the workload; " +
				"a run spans only a window or two of it, so buckets, which start full, admit more than they would in a long one. " +
				"Kept pace: the share of the offered rate sent; late: decided more than 1ms after due; admitted: the share admitted. " +
				"On a shared machine the tail beyond p99 is mostly the scheduler; the harness floor row is a limiter that decides nothing. " +
				"Each run is repeated: every quantile is the median of the runs', and under p99 are the runs' lowest and highest, so that one stall of the machine decides nothing.",
			Header: []string{"workload", "limiter", "offered", "p50", "p90", "p99 (of runs)", "p99.9, max", "kept pace", "late", "admitted"},
			Left:   2,
			Keep:   func(r results.Row) bool { return r.SettingFloat(results.Offered) > 0 && r.Has(results.Latency+".p50") },
			Cells: func(r results.Row) []string {
				l, _ := r.LatencyOf(results.Latency)
				kept := ""
				if v, ok := r.Value(achieved); ok {
					kept = fmt.Sprintf("%.0f%%", 100*min(v, 1))
				}
				return []string{
					r.Workload, r.Limiter, fmt.Sprintf("%s by %d", report.Rate(r.SettingFloat(results.Offered)), r.SettingInt(results.Goroutines)),
					report.Nanos(l.P50), report.Nanos(l.P90), strings.TrimSpace(report.Nanos(l.P99) + "\n" + spread(r.Curve(runP99))), report.Nanos(l.P999) + "\n" + report.Nanos(l.Max), kept,
					report.Percent(r, late), report.Percent(r, admitted),
				}
			},
		},
			perGoroutines("throughput", "Throughput under overload: decisions per second, unpaced",
				"Every sender sends the workload's requests as fast as it can, so keys are asked far beyond their limit and most requests are denied "+
					"(admitted: the share admitted with one goroutine). A column per number of goroutines; on 2 cores, more than 2 show what contention costs. "+
					"The harness floor is a limiter that decides nothing.",
				func(r results.Row) string { return report.Rate(r.Get(results.Throughput)) }, true),
			perGoroutines("contention", "Lock contention: time blocked on locks per decision, unpaced",
				"Time goroutines spent parked on a sync.Mutex, a sync.RWMutex or a lock inside the runtime, as the runtime counts it "+
					"(/sync/mutex/wait/total, sampled), divided by decisions; for a limiter in the process, the median of its run's rounds "+
					"(3 to 5, of 25ms or more; where they spread more than fourfold, more, up to 9, but in a quick lab), under it the rounds' range but their lowest and highest (all of them, under five). "+
					"Spinning before parking is not counted. "+
					"The harness floor row is what the runtime and the harness add with no limiter at all.",
				lockWaitCell, false),
		},
		Charts: func(f *results.File, rows []results.Row) []report.Figure {
			return slices.Concat(latencyFigures(rows), scalingFigures(rows, f.Meta.GOMAXPROCS), []report.Figure{contentionFigure(rows, f.Meta.GOMAXPROCS)})
		},
	},
	steps: func(c Config, subjects []Subject) int {
		return 2 * (len(subjects) + 1) * len(c.realTimeRuns())
	},
	measure: measureRealTime,
	flags: func(c *Config, fs *flag.FlagSet) {
		fs.Var((*counts)(&c.Goroutines), "goroutines", "comma-separated goroutine counts the unpaced real-time runs sweep (default 1,2,8,64, quick 1,2,8)")
		fs.DurationVar(&c.RealTime, "realtime", c.RealTime, "how long each unpaced real-time run lasts (default 250ms, quick 25ms)")
		fs.IntVar(&c.LatencyGoroutines, "latency-goroutines", c.LatencyGoroutines, "the senders of the paced real-time runs (default 1)")
		fs.Float64Var(&c.OfferedRate, "rate", c.OfferedRate, "the total offered rate of the paced runs, per second (default 200000)")
		fs.DurationVar(&c.LatencyTime, "latency-time", c.LatencyTime, "how long each paced run lasts (default 150ms, quick 25ms)")
		fs.IntVar(&c.LatencyRuns, "latency-runs", c.LatencyRuns, "how many times each paced run is repeated: the latency is their median (default 3)")
	},
}

// The metrics and series of the real-time rows, beyond results' own.
const (
	// admitted is the share of decisions that admitted; achieved, for a
	// paced run, the share of the offered rate sent; late the share of
	// requests decided more than a millisecond after their intended time.
	admitted = "admitted_fraction"
	achieved = "achieved_fraction"
	late     = "late_fraction"
	// sendLagP99 is how late a replay in real time sent its requests
	// against their compressed schedule, at p99.
	sendLagP99 = "send_lag.p99"
	// runP99 are a repeated paced run's p99, one a repetition.
	runP99 = "run_p99"
)

// perGoroutines is a table of the unpaced real-time rows, a row per
// workload and limiter, a column per goroutine count.
func perGoroutines(name, title, note string, cell func(results.Row) string, withAdmitted bool) report.TableSpec {
	t := report.TableSpec{
		Name: name, Title: title, Note: note, Header: []string{"workload", "limiter"}, Left: 2,
		Keep:  func(r results.Row) bool { return r.Setting(results.Offered) == "" && !r.Has(results.MostInWindow) },
		Cells: func(r results.Row) []string { return []string{r.Workload, r.Limiter} },
		Pivot: &report.Pivot{By: results.Goroutines, Cell: cell, Head: func(g int) string {
			if g == 1 {
				return "1 goroutine"
			}
			return fmt.Sprintf("%d goroutines", g)
		}},
	}
	if withAdmitted {
		t.Pivot.TailHeader = []string{"admitted"}
		t.Pivot.Tail = func(first results.Row) []string { return []string{report.Percent(first, admitted)} }
	}
	return t
}

// spread is the lowest and the highest of a paced run's p99s, "" for
// fewer than two.
func spread(p99s *results.Series) string {
	if p99s == nil || len(p99s.Y) < 2 {
		return ""
	}
	return report.Nanos(slices.Min(p99s.Y)) + "–" + report.Nanos(slices.Max(p99s.Y))
}

func measureRealTime(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	var out []results.Row
	for _, s := range append(slices.Clone(subjects), floorSubject()) {
		if s.New == nil {
			continue
		}
		runs, note := l.c.realTimeRuns(), func(realTimeRun) string { return "" }
		if s.Remote != nil {
			runs, note = s.Remote.RealTime, s.Remote.Note
		}
		for _, rt := range runs {
			if why := s.failed(); why != "" {
				out = append(out, skipped(s, w.Name, "", why))
				break
			}
			l.p.step(fmt.Sprintf("%s on %s in real time, %s", s.Name, w.Name, rt.describe()), 2)
			limit := l.c.Limit
			if rt.Rate > 0 {
				limit = pacedLimit(limit, w, rt.Rate)
			}
			r, err := l.realTime(ctx, s, w, limit, rt)
			if err != nil {
				return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, w.Name, err)
			}
			r.Note = note(rt)
			if why := s.failed(); why != "" {
				r = skipped(s, w.Name, "", why) // its server failed during the run: its numbers are not the server's
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// realTime runs s on w as rt says, a paced run l.c.LatencyRuns times over
// and an unpaced one in the process in rounds (contentionRounds), each on a
// limiter of its own.
func (l *lab) realTime(ctx context.Context, s Subject, w *workloads.Workload, limit limiters.Limit, rt realTimeRun) (results.Row, error) {
	repeat, round, widest := 1, rt, 0
	switch {
	case rt.Rate > 0 && (s.Remote == nil || !l.c.Quick):
		// The quick lab paces a limiter kept in a server once: its
		// latency is a round trip's, which a repeat does not steady, and
		// the repeats were a tenth of the quick lab's time.
		repeat = l.c.LatencyRuns
	case rt.Rate == 0 && s.Remote == nil:
		// A limiter kept in a server is run once: its wait is its
		// client's, which the contention chart leaves out.
		repeat, round = contentionRounds(rt)
		// Rounds that spread wide get more, up to widestRounds, in a
		// full lab: the quick lab, a first look (and the tests' lab, on
		// make test's clock), keeps its three.
		if !l.c.Quick {
			widest = widestRounds
		}
	}
	var each []realTimeOutcome
	for len(each) < repeat || len(each) < widest && wideRounds(each) {
		lim, stop, err := s.New(limit)
		if err != nil {
			return results.Row{}, err
		}
		res, err := runRealTime(ctx, w, lim, round)
		stop()
		if err != nil {
			return results.Row{}, err
		}
		each = append(each, res)
	}
	return realTimeResult(row(s, w.Name, realTimeModeName), rt, each), nil
}

// realTimeResult is base with what the runs of rt measured, pooled: their
// decisions, time and admissions summed; the latency the median over the
// runs of each of their percentiles, each run's kept beside it (the
// spread), and the curve that of all their requests together; the lock
// wait as setLockWait records it.
func realTimeResult(base results.Row, rt realTimeRun, each []realTimeOutcome) results.Row {
	var all realTimeOutcome
	var lateSum float64
	for i := range each {
		all.Decisions += each[i].Decisions
		all.Admitted += each[i].Admitted
		all.Elapsed += each[i].Elapsed
		all.Latency.merge(&each[i].Latency)
		lateSum += each[i].Late * float64(each[i].Decisions)
	}
	r := base
	r.SetInt(results.Goroutines, rt.Goroutines)
	if rt.Rate > 0 {
		r.SetFloat(results.Offered, rt.Rate)
	}
	n := float64(max(all.Decisions, 1))
	r.Add(results.Decisions, results.UnitCount, float64(all.Decisions))
	q := all.Latency.latency()
	if len(each) > 1 {
		runs := make([]results.Quantiles, len(each))
		p99s := results.Series{Name: runP99, Unit: results.UnitNS}
		for i := range each {
			runs[i] = each[i].Latency.latency()
			p99s.Y = append(p99s.Y, runs[i].P99)
		}
		q = results.MedianQuantiles(runs)
		r.AddSeries(p99s)
	}
	r.SetLatency(results.Latency, q)
	r.AddSeries(all.Latency.curve())
	r.Add(results.Throughput, results.UnitPerS, all.Throughput())
	setLockWait(&r, rt, each)
	r.Add(admitted, results.UnitFraction, float64(all.Admitted)/n)
	if rt.Rate > 0 {
		r.Add(achieved, results.UnitFraction, all.Throughput()/rt.Rate)
		r.Add(late, results.UnitFraction, lateSum/n)
	}
	return r
}

// realTimeRuns are the real-time runs of one limiter on one workload: the
// unpaced sweep, then the paced run for latency.
func (c Config) realTimeRuns() []realTimeRun {
	var out []realTimeRun
	for _, g := range c.Goroutines {
		out = append(out, realTimeRun{Goroutines: g, Duration: c.RealTime})
	}
	return append(out, realTimeRun{Goroutines: c.LatencyGoroutines, Rate: c.OfferedRate, Duration: c.LatencyTime})
}

// pacedLimit is the limit a paced run gives its limiter: the window scaled
// by the workload's own rate over the offered rate, so that each key is
// asked for the same multiple of its limit as in the workload.
func pacedLimit(limit limiters.Limit, w *workloads.Workload, offered float64) limiters.Limit {
	native := float64(len(w.Arrivals)) / w.Params.Duration.Seconds()
	length := time.Duration(float64(limit.Per) * native / offered)
	return limiters.Limit{N: limit.N, Per: max(length, time.Microsecond)}
}

// realTimeRun says how a real-time run sends a workload.
type realTimeRun struct {
	// Goroutines is how many senders there are. Each sends the workload's
	// whole sequence of requests (keys and costs, in order), sender g
	// starting g/Goroutines of the way in and wrapping around, so that the
	// mix of keys is the workload's whatever the number of senders.
	Goroutines int
	// Rate is the total offered rate per second, shared evenly by the
	// senders (open loop: each request has an intended send time fixed in
	// advance, and its latency is measured from that time, so a stall
	// shows in every request it delays); zero means unpaced, each sender
	// sending as fast as it can. At most 1e8 per second per sender.
	Rate float64
	// Duration is how long the run sends.
	Duration time.Duration
}

// Validate reports whether cfg can run.
func (cfg realTimeRun) Validate() error {
	if cfg.Goroutines < 1 || cfg.Duration <= 0 {
		return fmt.Errorf("harness: a real-time run needs at least one goroutine and a positive duration, got %d and %v", cfg.Goroutines, cfg.Duration)
	}
	if math.IsNaN(cfg.Rate) || cfg.Rate < 0 || cfg.Rate > 1e8*float64(cfg.Goroutines) {
		return fmt.Errorf("harness: the offered rate must be between 0 and 1e8 per second per goroutine, got %v for %d", cfg.Rate, cfg.Goroutines)
	}
	return nil
}

// realTimeOutcome is what a real-time run measured.
type realTimeOutcome struct {
	Decisions, Admitted int64
	Elapsed             time.Duration
	// Latency is, for a paced run, from each request's intended send time
	// to its decision; for an unpaced one, the time of one decision,
	// sampled on one request in 16 (timing every call would cost as much
	// as a decision).
	Latency hist
	// LockWait is the time goroutines spent blocked on a sync.Mutex, a
	// sync.RWMutex or a lock inside the runtime during the run, summed
	// over goroutines, as the runtime counts it
	// (/sync/mutex/wait/total:seconds, sampled): time parked, not spinning.
	LockWait time.Duration
	// Late is, for a paced run, the fraction of requests decided more than
	// a millisecond after their intended time.
	Late float64
}

// Throughput is decisions per second.
func (r realTimeOutcome) Throughput() float64 {
	return float64(r.Decisions) / r.Elapsed.Seconds()
}

// runRealTime sends w to l as cfg says and measures it. ctx ending stops
// the run early.
func runRealTime(ctx context.Context, w *workloads.Workload, l limiters.Limiter, cfg realTimeRun) (realTimeOutcome, error) {
	if err := cfg.Validate(); err != nil {
		return realTimeOutcome{}, err
	}
	if len(w.Arrivals) == 0 {
		return realTimeOutcome{}, fmt.Errorf("harness: workload %s has no requests", w.Name)
	}
	keys := keysOf(w)
	runtime.GC() // do not let the setup's garbage be collected on the clock
	type out struct {
		n, admitted, late int64
		h                 hist
	}
	outs := make([]out, cfg.Goroutines)
	var wg sync.WaitGroup
	start := time.Now().Add(time.Millisecond)
	deadline := start.Add(cfg.Duration)
	waitBefore := lockWait()
	for g := range cfg.Goroutines {
		wg.Go(func() {
			o := &outs[g]
			from := g * len(w.Arrivals) / cfg.Goroutines
			if cfg.Rate > 0 {
				o.n, o.admitted, o.late = sendPaced(ctx, l, keys, w.Arrivals, from, start, deadline, cfg, g, &o.h)
				return
			}
			o.n, o.admitted = sendUnpaced(ctx, l, keys, w.Arrivals, from, start, deadline, &o.h)
		})
	}
	wg.Wait()
	r := realTimeOutcome{Elapsed: time.Since(start), LockWait: lockWait() - waitBefore}
	late := int64(0)
	for i := range outs {
		r.Decisions += outs[i].n
		r.Admitted += outs[i].admitted
		r.Latency.merge(&outs[i].h)
		late += outs[i].late
	}
	if r.Decisions > 0 {
		r.Late = float64(late) / float64(r.Decisions)
	}
	return r, ctx.Err()
}

func sendPaced(ctx context.Context, l limiters.Limiter, keys []string, seq []workloads.Arrival, from int, start, deadline time.Time, cfg realTimeRun, g int, h *hist) (n, admitted, late int64) {
	interval := float64(cfg.Goroutines) / cfg.Rate * 1e9 // ns, not rounded: no drift
	offset := interval * float64(g) / float64(cfg.Goroutines)
	yield := cfg.Goroutines > runtime.GOMAXPROCS(0)
	for i := 0; ; i++ {
		at := start.Add(time.Duration(offset + float64(i)*interval))
		if !at.Before(deadline) || waitUntil(ctx, at, yield) != nil {
			return n, admitted, late
		}
		a := seq[(from+i)%len(seq)]
		if d, _ := l.AllowN(ctx, keys[a.User], int(a.N)); d.Allowed {
			admitted++
		}
		lat := time.Since(at)
		h.record(int64(lat))
		if lat > time.Millisecond {
			late++
		}
		n++
	}
}

func sendUnpaced(ctx context.Context, l limiters.Limiter, keys []string, seq []workloads.Arrival, from int, start, deadline time.Time, h *hist) (n, admitted int64) {
	for time.Now().Before(start) {
	}
	for i := 0; ; i++ {
		if i%64 == 0 && (!time.Now().Before(deadline) || ctx.Err() != nil) {
			return n, admitted
		}
		a := seq[(from+i)%len(seq)]
		var d limiters.Decision
		if i%16 == 0 {
			t0 := time.Now()
			d, _ = l.AllowN(ctx, keys[a.User], int(a.N))
			h.record(int64(time.Since(t0)))
		} else {
			d, _ = l.AllowN(ctx, keys[a.User], int(a.N))
		}
		if d.Allowed {
			admitted++
		}
		n++
	}
}

// waitUntil returns at time at, or with ctx's error when ctx ends first: it
// sleeps until a millisecond before at (a timer wakes up to a millisecond
// late on a busy machine), then spins, yielding the processor if yield
// (when senders outnumber processors).
func waitUntil(ctx context.Context, at time.Time, yield bool) error {
	for {
		wait := time.Until(at)
		switch {
		case wait <= 0:
			return ctx.Err()
		case wait > 2*time.Millisecond:
			t := time.NewTimer(wait - time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		case yield:
			runtime.Gosched()
		}
	}
}

// describe names a real-time configuration for progress lines.
func (c realTimeRun) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d goroutine", c.Goroutines)
	if c.Goroutines != 1 {
		b.WriteString("s")
	}
	if c.Rate > 0 {
		fmt.Fprintf(&b, " at %.0f/s", c.Rate)
	}
	return b.String()
}
