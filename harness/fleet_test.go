package harness

import (
	"context"
	"testing"
	"time"

	"github.com/ratelab/ratelab/results"
)

// The fleet mode: every fleet on Redis under both routings, in simulated
// time (the exact fleets decide as the algorithm in memory; plain sends
// every decision; the denial cache sends fewer; the lease fleets stay
// within their bound) and in real time; the same figures in simulated
// time on a second run of the same seed.
func TestLabFleet(t *testing.T) {
	url, rdb := redisURL(t)
	c := smallLab()
	c.Redis.URL = url
	c.Modes = []string{fleetModeName}
	c.Limiters = []string{redisFleetPlainName, redisFleetBatchedName, redisFleetCachedName, redisFleetLeaseName, redisFleetLeaseTBName}
	c.Workloads = []string{"bursty", "boundary-attack"}
	c.Redis.Users, c.Redis.Simulated = 4, 3*time.Second
	c.Fleet = fleetConfig{Processes: 3, Goroutines: 2, RealTime: 20 * time.Millisecond}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[[3]string]results.Row{}
	for _, r := range f.Rows {
		if r.Mode != fleetModeName {
			t.Errorf("%s on %s: mode %q, want only fleets", r.Limiter, r.Workload, r.Mode)
			continue
		}
		a, ok := r.AccuracyOf()
		if r.Skipped != "" || r.Setting(routing) == "" || !ok {
			t.Errorf("%s on %s: %+v", r.Limiter, r.Workload, r)
			continue
		}
		how := r.Setting(routing)
		byKey[[3]string{r.Workload, r.Limiter, how}] = r
		// The server's CPU is read in its own ticks: a fleet that barely
		// asks it may cost none that shows; a plain one always does.
		cpu := r.Get(serverCPU)
		plainCPU := r.Limiter != redisFleetPlainName || cpu > 0
		if rt := r.Get(trips); r.SettingInt(processes) != 3 || r.Get(results.Throughput) <= 0 || !r.Has(results.Latency+".p99") || !(rt > 0 && rt <= 1.01) || cpu < 0 || !plainCPU {
			t.Errorf("%s on %s, %s, in real time: %+v", r.Limiter, r.Workload, how, r)
		}
		if want := r.Get(tripsSimulated) * r.Get(results.Decisions) / float64(a.Admitted); a.Admitted > 0 && !near(r.Get(tripsPerAdmitted), want) {
			t.Errorf("%s on %s: %v round trips an admission, want %v", r.Limiter, r.Workload, r.Get(tripsPerAdmitted), want)
		}
		exact := r.Limiter != redisFleetLeaseName && r.Limiter != redisFleetLeaseTBName
		leased := r.Setting(lease) == "true"
		switch d, checked := r.Value(results.DiffersFromMemory); {
		case exact && (!checked || d != 0 || leased):
			t.Errorf("%s on %s, %s: differs from memory %v (%v), lease %v; want an exact fleet", r.Limiter, r.Workload, how, d, checked, leased)
		case !exact && !leased:
			t.Errorf("%s: not marked as leasing", r.Limiter)
		case !exact:
			// At most C + (W+τ)·R in a window W: 2 + τ/W times N.
			if most := 2 + 1.0/leaseTime; a.MaxWindowRatio > most {
				t.Errorf("%s on %s, %s: %.3f×N in a window, over its bound %.2f×N", r.Limiter, r.Workload, how, a.MaxWindowRatio, most)
			}
		}
	}
	for _, w := range c.Workloads {
		for _, routing := range routings {
			plain, ok1 := byKey[[3]string{w, redisFleetPlainName, routing}]
			cached, ok2 := byKey[[3]string{w, redisFleetCachedName, routing}]
			lease, ok3 := byKey[[3]string{w, redisFleetLeaseName, routing}]
			if !ok1 || !ok2 || !ok3 {
				t.Fatalf("%s, %s: a fleet is missing (%v %v %v)", w, routing, ok1, ok2, ok3)
			}
			// Plain: one round trip a decision, and one a process when
			// the script had to be sent whole.
			if p := plain.Get(tripsSimulated); p < 1 || p > 1+3/plain.Get(results.Decisions) {
				t.Errorf("%s, %s: plain made %v round trips a decision, want 1", w, routing, p)
			}
			if cached.Get(tripsSimulated) >= plain.Get(tripsSimulated) || lease.Get(tripsSimulated) >= plain.Get(tripsSimulated) {
				t.Errorf("%s, %s: round trips a decision: plain %v, cached %v, lease %v; want fewer than plain", w, routing,
					plain.Get(tripsSimulated), cached.Get(tripsSimulated), lease.Get(tripsSimulated))
			}
			if ca, pa := accuracyOf(cached), accuracyOf(plain); ca != pa {
				t.Errorf("%s, %s: the denial cache decided otherwise: %+v, plain %+v", w, routing, ca, pa)
			}
		}
	}
	// The same seed: the same decisions and round trips in simulated time.
	c.Limiters = []string{redisFleetLeaseName}
	again, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again.Rows {
		was, ok := byKey[[3]string{r.Workload, r.Limiter, r.Setting(routing)}]
		if !ok || accuracyOf(r) != accuracyOf(was) || r.Get(tripsSimulated) != was.Get(tripsSimulated) {
			t.Errorf("%s on %s, %s: a second run decided %+v in %v round trips a decision, the first %+v in %v", r.Limiter, r.Workload, r.Setting(routing),
				accuracyOf(r), r.Get(tripsSimulated), accuracyOf(was), was.Get(tripsSimulated))
		}
	}
	prefix := f.Meta.Setting("redis-prefix")
	if prefix == "" {
		t.Fatalf("no redis-prefix among the settings: %v", f.Meta.Settings)
	}
	if keys, _, err := rdb.Scan(context.Background(), 0, prefix+"*", 1_000_000).Result(); err != nil || len(keys) > 0 {
		t.Errorf("%d keys left (%v)", len(keys), err)
	}
}

// accuracyOf is r's accuracy, the zero Accuracy if it has none.
func accuracyOf(r results.Row) results.Accuracy {
	a, _ := r.AccuracyOf()
	return a
}

func near(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
