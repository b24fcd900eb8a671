// Package gate is ratelab's regression gate for time: it times two builds
// of ratelab, a base and a new one, on one machine in one run, and judges
// the new against the base.
//
// Timings recorded on another machine, or on the same one at another
// time, say little: hosted CI hands out different CPUs from run to run,
// a memory-bound limiter and an ALU-bound yardstick move differently from
// one kind of CPU to the next, and a shared machine changes speed from
// one second to the next. So each build runs as a worker process (see
// Serve), both at once but never deciding at the same time: the gate asks
// them for short samples in turns, one of each build a round, in the order
// AB or BA (half the rounds each way, at random), round after round, every
// limiter and workload in turn. Each kept sample follows one of its own
// build that is not kept: a worker that has just been idle while the other
// ran finds its data out of the cache. Each round's ratio of the two
// builds' samples is one paired measurement taken in one spell of the
// machine; Judge turns the rounds of each cell into an estimate, an
// interval and a verdict.
//
// Build makes a build from a git ref, in a temporary worktree.
package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/results"
)

// Plan is what Run times, and how.
type Plan struct {
	// Rounds is how many rounds each cell (a limiter on a workload) is
	// timed in, after a first one not kept, which makes the limiters
	// and fills them with keys. Sample is how long each kept sample
	// lasts, Warm the one before it, of the same build, not kept: 10ms
	// brings a many-users limiter's data back into the cache, here.
	Rounds int
	Sample time.Duration
	Warm   time.Duration
	// Seed draws the order of each round's samples.
	Seed uint64
	// Limiters and Workloads narrow what is timed; empty, it is
	// everything both builds time.
	Limiters, Workloads []string
	// WorkerArgs are the flags the workers were started with, recorded
	// in the results.
	WorkerArgs []string
}

// Validate reports whether p can run.
func (p Plan) Validate() error {
	if p.Rounds < 5 || p.Rounds > 1000 {
		return fmt.Errorf("gate: rounds must be from 5 to 1000, got %d", p.Rounds)
	}
	if p.Sample < time.Millisecond || p.Sample > 10*time.Second {
		return fmt.Errorf("gate: a sample lasts from 1ms to 10s, got %v", p.Sample)
	}
	if p.Warm < 0 || p.Warm > 10*time.Second {
		return fmt.Errorf("gate: a warm-up lasts from 0 to 10s, got %v", p.Warm)
	}
	return nil
}

// runPair times base and cur, the new build, as p says, and returns their
// samples, saying how far it is to progress, if not nil.
func runPair(ctx context.Context, base, cur *worker, p Plan, progress func(string)) (*AB, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	f := &AB{Kind: "ab", Schema: ABSchema}
	f.Meta = ABMeta{
		Base: Build{Label: base.Label, GoVersion: base.GoVersion()},
		New:  Build{Label: cur.Label, GoVersion: cur.GoVersion()},
		CPU:  results.CPUModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start: time.Now().UTC().Truncate(time.Second), Rounds: p.Rounds, Sample: results.Seconds(p.Sample.Seconds()), Warm: results.Seconds(p.Warm.Seconds()),
		Seed: p.Seed, WorkerArgs: p.WorkerArgs,
	}
	lims, lu, err := paired("limiter", base.Limiters(), cur.Limiters(), p.Limiters)
	if err != nil {
		return nil, err
	}
	wls, wu, err := paired("workload", base.Workloads(), cur.Workloads(), p.Workloads)
	if err != nil {
		return nil, err
	}
	f.Meta.Unpaired = append(lu, wu...)

	begin := time.Now()
	rng := rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))
	total := len(wls) * (p.Rounds + 1) * len(lims)
	done := 0
	for _, wl := range wls {
		cells := make([]Cell, len(lims))
		orders := make([][]bool, len(lims)) // base first, by round
		for i, l := range lims {
			cells[i] = Cell{Limiter: l, Workload: wl, Rounds: make([]ABRound, 0, p.Rounds)}
			orders[i] = balanced(rng, p.Rounds)
		}
		for r := -1; r < p.Rounds; r++ { // round -1 fills the limiters
			for k := range lims {
				i := (k + max(r, 0)) % len(lims) // each round starts one limiter on
				first, second := base, cur
				if r >= 0 && !orders[i][r] {
					first, second = cur, base
				}
				a, err := warmSample(first, lims[i], wl, p)
				if err != nil {
					return nil, err
				}
				b, err := warmSample(second, lims[i], wl, p)
				if err != nil {
					return nil, err
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if r >= 0 {
					x := ABRound{Order: "AB", Base: a, New: b}
					if first == cur {
						x = ABRound{Order: "BA", Base: b, New: a}
					}
					cells[i].Rounds = append(cells[i].Rounds, x)
				}
				done++
				if progress != nil {
					progress(fmt.Sprintf("timing both builds: %s, round %d of %d (%d%%)", wl, max(r+1, 1), p.Rounds, 100*done/total))
				}
			}
		}
		f.Cells = append(f.Cells, cells...)
	}
	f.Meta.Elapsed = results.Seconds(time.Since(begin).Seconds())
	return f, nil
}

// warmSample is a sample of w's, after one of p.Warm not kept.
func warmSample(w *worker, limiter, workload string, p Plan) (results.Sample, error) {
	if p.Warm > 0 {
		if _, err := w.Sample(limiter, workload, p.Warm); err != nil {
			return results.Sample{}, err
		}
	}
	return w.Sample(limiter, workload, p.Sample)
}

// balanced returns n draws, half of them true (one more false for n odd),
// in an order drawn from rng: which build goes first in each round.
func balanced(rng *rand.Rand, n int) []bool {
	out := make([]bool, n)
	for i := range n / 2 {
		out[i] = true
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// paired returns the names both builds have, in the new build's order,
// narrowed to want when it is not empty, and says which one build has and
// the other has not. A name in want that neither has is an error.
func paired(what string, base, cur, want []string) (both, unpaired []string, err error) {
	for _, w := range want {
		if !slices.Contains(base, w) && !slices.Contains(cur, w) {
			return nil, nil, fmt.Errorf("gate: neither build has a %s %q (the new one has %s)", what, w, strings.Join(cur, ", "))
		}
	}
	for _, n := range cur {
		if len(want) > 0 && !slices.Contains(want, n) {
			continue
		}
		if slices.Contains(base, n) {
			both = append(both, n)
		} else {
			unpaired = append(unpaired, fmt.Sprintf("%s %s, which only the new build has", what, n))
		}
	}
	for _, n := range base {
		if (len(want) == 0 || slices.Contains(want, n)) && !slices.Contains(cur, n) {
			unpaired = append(unpaired, fmt.Sprintf("%s %s, which only the base has", what, n))
		}
	}
	if len(both) == 0 {
		return nil, nil, fmt.Errorf("gate: the two builds have no %s in common (base: %s; new: %s)", what, strings.Join(base, ", "), strings.Join(cur, ", "))
	}
	return both, unpaired, nil
}
