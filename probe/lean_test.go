package probe

import (
	"context"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Limits of the size APIs publish, 600 a minute, in simulated time and
// with no --limit: each named, its family, quota and time within 2%,
// within the default 2,000 requests and 3 minutes, by the lean
// fingerprint. The target says its quota (X-RateLimit-Limit), as most do.
// The sliding log answers its admissions one after another, 0.65ms each,
// as ratelab serve did beside two other probes on a loaded host: a
// burst's last admissions come back 400ms late, and the probe must not
// read them as a queue's.
func TestProbeSimulatedLarge(t *testing.T) {
	minute := limiters.Limit{N: 600, Per: time.Minute}
	for _, tt := range []struct {
		m       model
		backlog time.Duration
	}{
		{model{Algorithm: limiters.SlidingLog, Limit: minute}, 650 * time.Microsecond},
		{model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 600}}, 0},
		{model{Algorithm: limiters.FixedWindow, Limit: minute}, 0},
		{model{Algorithm: limiters.FixedWindow, Limit: minute, Anchored: true}, 0},
		{model{Algorithm: limiters.SlidingCounter, Limit: minute}, 0},
	} {
		m := tt.m
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			sim := honestFields(simulate(m, 1, time.Millisecond), m)
			sim.backlog = tt.backlog
			c := simConfig()
			c.MaxTime = 3 * time.Minute
			var log []string
			r, err := run(context.Background(), c, sim, func(s string) { log = append(log, s) })
			for _, l := range log {
				t.Log(l)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, r.Verdict.Text)
			for _, f := range r.Fit {
				t.Logf("  %s %s %v: %.1f%% %v", f.Algorithm, f.Limit, f.Variants, 100*f.Share, f.Wrong)
			}
			if !r.Calibration.Lean {
				t.Errorf("not lean: %+v", r.Calibration)
			}
			if !r.Verdict.Named {
				t.Fatalf("no model named: %s", r.Verdict.Text)
			}
			got, err := parseModel(r.Fit[0])
			if err != nil {
				t.Fatal(err)
			}
			if got.Family() != m.Family() || got.quota() != m.quota() || differs(got, m) {
				t.Errorf("named %s, want %s", got, m)
			}
			if r.Queue != nil {
				t.Errorf("read as a queue: %+v", *r.Queue)
			}
			if r.Requests > c.MaxRequests || r.Elapsed > c.MaxTime.Seconds() {
				t.Errorf("%d requests in %.1fs, want within %d and %v", r.Requests, r.Elapsed, c.MaxRequests, c.MaxTime)
			}
		})
	}
}
