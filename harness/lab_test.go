package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
)

// A small lab, end to end: every limiter, every workload, every mode.
func smallLab() Config {
	return Config{
		Seed:      7,
		Quick:     true,
		Limit:     limiters.Limit{N: 10, Per: time.Second},
		Users:     20,
		Attackers: 5,
		ManyUsers: 2000, ManyUsersRate: 2000,
		Simulated:    5 * time.Second,
		Goroutines:   []int{1, 2},
		RealTime:     20 * time.Millisecond,
		LatencyTime:  20 * time.Millisecond,
		TimingRounds: 2, TimingSample: 2 * time.Millisecond,
		HTTP: HTTPConfig{Rate: 1000, Time: 50 * time.Millisecond},
	}
}

func TestLab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab")
	}
	f, err := Lab(context.Background(), smallLab(), nil)
	if err != nil {
		t.Fatal(err)
	}
	subjects := len(Subjects())
	// accuracy on five workloads (the anchored attack is measured for
	// accuracy alone), and on the other four realtime (2 sweeps + paced,
	// and the floor) + timing (and the floor) + http (ratelab's six
	// algorithms); memory once; llm once, six ways of charging for each
	// algorithm but the token and leaky buckets (TestLabLLM).
	want := 5*subjects + 4*(subjects+1)*3 + 4*(subjects+1) + 4*len(limiters.Algorithms()) + subjects + 6*(len(limiters.Algorithms())-2)
	if len(f.Runs) != want {
		t.Fatalf("%d runs, want %d", len(f.Runs), want)
	}
	checkSandwiches(t, f, subjects)
	for _, r := range f.Runs {
		switch {
		case r.Mode == ModeLLM: // TestLabLLM
		case r.Accuracy != nil:
			// The sliding log is the ideal: it makes no mistake.
			if r.Limiter == "sliding-log" && (r.Accuracy.FalseAllow != 0 || r.Accuracy.FalseDeny != 0 || r.Accuracy.MaxWindowRatio > 1) {
				t.Errorf("sliding log on %s: %+v", r.Workload, r.Accuracy)
			}
			if r.Accuracy.MaxWindowRatio <= 0 || r.Decisions == 0 {
				t.Errorf("%s on %s: %+v", r.Limiter, r.Workload, r.Accuracy)
			}
			// ratelab's limiters allocate nothing a decision once their
			// keys are made (many-users makes some again: see AllocsPerDecision).
			if a := r.AllocsPerDecision; a == nil || *a < 0 || r.Library == "ratelab" && *a >= 0.2 {
				t.Errorf("%s on %s (%s): allocations per decision %v", r.Limiter, r.Workload, r.Mode, a)
			}
		case r.Mode == ModeHTTP:
			if h := r.HTTP; h == nil || r.Decisions == 0 || h.OK+h.Limited+h.Other+h.Errors != r.Decisions || h.Other != 0 || h.Errors != 0 ||
				h.Ideal > r.Decisions || r.LatencyNS == nil || !(r.ThroughputPerS > 0) {
				t.Errorf("http run: %+v %+v: want every request answered 200 or 429", r, r.HTTP)
			}
		case r.Mode == ModeTiming:
			if r.Limiter == "(harness floor)" {
				if len(r.Rounds) != 2*subjects {
					t.Errorf("the floor on %s: %d samples, want one after each of %d subjects' 2", r.Workload, len(r.Rounds), subjects)
				}
				break
			}
			// Costs are ratios to the floor, which the machine's noise
			// moves: checked for being measured, not for their size.
			// Within one sample, the quantiles are ordered.
			cost, ok := results.Costs(r)
			if len(r.Rounds) != 2 || !ok || cost.Rounds != 2 || !(cost.Throughput > 0) || !(cost.P50 > 0) || !(cost.P90 > 0) {
				t.Errorf("%s on %s: %d rounds, cost %+v (%v)", r.Limiter, r.Workload, len(r.Rounds), cost, ok)
			}
			for i, round := range r.Rounds {
				for _, s := range []*results.Sample{&round.Sample, round.FloorBefore, round.FloorAfter} {
					if s == nil || !(s.P50NS > 0) || s.P90NS < s.P50NS || !(s.ThroughputPerS > 0) {
						t.Errorf("%s on %s, round %d: a sample %+v missing or out of order", r.Limiter, r.Workload, i, s)
					}
				}
			}
		case r.Mode == ModeRealTime:
			if r.ThroughputPerS <= 0 || r.LatencyNS == nil || r.LatencyNS.P50 <= 0 || r.LockWaitNSPerOp == nil || r.AdmittedFraction == nil {
				t.Errorf("real-time run without measurements: %+v", r)
			}
			// Paced runs scale the window to keep each key's load: a
			// good share is admitted, as in the workload (not nearly
			// none, as flat out).
			if r.OfferedRate > 0 && r.Limiter != "(harness floor)" && r.Workload == "uniform" && *r.AdmittedFraction < 0.3 {
				t.Errorf("%s paced on uniform admitted only %.3f", r.Limiter, *r.AdmittedFraction)
			}
		case r.Mode == ModeMemory:
			if r.BytesPerUser <= 0 {
				t.Errorf("memory run: %+v", r)
			}
		}
	}
}

