package harness

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// realTimeMode runs each subject, and the harness floor, on the real
// clock: unpaced, as fast as each of a growing number of goroutines can
// send (throughput, contention); then paced at an offered rate, open loop,
// several times over (latency from each request's intended send time). A
// subject kept in a server runs its own shorter, slower runs.
type realTimeMode struct{}

func (realTimeMode) name() string { return ModeRealTime }
func (realTimeMode) once() bool   { return false }

func (realTimeMode) steps(c Config, subjects []Subject) int {
	return 2 * (len(subjects) + 1) * len(c.realTimeRuns())
}

func (realTimeMode) measure(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	var out []results.Run
	for _, s := range append(slices.Clone(subjects), Floor()) {
		if s.New == nil {
			continue
		}
		runs, note := l.c.realTimeRuns(), func(RealTime) string { return "" }
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

// realTime runs s on w as rt says, a paced run l.c.LatencyRuns times over,
// each on a limiter of its own.
func (l *lab) realTime(ctx context.Context, s Subject, w *workloads.Workload, limit limiters.Limit, rt RealTime) (results.Run, error) {
	repeat := 1
	if rt.Rate > 0 {
		repeat = l.c.LatencyRuns
	}
	var each []RealTimeResult
	for range repeat {
		lim, stop, err := s.New(limit)
		if err != nil {
			return results.Run{}, err
		}
		res, err := RunRealTime(ctx, w, lim, rt)
		stop()
		if err != nil {
			return results.Run{}, err
		}
		each = append(each, res)
	}
	return realTimeResult(run(s, w.Name, ModeRealTime), rt, each), nil
}

// realTimeResult is base with what the runs of rt measured, pooled: their
// decisions, time, admissions and lock wait summed; the latency the median
// over the runs of each of their percentiles, each run's kept beside it
// (the spread), and the curve that of all their requests together.
func realTimeResult(base results.Run, rt RealTime, each []RealTimeResult) results.Run {
	var all RealTimeResult
	var late float64
	for i := range each {
		all.Decisions += each[i].Decisions
		all.Admitted += each[i].Admitted
		all.Elapsed += each[i].Elapsed
		all.LockWait += each[i].LockWait
		all.Latency.merge(&each[i].Latency)
		late += each[i].Late * float64(each[i].Decisions)
	}
	r := base
	r.Goroutines, r.OfferedRate, r.Decisions = rt.Goroutines, rt.Rate, all.Decisions
	r.LatencyNS = all.Latency.latency()
	if len(each) > 1 {
		r.LatencyRunsNS = make([]results.Latency, len(each))
		for i := range each {
			r.LatencyRunsNS[i] = *each[i].Latency.latency()
		}
		m := results.MedianLatency(r.LatencyRunsNS)
		r.LatencyNS = &m
	}
	r.LatencyCurveNS = all.Latency.curve()
	r.ThroughputPerS = all.Throughput()
	wait := float64(all.LockWait) / float64(max(all.Decisions, 1))
	r.LockWaitNSPerOp = &wait
	admitted := float64(all.Admitted) / float64(max(all.Decisions, 1))
	r.AdmittedFraction = &admitted
	if rt.Rate > 0 {
		achieved, late := all.Throughput()/rt.Rate, late/float64(max(all.Decisions, 1))
		r.AchievedFraction, r.LateFraction = &achieved, &late
	}
	return r
}

// realTimeRuns are the real-time runs of one limiter on one workload: the
// unpaced sweep, then the paced run for latency.
func (c Config) realTimeRuns() []RealTime {
	var out []RealTime
	for _, g := range c.Goroutines {
		out = append(out, RealTime{Goroutines: g, Duration: c.RealTime})
	}
	return append(out, RealTime{Goroutines: c.LatencyGoroutines, Rate: c.OfferedRate, Duration: c.LatencyTime})
}

// pacedLimit is the limit a paced run gives its limiter: the window scaled
// by the workload's own rate over the offered rate, so that each key is
// asked for the same multiple of its limit as in the workload.
func pacedLimit(limit limiters.Limit, w *workloads.Workload, offered float64) limiters.Limit {
	native := float64(len(w.Arrivals)) / w.Params.Duration.Seconds()
	length := time.Duration(float64(limit.Per) * native / offered)
	return limiters.Limit{N: limit.N, Per: max(length, time.Microsecond)}
}

// RealTime says how a real-time run sends a workload.
type RealTime struct {
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
func (cfg RealTime) Validate() error {
	if cfg.Goroutines < 1 || cfg.Duration <= 0 {
		return fmt.Errorf("harness: a real-time run needs at least one goroutine and a positive duration, got %d and %v", cfg.Goroutines, cfg.Duration)
	}
	if math.IsNaN(cfg.Rate) || cfg.Rate < 0 || cfg.Rate > 1e8*float64(cfg.Goroutines) {
		return fmt.Errorf("harness: the offered rate must be between 0 and 1e8 per second per goroutine, got %v for %d", cfg.Rate, cfg.Goroutines)
	}
	return nil
}

// RealTimeResult is what a real-time run measured.
type RealTimeResult struct {
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
func (r RealTimeResult) Throughput() float64 {
	return float64(r.Decisions) / r.Elapsed.Seconds()
}

const lockWaitMetric = "/sync/mutex/wait/total:seconds"

func lockWait() time.Duration {
	s := []metrics.Sample{{Name: lockWaitMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * 1e9)
}

// RunRealTime sends w to l as cfg says and measures it. ctx ending stops
// the run early.
func RunRealTime(ctx context.Context, w *workloads.Workload, l limiters.Limiter, cfg RealTime) (RealTimeResult, error) {
	if err := cfg.Validate(); err != nil {
		return RealTimeResult{}, err
	}
	if len(w.Arrivals) == 0 {
		return RealTimeResult{}, fmt.Errorf("harness: workload %s has no requests", w.Name)
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
	r := RealTimeResult{Elapsed: time.Since(start), LockWait: lockWait() - waitBefore}
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

func sendPaced(ctx context.Context, l limiters.Limiter, keys []string, seq []workloads.Arrival, from int, start, deadline time.Time, cfg RealTime, g int, h *hist) (n, admitted, late int64) {
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
func (c RealTime) describe() string {
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
