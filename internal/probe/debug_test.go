package probe

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestDebugSim(t *testing.T) {
	name := os.Getenv("SIMCASE")
	if name == "" {
		t.Skip()
	}
	for _, tt := range simCases() {
		if tt.m.String() != name {
			continue
		}
		debugDesign = false
		defer func() { debugDesign = false }()
		lat := time.Millisecond
		if v := os.Getenv("SIMLAT"); v != "" {
			lat, _ = time.ParseDuration(v)
		}
		sim := simulate(tt.m, 1, lat)
		c := Config{Target: Target{URL: "http://sim/", Key: Key{Kind: "header", Name: "X-User"}}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
		p := &prober{c: c, x: sim, progress: func(s string) { t.Log(s) }, prefix: "ratelab-probe-00000000-"}
		p.rng = nil
		r, err := run(context.Background(), c, sim, func(s string) { t.Logf("%6.1fs %s", sim.clock.Sub(time.Unix(1_800_000_000, 123_456_789)).Seconds(), s) })
		_ = p
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("calibration %+v", r.Calibration)
		t.Logf("guess %+v", r.Calibration.guess(r.Claims))
		var obs []observation
		for _, a := range r.all {
			if a.Decided() {
				obs = append(obs, a.observation)
			}
		}
		e := explainAll(obs, tt.m)
		t.Logf("truth %s explains %d of %d", tt.m, e.Explained, e.Decisions)
		for _, w := range wrongOf(byKey(obs), tt.m, r.Start, 10) {
			t.Log("  ", w)
		}
	}
}