// checkSandwiches checks that each timing sample has the floor sample
// taken just before it and the one just after it: in round r the subjects
// go in turn from the r-th on, so the floor after one is the floor before
// the next.
func checkSandwiches(t *testing.T, f *results.File, subjects int) {
	t.Helper()
	byWorkload := map[string][]results.Run{}
	for _, r := range f.Runs {
		if r.Mode == ModeTiming && r.Limiter != "(harness floor)" {
			byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
		}
	}
	for w, runs := range byWorkload {
		if len(runs) != subjects {
			t.Fatalf("%s: %d timing runs, want %d", w, len(runs), subjects)
		}
		for r := range runs[0].Rounds {
			for k := 1; k < subjects; k++ {
				prev, cur := runs[(k-1+r)%subjects].Rounds[r], runs[(k+r)%subjects].Rounds[r]
				if *cur.FloorBefore != *prev.FloorAfter || *cur.FloorBefore == *cur.FloorAfter {
					t.Errorf("%s round %d: %s's floor before is %+v, want %s's floor after, %+v (and not its own after, %+v)",
						w, r, runs[(k+r)%subjects].Limiter, *cur.FloorBefore, runs[(k-1+r)%subjects].Limiter, *prev.FloorAfter, *cur.FloorAfter)
				}
			}
		}
	}
}

// The same seed gives the same simulated runs, byte for byte.
func TestLabDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab")
	}
	c := smallLab()
	c.Modes = []string{ModeSimulated}
	c.Limiters = []string{"fixed-window", "sliding-log", "sliding-counter", "gcra", "x/time/rate", "throttled"}
	var out [2][]byte
	for i := range out {
		f, err := Lab(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Runs) != 5*len(c.Limiters) {
			t.Fatalf("%d runs", len(f.Runs))
		}
		// Allocations are counted by the runtime for the whole process,
		// and a table grows when its random seed says: the gate allows
		// them 0.01 a decision, and they are left out here.
		for j := range f.Runs {
			f.Runs[j].AllocsPerDecision = nil
		}
		out[i], _ = json.Marshal(f.Runs)
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatalf("two runs with one seed differ:\n%s\n%s", out[0], out[1])
	}
}

func TestConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		change func(*Config)
		says   string
	}{
		{func(c *Config) { c.OfferedRate = math.NaN() }, "offered rate"},
		{func(c *Config) { c.OfferedRate = 2e9 }, "offered rate"},
		{func(c *Config) { c.Limit.Per = time.Millisecond }, "would have about"},
		{func(c *Config) { c.Simulated = 1500 * time.Millisecond }, "at least two windows"},
		{func(c *Config) { c.Modes = []string{"fast"} }, "unknown mode"},
		{func(c *Config) { c.Goroutines = []int{0} }, "goroutines must be"},
		{func(c *Config) { c.RealTimeAccuracyScale = 2 }, "scale must be"},
	} {
		c := Config{}.Defaults()
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Validate = %v, want an error saying %q", err, tt.says)
		}
	}
	if err := (Config{}).Defaults().Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}
