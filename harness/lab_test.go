package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A small lab, end to end: every limiter, every workload, every mode.
func smallLab() Config {
	return Config{
		Seed:      7,
		Quick:     true,
		Limit:     limiters.Window{Limit: 10, Length: time.Second},
		Users:     20,
		Attackers: 5,
		ManyUsers: 2000, ManyUsersRate: 2000,
		Simulated:   5 * time.Second,
		Goroutines:  []int{1, 2},
		RealTime:    20 * time.Millisecond,
		LatencyTime: 20 * time.Millisecond,
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
	want := 4*subjects + 4*subjects*3 + subjects // accuracy + realtime (2 sweeps + paced) + memory
	if len(f.Runs) != want {
		t.Fatalf("%d runs, want %d", len(f.Runs), want)
	}
	for _, r := range f.Runs {
		switch {
		case r.Accuracy != nil:
			// The sliding log is the ideal: it makes no mistake.
			if r.Limiter == "sliding-log" && (r.Accuracy.FalseAllow != 0 || r.Accuracy.FalseDeny != 0 || r.Accuracy.MaxWindowRatio > 1) {
				t.Errorf("sliding log on %s: %+v", r.Workload, r.Accuracy)
			}
			if r.Accuracy.MaxWindowRatio <= 0 || r.Decisions == 0 {
				t.Errorf("%s on %s: %+v", r.Limiter, r.Workload, r.Accuracy)
			}
		case r.Mode == ModeRealTime:
			if r.ThroughputPerS <= 0 || r.LatencyNS == nil || r.LatencyNS.P50 <= 0 || r.LockWaitNSPerOp == nil {
				t.Errorf("real-time run without measurements: %+v", r)
			}
		case r.Mode == ModeMemory:
			if r.BytesPerUser <= 0 {
				t.Errorf("memory run: %+v", r)
			}
		}
	}
}

// The same seed gives the same accuracy, byte for byte.
func TestLabDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab")
	}
	c := smallLab()
	c.Modes = []string{ModeSimulated}
	c.Limiters = []string{"fixed-window", "sliding-counter", "gcra", "x/time/rate", "throttled"}
	var out [2][]byte
	for i := range out {
		f, err := Lab(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		var accs []any
		for _, r := range f.Runs {
			accs = append(accs, r.Limiter, r.Workload, r.Decisions, r.Accuracy)
		}
		out[i], _ = json.Marshal(accs)
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatalf("two runs with one seed differ:\n%s\n%s", out[0], out[1])
	}
}
