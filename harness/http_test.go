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
