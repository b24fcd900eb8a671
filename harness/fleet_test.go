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
	c.Modes = []string{ModeFleet}
	c.Limiters = []string{RedisFleetPlainName, RedisFleetBatchedName, RedisFleetCachedName, RedisFleetLeaseName, RedisFleetLeaseTBName}
	c.Workloads = []string{"bursty", "boundary-attack"}
	c.Redis.Users, c.Redis.Simulated = 4, 3*time.Second
	c.Fleet = FleetConfig{Processes: 3, Goroutines: 2, RealTime: 20 * time.Millisecond}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[[3]string]results.Run{}
	for _, r := range f.Runs {
		if r.Mode != ModeFleet {
			t.Errorf("%s on %s: mode %q, want only fleets", r.Limiter, r.Workload, r.Mode)
			continue
		}
		if r.SkippedBecause != "" || r.Fleet == nil || r.Accuracy == nil {
			t.Errorf("%s on %s: %+v", r.Limiter, r.Workload, r)
			continue
		}
		byKey[[3]string{r.Workload, r.Limiter, r.Fleet.Routing}] = r
		fl := r.Fleet
		// The server's CPU is read in its own ticks: a fleet that barely
		// asks it may cost none that shows; a plain one always does.
		plainCPU := r.Limiter != RedisFleetPlainName || fl.ServerCPUNS > 0
		if fl.Processes != 3 || r.ThroughputPerS <= 0 || r.LatencyNS == nil || !(fl.RoundTrips > 0 && fl.RoundTrips <= 1.01) || fl.ServerCPUNS < 0 || !plainCPU {
			t.Errorf("%s on %s, %s, in real time: %+v, %+v", r.Limiter, r.Workload, fl.Routing, r, *fl)
		}
		if want := fl.RoundTripsSimulated * float64(r.Decisions) / float64(r.Accuracy.Admitted); r.Accuracy.Admitted > 0 && !near(fl.RoundTripsPerAdmitted, want) {
			t.Errorf("%s on %s: %v round trips an admission, want %v", r.Limiter, r.Workload, fl.RoundTripsPerAdmitted, want)
		}
		exact := r.Limiter != RedisFleetLeaseName && r.Limiter != RedisFleetLeaseTBName
		switch {
		case exact && (r.DiffersFromMemory == nil || *r.DiffersFromMemory != 0 || fl.Lease):
			t.Errorf("%s on %s, %s: differs from memory %v, lease %v; want an exact fleet", r.Limiter, r.Workload, fl.Routing, r.DiffersFromMemory, fl.Lease)
		case !exact && !fl.Lease:
			t.Errorf("%s: not marked as leasing", r.Limiter)
		case !exact:
			// At most C + (W+τ)·R in a window W: 2 + τ/W times N.
			if most := 2 + 1.0/LeaseTime; r.Accuracy.MaxWindowRatio > most {
				t.Errorf("%s on %s, %s: %.3f×N in a window, over its bound %.2f×N", r.Limiter, r.Workload, fl.Routing, r.Accuracy.MaxWindowRatio, most)
			}
		}
	}
	for _, w := range c.Workloads {
		for _, routing := range routings {
			plain, ok1 := byKey[[3]string{w, RedisFleetPlainName, routing}]
			cached, ok2 := byKey[[3]string{w, RedisFleetCachedName, routing}]
			lease, ok3 := byKey[[3]string{w, RedisFleetLeaseName, routing}]
			if !ok1 || !ok2 || !ok3 {
				t.Fatalf("%s, %s: a fleet is missing (%v %v %v)", w, routing, ok1, ok2, ok3)
			}
			// Plain: one round trip a decision, and one a process when
			// the script had to be sent whole.
			if p := plain.Fleet.RoundTripsSimulated; p < 1 || p > 1+3/float64(plain.Decisions) {
				t.Errorf("%s, %s: plain made %v round trips a decision, want 1", w, routing, p)
			}
			if cached.Fleet.RoundTripsSimulated >= plain.Fleet.RoundTripsSimulated || lease.Fleet.RoundTripsSimulated >= plain.Fleet.RoundTripsSimulated {
				t.Errorf("%s, %s: round trips a decision: plain %v, cached %v, lease %v; want fewer than plain", w, routing,
					plain.Fleet.RoundTripsSimulated, cached.Fleet.RoundTripsSimulated, lease.Fleet.RoundTripsSimulated)
			}
			if *cached.Accuracy != *plain.Accuracy {
				t.Errorf("%s, %s: the denial cache decided otherwise: %+v, plain %+v", w, routing, *cached.Accuracy, *plain.Accuracy)
			}
		}
	}
	// The same seed: the same decisions and round trips in simulated time.
	c.Limiters = []string{RedisFleetLeaseName}
	again, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again.Runs {
		was := byKey[[3]string{r.Workload, r.Limiter, r.Fleet.Routing}]
		if *r.Accuracy != *was.Accuracy || r.Fleet.RoundTripsSimulated != was.Fleet.RoundTripsSimulated {
			t.Errorf("%s on %s, %s: a second run decided %+v in %v round trips a decision, the first %+v in %v", r.Limiter, r.Workload, r.Fleet.Routing,
				*r.Accuracy, r.Fleet.RoundTripsSimulated, *was.Accuracy, was.Fleet.RoundTripsSimulated)
		}
	}
	if keys, _, err := rdb.Scan(context.Background(), 0, f.Meta.Params.Redis.Prefix+"*", 1_000_000).Result(); err != nil || len(keys) > 0 {
		t.Errorf("%d keys left (%v)", len(keys), err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
