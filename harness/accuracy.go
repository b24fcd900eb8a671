package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// accuracyMode measures each subject's decisions against the ideal's (the
// sliding window log, exact) on the same requests: in simulated time when
// the subject decides at explicit times, exactly and reproducibly; else by
// a replay in real time, time compressed. A subject kept in a server
// decides a sample of the workload, and is checked decision for decision
// against the same algorithm in memory. Its name is "simulated", its runs'
// mode "simulated" or "realtime" as they were made.
type accuracyMode struct{}

func (accuracyMode) name() string { return ModeSimulated }
func (accuracyMode) once() bool   { return false }

func (accuracyMode) steps(c Config, subjects []Subject) int { return 1 + len(subjects) }

func (accuracyMode) measure(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	l.p.step(fmt.Sprintf("the ideal on %s (%d requests)", w.Name, len(w.Arrivals)), 1)
	ideal, err := Ideal(w, l.c.Limit)
	if err != nil {
		return nil, err
	}
	judged := &results.Judged{Limit: l.c.Limit.N, Window: results.Seconds(l.c.Limit.Per.Seconds())}
	var out []results.Run
	for _, s := range subjects {
		switch why := s.failed(); {
		case s.Floor:
			continue // it admits everything
		case s.NewAt == nil && s.New == nil:
			continue // a fleet only: the fleet mode measures its accuracy
		case why != "":
			out = append(out, skipped(s, w.Name, "", why))
			continue
		}
		l.p.step(fmt.Sprintf("accuracy of %s on %s", s.Name, w.Name), 1)
		r, err := l.accuracy(ctx, s, w, ideal)
		if err != nil {
			return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, w.Name, err)
		}
		if r.Accuracy != nil {
			r.Judged = judged
		}
		id := run(s, w.Name, r.Mode)
		r.Limiter, r.Library, r.Algorithm, r.Backend, r.Workload = id.Limiter, id.Library, id.Algorithm, id.Backend, id.Workload
		out = append(out, r)
	}
	return out, nil
}

// accuracy measures s on w, in the way s allows.
func (l *lab) accuracy(ctx context.Context, s Subject, w *workloads.Workload, ideal []bool) (results.Run, error) {
	switch {
	case s.OwnLimits != "":
		return results.Run{SkippedBecause: "its limits are its own (" + s.OwnLimits + "), not the lab's N per W: replay a trace through it (ratelab replay --config) to see its decisions"}, nil
	case s.Remote != nil:
		return l.remoteAccuracy(s, w)
	case s.NewAt != nil:
		return l.simulated(s, w, ideal)
	}
	return l.replayed(ctx, s, w)
}

