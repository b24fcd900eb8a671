package harness

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// RealTime says how a real-time run sends a workload.
type RealTime struct {
	// Goroutines is how many senders there are; each takes the users
	// Workload.Split deals it and sends their arrivals in order, starting
	// over when it runs out.
	Goroutines int
	// Rate is the total offered rate per second, shared evenly by the
	// senders (open loop: each request has an intended send time fixed in
	// advance, and its latency is measured from that time, so a stall
	// shows in every request it delays); zero means unpaced, each sender
	// sending as fast as it can.
	Rate float64
	// Duration is how long the run sends.
	Duration time.Duration
}

// RealTimeResult is what a real-time run measured.
type RealTimeResult struct {
	Decisions int64
	Elapsed   time.Duration
	// Latency is, for a paced run, from each request's intended send time
	// to its decision; for an unpaced one, the time of one decision,
	// sampled on one request in 16 (timing every call would cost as much
	// as a decision).
	Latency hist
	// LockWait is the time goroutines spent blocked on sync.Mutex and
	// sync.RWMutex during the run, summed over goroutines, as the runtime
	// counts it (/sync/mutex/wait/total:seconds): time parked waiting for
	// a lock, after spinning.
	LockWait time.Duration
	// Late is, for a paced run, the fraction of requests sent more than
	// a millisecond after their intended time: the senders could not keep
	// the pace.
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
	if cfg.Goroutines < 1 || cfg.Duration <= 0 || cfg.Rate < 0 {
		return RealTimeResult{}, fmt.Errorf("harness: a real-time run needs goroutines >= 1, a positive duration and a rate >= 0, got %+v", cfg)
	}
	keys := keysOf(w)
	parts := w.Split(cfg.Goroutines)
	for i := range parts {
		if len(parts[i]) == 0 {
			parts[i] = w.Arrivals[:min(1, len(w.Arrivals))] // more senders than users: repeat one
		}
	}
	if len(w.Arrivals) == 0 {
		return RealTimeResult{}, fmt.Errorf("harness: workload %s has no arrivals", w.Name)
	}
	runtime.GC() // do not let the setup's garbage be collected on the clock
	type out struct {
		n     int64
		h     hist
		late  int64
		total int64
	}
	outs := make([]out, cfg.Goroutines)
	var wg sync.WaitGroup
	start := time.Now().Add(time.Millisecond)
	deadline := start.Add(cfg.Duration)
	waitBefore := lockWait()
	for g := range cfg.Goroutines {
		wg.Go(func() {
			o := &outs[g]
			mine := parts[g]
			if cfg.Rate > 0 {
				o.n, o.late = sendPaced(ctx, l, keys, mine, start, deadline, cfg, g, &o.h)
				o.total = o.n
				return
			}
			o.n = sendUnpaced(ctx, l, keys, mine, start, deadline, &o.h)
		})
	}
	wg.Wait()
	r := RealTimeResult{Elapsed: time.Since(start), LockWait: lockWait() - waitBefore}
	late := int64(0)
	for i := range outs {
		r.Decisions += outs[i].n
		r.Latency.merge(&outs[i].h)
		late += outs[i].late
	}
	if r.Decisions > 0 {
		r.Late = float64(late) / float64(r.Decisions)
	}
	return r, ctx.Err()
}

func sendPaced(ctx context.Context, l limiters.Limiter, keys []string, mine []workloads.Arrival, start, deadline time.Time, cfg RealTime, g int, h *hist) (n, late int64) {
	interval := time.Duration(float64(cfg.Goroutines) / cfg.Rate * 1e9)
	at := start.Add(interval * time.Duration(g) / time.Duration(cfg.Goroutines))
	for i := 0; at.Before(deadline); i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			break
		}
		waitUntil(at, cfg.Goroutines > runtime.GOMAXPROCS(0))
		a := mine[i%len(mine)]
		if time.Since(at) > time.Millisecond {
			late++
		}
		l.AllowN(ctx, keys[a.User], int(a.N))
		h.record(int64(time.Since(at)))
		n++
		at = at.Add(interval)
	}
	return n, late
}

func sendUnpaced(ctx context.Context, l limiters.Limiter, keys []string, mine []workloads.Arrival, start, deadline time.Time, h *hist) int64 {
	for time.Now().Before(start) {
	}
	n := int64(0)
	for i := 0; ; i++ {
		if i%64 == 0 && (!time.Now().Before(deadline) || ctx.Err() != nil) {
			return n
		}
		a := mine[i%len(mine)]
		if i%16 == 0 {
			t0 := time.Now()
			l.AllowN(ctx, keys[a.User], int(a.N))
			h.record(int64(time.Since(t0)))
		} else {
			l.AllowN(ctx, keys[a.User], int(a.N))
		}
		n++
	}
}

// RealTimeAccuracy sends w to l alone, one request at a time at its
// arrival time with time scaled by scale (0.02 runs a minute of arrivals
// in 1.2 seconds, against a limit whose window is scaled alike), and
// returns which requests were admitted and when each was really decided,
// so that the ideal can be run on the times that really happened. It is
// how the accuracy of a limiter that takes no explicit time is measured.
func RealTimeAccuracy(ctx context.Context, w *workloads.Workload, l limiters.Limiter, scale float64) (allowed []bool, sent *workloads.Workload, err error) {
	keys := keysOf(w)
	allowed = make([]bool, len(w.Arrivals))
	sent = &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: make([]workloads.Arrival, len(w.Arrivals))}
	runtime.GC()
	start := time.Now().Add(time.Millisecond)
	for i, a := range w.Arrivals {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		waitUntil(start.Add(time.Duration(float64(a.T)*scale)), false)
		now := time.Since(start)
		d, err := l.AllowN(ctx, keys[a.User], int(a.N))
		if err != nil {
			return nil, nil, err
		}
		allowed[i] = d.Allowed
		a.T = now
		sent.Arrivals[i] = a
	}
	return allowed, sent, nil
}

// waitUntil returns at time at: it sleeps while at is far (a sleep
// oversleeps by tens of microseconds), then spins, yielding the processor
// if yield (when senders outnumber processors).
func waitUntil(at time.Time, yield bool) {
	for {
		wait := time.Until(at)
		switch {
		case wait <= 0:
			return
		case wait > 200*time.Microsecond:
			time.Sleep(wait - 100*time.Microsecond)
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
