package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
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
		HTTP: httpConfig{Rate: 1000, Time: 50 * time.Millisecond},
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
	subjects := len(allSubjects())
	// accuracy on five workloads (the anchored attack is measured for
	// accuracy alone), and on the other four realtime (2 sweeps + paced,
	// and the floor) + timing (and the floor) + http (ratelab's six
	// algorithms); memory once; llm once, six ways of charging for each
	// algorithm but the token and leaky buckets (TestLabLLM).
	want := 5*subjects + 4*(subjects+1)*3 + 4*(subjects+1) + 4*len(limiters.Algorithms()) + subjects + 6*(len(limiters.Algorithms())-2)
	if len(f.Rows) != want {
		t.Fatalf("%d rows, want %d", len(f.Rows), want)
	}
	checkSandwiches(t, f, subjects)
	for _, r := range f.Rows {
		a, hasAccuracy := r.AccuracyOf()
		switch {
		case r.Mode == llmModeName: // TestLabLLM
		case hasAccuracy:
			// The sliding log is the ideal: it makes no mistake.
			if r.Limiter == "sliding-log" && (a.FalseAllow != 0 || a.FalseDeny != 0 || a.MaxWindowRatio > 1) {
				t.Errorf("sliding log on %s: %+v", r.Workload, a)
			}
			if a.MaxWindowRatio <= 0 || r.Get(results.Decisions) == 0 {
				t.Errorf("%s on %s: %+v", r.Limiter, r.Workload, a)
			}
			// ratelab's limiters allocate nothing a decision once their
			// keys are made (many-users makes some again: see
			// results.AllocsPerDecision).
			if v, ok := r.Value(results.AllocsPerDecision); !ok || v < 0 || r.Library == "ratelab" && v >= 0.2 {
				t.Errorf("%s on %s (%s): allocations per decision %v (%v)", r.Limiter, r.Workload, r.Mode, v, ok)
			}
		case r.Mode == httpModeName:
			n := r.Count(results.Decisions)
			if n == 0 || r.Count(answeredOK)+r.Count(answeredLimited)+r.Count(answeredOther)+r.Count(unanswered) != n || r.Count(answeredOther) != 0 || r.Count(unanswered) != 0 ||
				r.Count(idealOK) > n || !r.Has(results.Latency+".p50") || !(r.Get(results.Throughput) > 0) {
				t.Errorf("http row: %+v: want every request answered 200 or 429", r)
			}
		case r.Mode == timingModeName:
			rounds := r.Curve(results.Throughput)
			if r.Limiter == "(harness floor)" {
				if rounds == nil || len(rounds.Y) != 2*subjects {
					t.Errorf("the floor on %s: %v samples, want one after each of %d subjects' 2", r.Workload, rounds, subjects)
				}
				break
			}
			// Costs are ratios to the floor, which the machine's noise
			// moves: checked for being measured, not for their size.
			// Within one sample, the quantiles are ordered.
			cost, ok := results.CostOf(r)
			if rounds == nil || len(rounds.Y) != 2 || !ok || cost.Rounds != 2 || !(cost.Throughput > 0) || !(cost.P50 > 0) || !(cost.P90 > 0) {
				t.Errorf("%s on %s: rounds %v, cost %+v (%v)", r.Limiter, r.Workload, rounds, cost, ok)
				break
			}
			for i := range rounds.Y {
				for _, prefix := range []string{"", results.FloorBefore, results.FloorAfter} {
					if s, ok := sampleOf(r, prefix, i); !ok || !(s.P50NS > 0) || s.P90NS < s.P50NS || !(s.ThroughputPerS > 0) {
						t.Errorf("%s on %s, round %d: a sample %q %+v missing or out of order", r.Limiter, r.Workload, i, prefix, s)
					}
				}
			}
		case r.Mode == realTimeModeName:
			if r.Get(results.Throughput) <= 0 || r.Get(results.Latency+".p50") <= 0 || !r.Has(lockWaitNS) || !r.Has(admitted) {
				t.Errorf("real-time row without measurements: %+v", r)
			}
			// Paced runs scale the window to keep each key's load: a
			// good share is admitted, as in the workload (not nearly
			// none, as flat out).
			if r.SettingFloat(results.Offered) > 0 && r.Limiter != "(harness floor)" && r.Workload == "uniform" && r.Get(admitted) < 0.3 {
				t.Errorf("%s paced on uniform admitted only %.3f", r.Limiter, r.Get(admitted))
			}
		case r.Mode == memoryModeName:
			if r.Get(results.BytesPerUser) <= 0 {
				t.Errorf("memory row: %+v", r)
			}
		}
	}
}

// sampleOf is the i-th sample of a timing row: the limiter's (prefix "")
// or the floor's before or after it (results.FloorBefore, FloorAfter).
func sampleOf(r results.Row, prefix string, i int) (results.Sample, bool) {
	var v [3]float64
	for j, name := range []string{results.Throughput, results.Latency + ".p50", results.Latency + ".p90"} {
		s := r.Curve(prefix + name)
		if s == nil || i >= len(s.Y) {
			return results.Sample{}, false
		}
		v[j] = s.Y[i]
	}
	return results.Sample{ThroughputPerS: v[0], P50NS: v[1], P90NS: v[2]}, true
}

// checkSandwiches checks that each timing sample has the floor sample
// taken just before it and the one just after it: in round r the subjects
// go in turn from the r-th on, so the floor after one is the floor before
// the next.
func checkSandwiches(t *testing.T, f *results.File, subjects int) {
	t.Helper()
	byWorkload := map[string][]results.Row{}
	for _, r := range f.Rows {
		if r.Mode == timingModeName && r.Limiter != "(harness floor)" {
			byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
		}
	}
	for w, rows := range byWorkload {
		if len(rows) != subjects {
			t.Fatalf("%s: %d timing rows, want %d", w, len(rows), subjects)
		}
		for r := range rows[0].Curve(results.Throughput).Y {
			for k := 1; k < subjects; k++ {
				prev, cur := rows[(k-1+r)%subjects], rows[(k+r)%subjects]
				prevAfter, _ := sampleOf(prev, results.FloorAfter, r)
				before, _ := sampleOf(cur, results.FloorBefore, r)
				after, _ := sampleOf(cur, results.FloorAfter, r)
				if before != prevAfter || before == after {
					t.Errorf("%s round %d: %s's floor before is %+v, want %s's floor after, %+v (and not its own after, %+v)",
						w, r, cur.Limiter, before, prev.Limiter, prevAfter, after)
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
	c.Modes = []string{simulatedModeName}
	c.Limiters = []string{"fixed-window", "sliding-log", "sliding-counter", "gcra", "x/time/rate", "throttled"}
	var out [2][]byte
	for i := range out {
		f, err := Lab(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Rows) != 5*len(c.Limiters) {
			t.Fatalf("%d rows", len(f.Rows))
		}
		// Allocations are counted by the runtime for the whole process,
		// and a table grows when its random seed says: the gate allows
		// them 0.01 a decision, and they are left out here.
		for j := range f.Rows {
			f.Rows[j].Metrics = slices.DeleteFunc(f.Rows[j].Metrics, func(m results.Metric) bool { return m.Name == results.AllocsPerDecision })
		}
		out[i], _ = json.Marshal(f.Rows)
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
