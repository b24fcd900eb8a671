package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// The running of a fleet: its processes, each request routed to one, in
// simulated time and in real time.

// A process is one process of a fleet: a limiter with a client of its own,
// deciding at explicit times and at the server's clock, which counts its
// round trips.
type process interface {
	limiters.Limiter
	RoundTrips() int64
}

// A fleetMaker makes the processes of a fleet sharing one server, and reads
// what the server spent.
type fleetMaker struct {
	// New makes n processes for the lab's limit, sharing their keys, and
	// what closes them and removes their keys.
	New func(w limiters.Limit, n int) ([]process, func(), error)
	// ServerCPU returns the server's CPU time so far.
	ServerCPU func(ctx context.Context) (time.Duration, error)
	// Lease is whether the processes lease quota (approximate): their
	// decisions are not expected to be the algorithm's in memory.
	Lease bool
}

func measureFleet(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	var out []results.Row
	for _, s := range subjects {
		if s.Fleet == nil {
			continue
		}
		for _, routing := range routings {
			if why := s.failed(); why != "" {
				out = append(out, skipped(s, w.Name, fleetModeName, why))
				break
			}
			l.p.step(fmt.Sprintf("%s on %s, a fleet of %d, %s", s.Name, w.Name, l.c.Fleet.Processes, routing), 2)
			r, err := l.fleet(ctx, s, w, routing)
			if err != nil {
				return nil, fmt.Errorf("harness: %s on %s, a fleet: %w", s.Name, w.Name, err)
			}
			if why := s.failed(); why != "" {
				r = skipped(s, w.Name, fleetModeName, why)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// fleet runs s as a fleet on w, with routing.
func (l *lab) fleet(ctx context.Context, s Subject, w *workloads.Workload, how string) (results.Row, error) {
	c := l.c.Fleet
	r := row(s, w.Name, fleetModeName)
	r.SetInt(processes, c.Processes)
	r.Set(routing, how)
	if s.Fleet.Lease {
		r.Set(lease, "true")
	}
	sw, note, skip := s.Remote.Sample(w)
	if skip == "" {
		acc, n, differs, err := l.fleetSimulated(s, sw, how)
		if err != nil {
			return results.Row{}, err
		}
		r.Add(results.Decisions, results.UnitCount, float64(len(sw.Arrivals)))
		r.SetAccuracy(acc)
		r.Add(results.DiffersFromMemory, results.UnitCount, float64(differs))
		r.Note = note
		r.Add(tripsSimulated, results.UnitRatio, float64(n)/float64(max(len(sw.Arrivals), 1)))
		r.Add(tripsPerAdmitted, results.UnitRatio, float64(n)/float64(max(acc.Admitted, 1)))
		r.SetInt(results.JudgedN, l.c.Limit.N)
		r.Set(results.JudgedPer, l.c.Limit.Per.String())
	}
	return l.fleetRealTime(ctx, s, w, how, r)
}

// route returns the process of request i of w for key u, of p processes.
func route(routing string, rng *rand.Rand, u int32, p int) int {
	if routing == "sticky" {
		h := fnv.New32a()
		h.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
		return int(h.Sum32() % uint32(p))
	}
	return rng.IntN(p)
}

// fleetSimulated decides the sample sw at explicit times, each request by
// the process routing sends it to, the keys shared out among senders (a
// key's requests in order, as simulateByKey), and returns its accuracy,
// its round trips, and how many decisions differ from the same
// algorithm's in memory.
func (l *lab) fleetSimulated(s Subject, sw *workloads.Workload, routing string) (results.Accuracy, int64, int64, error) {
	procs, stop, err := s.Fleet.New(l.c.Limit, l.c.Fleet.Processes)
	if err != nil {
		return results.Accuracy{}, 0, 0, err
	}
	defer stop()
	rng := rand.New(rand.NewPCG(l.c.Seed, 0x6a09e667f3bcc908))
	to := make([]int, len(sw.Arrivals))
	for i, a := range sw.Arrivals {
		to[i] = route(routing, rng, a.User, len(procs))
	}
	allowed := make([]bool, len(sw.Arrivals))
	keys := keysOf(sw)
	workers := min(sw.Params.Users, s.Remote.Senders)
	var wg sync.WaitGroup
	for g := range max(workers, 1) {
		wg.Go(func() {
			for i, a := range sw.Arrivals {
				if int(a.User)%workers == g {
					allowed[i] = decideAt(procs[to[i]], keys[a.User], time.Unix(0, int64(a.T)), int(a.N)).Allowed
				}
			}
		})
	}
	wg.Wait()
	ideal, err := idealOf(sw, l.c.Limit)
	if err != nil {
		return results.Accuracy{}, 0, 0, err
	}
	twin, stopTwin, err := newInMemory(s.Algorithm, l.c.Limit)
	if err != nil {
		return results.Accuracy{}, 0, 0, err
	}
	defer stopTwin()
	differs := int64(0)
	for i, ok := range simulate(sw, twin) {
		if ok != allowed[i] {
			differs++
		}
	}
	return judge(sw, allowed, ideal, l.c.Limit), roundTrips(procs), differs, nil
}

// fleetRealTime runs the fleet in real time on w, routed by routing, every
// process's goroutines sending the requests routed to it as fast as they
// can, and adds to r what it measured.
func (l *lab) fleetRealTime(ctx context.Context, s Subject, w *workloads.Workload, routing string, r results.Row) (results.Row, error) {
	c := l.c.Fleet
	procs, stop, err := s.Fleet.New(l.c.Limit, c.Processes)
	if err != nil {
		return results.Row{}, err
	}
	defer stop()
	rng := rand.New(rand.NewPCG(l.c.Seed, 0xbb67ae8584caa73b))
	mine := make([][]workloads.Arrival, len(procs))
	for _, a := range w.Arrivals {
		p := route(routing, rng, a.User, len(procs))
		mine[p] = append(mine[p], a)
	}
	keys := keysOf(w)
	cpuBefore, err := s.Fleet.ServerCPU(ctx)
	if err != nil {
		return results.Row{}, err
	}
	type out struct {
		n int64
		h hist
	}
	outs := make([]out, len(procs)*c.Goroutines)
	var wg sync.WaitGroup
	start := time.Now().Add(time.Millisecond)
	deadline := start.Add(c.RealTime)
	for p := range procs {
		for g := range c.Goroutines {
			if len(mine[p]) == 0 {
				break
			}
			o := &outs[p*c.Goroutines+g]
			wg.Go(func() {
				o.n, _ = sendUnpaced(ctx, procs[p], keys, mine[p], g*len(mine[p])/c.Goroutines, start, deadline, &o.h)
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuAfter, err := s.Fleet.ServerCPU(ctx)
	if err != nil {
		return results.Row{}, err
	}
	var all hist
	var n int64
	for i := range outs {
		n += outs[i].n
		all.merge(&outs[i].h)
	}
	r.SetInt(results.Goroutines, len(procs)*c.Goroutines)
	r.Add(results.Throughput, results.UnitPerS, float64(n)/elapsed.Seconds())
	r.SetLatency(results.Latency, all.latency())
	r.Add(trips, results.UnitRatio, float64(roundTrips(procs))/float64(max(n, 1)))
	r.Add(serverCPU, results.UnitNS, float64(cpuAfter-cpuBefore)/float64(max(n, 1)))
	if !r.Has(results.Decisions) {
		r.Add(results.Decisions, results.UnitCount, float64(n))
	}
	return r, ctx.Err()
}

func roundTrips(procs []process) int64 {
	n := int64(0)
	for _, p := range procs {
		n += p.RoundTrips()
	}
	return n
}
