package harness

import (
	"context"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// TestHTTPAttack attacks a real server on loopback with vegeta: every
// request is answered, 200 or 429, both happen (the workload offers more
// than the limit), the ideal admits some, and the latencies are ordered.
// Timing decides the exact counts, so they are not asserted.
func TestHTTPAttack(t *testing.T) {
	w, err := workloads.Uniform(workloads.Params{Users: 5, Duration: time.Second, Limit: limiters.Limit{N: 10, Per: time.Second}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []limiters.Algorithm{limiters.GCRA, limiters.SlidingLog} {
		r, err := httpAttack{Algorithm: a, Limit: limiters.Limit{N: 10, Per: time.Second}, Workload: w, Rate: 400, Duration: 500 * time.Millisecond}.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", a, r)
		if r.Requests == 0 || r.OK+r.Limited+r.Other+r.Errors != r.Requests || r.Other != 0 || r.Errors != 0 {
			t.Errorf("%s: %v: want every request answered 200 or 429", a, r)
		}
		if r.OK == 0 || r.Limited == 0 || r.Ideal == 0 || r.Ideal > r.Requests {
			t.Errorf("%s: %v: 5 users at 400/s against 10/s each: want some admitted and some limited", a, r)
		}
		if l := r.LatencyNS; !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max) || !(r.Achieved > 0) {
			t.Errorf("%s: latency %+v, achieved %v/s", a, l, r.Achieved)
		}
	}
	if _, err := (httpAttack{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 1, Per: time.Second}, Workload: w}).Run(context.Background()); err == nil {
		t.Error("an attack without a rate ran")
	}
}

// The knee: the rate the sender and the server sustain, found by doubling
// from 1,000 a second up to the rate asked; the runs go at 80% of it,
// never under 1,000 a second (or the rate asked, when that is less).
func TestKnee(t *testing.T) {
	w, err := workloads.Uniform(workloads.Params{Users: 5, Duration: time.Second, Limit: limiters.Limit{N: 10, Per: time.Second}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	k, queued, err := knee(context.Background(), httpConfig{Rate: 2000, Time: 200 * time.Millisecond}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("knee, asked 2,000/s: runs at %v/s, queued above %v", k, time.Duration(queued))
	if k != 1000 && k != 1600 || queued < float64(time.Millisecond) {
		t.Errorf("runs at %v/s, queued above %vns: want 1,000 or 1,600 (80%% of 2,000), and a bound of a millisecond or more", k, queued)
	}
	if k, _, err := knee(context.Background(), httpConfig{Rate: 300, Time: 200 * time.Millisecond}, w); err != nil || k != 300 {
		t.Errorf("asked 300/s: knee %v, %v: want 300", k, err)
	}
}