// simulated measures s deciding w at explicit times.
func (l *lab) simulated(s Subject, w *workloads.Workload, ideal []bool) (results.Run, error) {
	d, stop, err := s.NewAt(l.c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	defer stop()
	start := time.Now()
	allowed := Simulate(w, d)
	l.simTime += time.Since(start)
	l.simDecisions += int64(len(allowed))
	acc := Compare(w, allowed, ideal, l.c.Limit)
	allocs := steadyAllocsAt(w, d, l.c.Limit.Per)
	r := results.Run{Mode: ModeSimulated, Decisions: int64(len(allowed)), Accuracy: &acc, AllocsPerDecision: &allocs}
	r.Edge = edgeOf(w, allowed, l.c.Limit.Per)
	return r, nil
}

// edgeOf is the picture of a window edge, for the attacks on one.
func edgeOf(w *workloads.Workload, allowed []bool, length time.Duration) *results.Series {
	if w.Name != "boundary-attack" {
		return nil
	}
	return EdgeSeries(w, allowed, length, edgeWindows)
}

// replayed measures s, which takes no explicit time, by replaying w in real
// time, compressed.
func (l *lab) replayed(ctx context.Context, s Subject, w *workloads.Workload) (results.Run, error) {
	scale := replayScale(w, l.c.RealTimeAccuracyScale)
	scaled := limiters.Limit{N: l.c.Limit.N, Per: max(time.Duration(float64(l.c.Limit.Per)*scale), 1)}
	lim, stop, err := s.New(scaled)
	if err != nil {
		return results.Run{}, err
	}
	defer stop()
	allowed, sent, lag, err := RealTimeAccuracy(ctx, w, lim, scale)
	if err != nil {
		return results.Run{}, err
	}
	sentIdeal, err := Ideal(sent, l.c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	acc := Compare(sent, allowed, sentIdeal, l.c.Limit)
	allocs, err := steadyAllocs(ctx, w, lim)
	if err != nil {
		return results.Run{}, err
	}
	r := results.Run{Mode: ModeRealTime, Decisions: int64(len(allowed)), Accuracy: &acc,
		TimeScale: scale, SendLagNS: lag.latency(), AllocsPerDecision: &allocs}
	r.Edge = edgeOf(sent, allowed, l.c.Limit.Per)
	return r, nil
}

// remoteAccuracy measures s, kept in a server, on the sample of w it
// decides: against the ideal, and request for request against the same
// algorithm in memory. The sample's keys are shared out among senders
// (simulateByKey), so that the round trips overlap.
func (l *lab) remoteAccuracy(s Subject, w *workloads.Workload) (results.Run, error) {
	if s.NewAt == nil {
		return results.Run{SkippedBecause: "accuracy not measured: it reads the server's clock and takes no explicit time, and a replay in real time, a round trip a request, would not fit the lab's time"}, nil
	}
	sw, note, skip := s.Remote.Sample(w)
	if skip != "" {
		return results.Run{SkippedBecause: skip}, nil
	}
	ideal, err := Ideal(sw, l.c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	twin, stopTwin, err := newInMemory(s.Algorithm, l.c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	defer stopTwin()
	d, stop, err := s.NewAt(l.c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	defer stop()
	allowed := simulateByKey(sw, d, min(sw.Params.Users, s.Remote.Senders))
	if why := s.failed(); why != "" {
		return results.Run{SkippedBecause: why}, nil
	}
	differs := int64(0)
	for i, ok := range Simulate(sw, twin) {
		if ok != allowed[i] {
			differs++
		}
	}
	acc := Compare(sw, allowed, ideal, l.c.Limit)
	allocs := steadyAllocsAt(after(sw, 500, l.c.Limit.Per), d, l.c.Limit.Per)
	return results.Run{Mode: ModeSimulated, Decisions: int64(len(allowed)), Accuracy: &acc, AllocsPerDecision: &allocs, DiffersFromMemory: &differs,
		Note: note}, nil
}

// after returns w's first n requests moved past its end by whole windows
// of length, so that a limiter that has decided w meets them as it met w's
// (the keys made, time going on).
func after(w *workloads.Workload, n int, length time.Duration) *workloads.Workload {
	out := &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: slices.Clone(w.Arrivals[:min(n, len(w.Arrivals))])}
	if len(w.Arrivals) == 0 {
		return out
	}
	shift := ((w.Arrivals[len(w.Arrivals)-1].T+length)/length + 1) * length
	for i := range out.Arrivals {
		out.Arrivals[i].T += shift
	}
	return out
}

// simulateByKey is Simulate with w's users shared out among workers
// goroutines, each deciding its users' requests in order: the same
// decisions from a limiter whose keys do not share state, sooner when
// each decision waits on a server.
func simulateByKey(w *workloads.Workload, d limiters.Limiter, workers int) []bool {
	workers = max(workers, 1)
	allowed := make([]bool, len(w.Arrivals))
	keys := keysOf(w)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i, a := range w.Arrivals {
				if int(a.User)%workers == g {
					allowed[i] = decideAt(d, keys[a.User], time.Unix(0, int64(a.T)), int(a.N)).Allowed
				}
			}
		})
	}
	wg.Wait()
	return allowed
}

// replayRate is the most requests a second one sender keeps pace with in a
// real-time replay, with room to spare.
const replayRate = 1_000_000

// replayScale is how much a real-time replay of w compresses time: as much
// as most allows, but not so much that the workload's densest millisecond
// comes faster than one sender can send it, and never slower than real
// time.
func replayScale(w *workloads.Workload, most float64) float64 {
	peak, lo := 0, 0
	for hi, a := range w.Arrivals {
		for w.Arrivals[lo].T <= a.T-time.Millisecond {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	need := float64(peak) * 1000 / replayRate // the scale at which the peak is replayRate
	return min(max(most, need), 1)
}

// RealTimeAccuracy sends w to l alone, one request at a time at its
// arrival time with time scaled by scale (0.02 runs a minute of arrivals in
// 1.2 seconds, against a limit whose window is scaled alike), and returns
// which requests were admitted, the workload as it was really sent (times
// in unscaled time, as the ideal must see them), and how late the sends
// were against their schedule. It is how the accuracy of a limiter that
// takes no explicit time is measured.
func RealTimeAccuracy(ctx context.Context, w *workloads.Workload, l limiters.Limiter, scale float64) (allowed []bool, sent *workloads.Workload, lag hist, err error) {
	keys := keysOf(w)
	allowed = make([]bool, len(w.Arrivals))
	sent = &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: make([]workloads.Arrival, len(w.Arrivals))}
	runtime.GC()
	start := time.Now().Add(time.Millisecond)
	for i, a := range w.Arrivals {
		due := time.Duration(float64(a.T) * scale)
		if err := waitUntil(ctx, start.Add(due), false); err != nil {
			return nil, nil, lag, err
		}
		now := time.Since(start)
		d, err := l.AllowN(ctx, keys[a.User], int(a.N))
		if err != nil {
			return nil, nil, lag, err
		}
		lag.record(int64(now - due))
		allowed[i] = d.Allowed
		a.T = time.Duration(float64(now) / scale)
		sent.Arrivals[i] = a
	}
	return allowed, sent, lag, nil
}
