package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

func simConfig() Config {
	return Config{Target: Target{URL: "http://sim/", Key: Key{Kind: "header", Name: "X-User"}}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
}

// nginx's limit_req as most leave it refuses with 503: the probe learns
// it from a pressed key, names the limiter as it does with 429, and says
// which status it took for a refusal. Told --deny-status 503, the same.
func TestProbeSimulatedRefusal(t *testing.T) {
	m := model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 6}}
	for _, tt := range []struct {
		name     string
		deny     []int
		status   int
		wantFrom string
	}{
		{"503 learned", nil, 503, "learned"},
		{"403 learned", nil, 403, "learned"},
		{"503 given", []int{503, 429}, 503, "--deny-status"},
		{"429", nil, 429, "429"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := simulate(m, 1, time.Millisecond)
			sim.deny = tt.status
			c := simConfig()
			c.Target.Deny = tt.deny
			r, err := run(context.Background(), c, sim, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Verdict.Named {
				t.Fatalf("no model named: %s", r.Verdict.Text)
			}
			got, err := parseModel(r.Fit[0])
			if err != nil {
				t.Fatal(err)
			}
			if got.Family() != m.Family() || differs(got, m) {
				t.Errorf("named %s, want %s", got, m)
			}
			if r.Refusal.Status != tt.status || r.Refusal.From != tt.wantFrom || r.Undecided != 0 {
				t.Errorf("refusal %+v, %d undecided; want %d from %s, none undecided", r.Refusal, r.Undecided, tt.status, tt.wantFrom)
			}
		})
	}
}

// A target that answers every request with something that is neither an
// admission nor a refusal (the key header wrong: 400; no credentials:
// 401; a POST-only endpoint: 405; a broken one: 500) is never taken for
// one that admits everything: the probe stops after five requests and
// says what came back and what likely causes it.
func TestProbeUndecided(t *testing.T) {
	m := model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 10, Per: time.Second}}
	for _, tt := range []struct {
		status int
		want   string
	}{
		{400, "every answer (5) was 400 Bad Request: is the key right (--key header:X-User)?"},
		{401, "every answer (5) was 401 Unauthorized: does the target need credentials?"},
		{405, "every answer (5) was 405 Method Not Allowed: the target does not take GET (--method)"},
		{500, "every answer (5) was 500 Internal Server Error: the target fails every request"},
	} {
		sim := simulate(m, 1, time.Millisecond)
		sim.always = tt.status
		r, err := run(context.Background(), simConfig(), sim, nil)
		if !errors.Is(err, errNotDeciding) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d: %v; want %q", tt.status, err, tt.want)
		}
		if r.Requests != 5 || len(r.Fit) != 0 || r.Refusal.Other[tt.status] != 5 {
			t.Errorf("%d: %d requests, fit %v, other %v; want 5 requests, no fit, 5 of %d", tt.status, r.Requests, r.Fit, r.Refusal.Other, tt.status)
		}
	}
}

// --max-rate bounds every request of a probe, the checks' bursts and
// the experiments included: the busiest second of a whole probe of a
// quota of 40 (whose concurrency check would send 80 at once) at
// --max-rate 120.
func TestProbeSimulatedMaxRate(t *testing.T) {
	for _, m := range []model{
		{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 25, Per: 2 * time.Second}},
		{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 25}},
	} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			c := simConfig()
			c.MaxRate = 120
			r, err := run(context.Background(), c, simulate(m, 1, time.Millisecond), nil)
			if err != nil {
				t.Fatal(err)
			}
			var sent []time.Time
			for _, a := range r.all {
				sent = append(sent, a.Sent)
			}
			if most := busiestWith(sent, nil, time.Time{}); most > c.MaxRate || most < c.MaxRate/2 {
				t.Errorf("the busiest second sent %d, want at most --max-rate %d (and near it)", most, c.MaxRate)
			}
			if got, err := parseModel(r.Fit[0]); err != nil || !r.Verdict.Named || differs(got, m) {
				t.Errorf("named %v (%s), want %s", r.Fit[0], r.Verdict.Text, m)
			}
			t.Logf("%d requests in %.1fs: %s; skipped %v", r.Requests, r.Elapsed, r.Verdict.Text, r.Skipped)
		})
	}
}

// A fingerprint planned for the calibration's guess (20/100ms) whose
// rounds named a fixed window of 20/s: the edge attacks go again at the
// 1s windows' edges, and the boundary attack meets the fixed window's 2N
// there (at the guess's edges it met 1N); with no requests left for it,
// the rows say the edges were not judged, rather than read "exact at the
// edge".
func TestEdgesAgain(t *testing.T) {
	named := model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 20, Per: time.Second}}
	planned := limiters.Limit{N: 20, Per: 100 * time.Millisecond}
	for _, tt := range []struct {
		budget int
		note   string
		ratio  float64 // the boundary attack's ratio, at least
	}{
		{2000, "sent again at the edges of the named 1s windows (the fingerprint was planned for 100ms)", 1.9},
		{300, "not judged at the edges of the named 1s windows: the fingerprint was planned for 100ms; again at them would take 140 requests, more than --max-requests leaves beside the checks", 0},
	} {
		sim := simulate(named, 1, time.Millisecond)
		c := simConfig()
		c.MaxRequests = tt.budget
		p := &prober{c: c, x: sim, rng: rand.New(rand.NewPCG(1, 0)), prefix: "p-"}
		p.r = &Report{Start: sim.now(), prefix: p.prefix, planned: planned}
		if err := p.fingerprint(context.Background(), planned); err != nil {
			t.Fatal(err)
		}
		before := judgeFingerprint(p.r.fp, p.prefix, named)
		notes, err := p.edgesAgain(context.Background(), named)
		if err != nil {
			t.Fatal(err)
		}
		after := judgeFingerprint(p.r.fp, p.prefix, named)
		ratio := func(acc []Accuracy) float64 {
			for _, a := range acc {
				if a.Workload == "boundary-attack" {
					return a.MaxWindowRatio
				}
			}
			return -1
		}
		if notes["boundary-attack"] != tt.note || notes["anchored-attack"] != tt.note {
			t.Errorf("budget %d: notes %q; want %q", tt.budget, notes, tt.note)
		}
		if tt.ratio > 0 && (ratio(after) < tt.ratio || ratio(before) >= tt.ratio) {
			t.Errorf("budget %d: the boundary attack's ratio %.2f at the planned edges, %.2f at the named; want under and over %g", tt.budget, ratio(before), ratio(after), tt.ratio)
		}
	}
}

// A quota declared beyond what half of --max-requests spends (1,200 a
// minute): the probe says what probing it takes, not "no limit found";
// and that is enough: given it, the probe names the limit.
func TestProbeDeclaredTooLarge(t *testing.T) {
	m := model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 1200, Per: time.Minute}}
	declaring := func() *simulated {
		sim := simulate(m, 1, time.Millisecond)
		decide := sim.decide
		sim.decide = func(key string, at time.Time) (bool, http.Header) {
			ok, _ := decide(key, at)
			return ok, http.Header{"Ratelimit-Policy": {`"default";q=1200;w=60`}}
		}
		return sim
	}
	c := simConfig()
	_, err := run(context.Background(), c, declaring(), nil)
	want := "the target declares 1200/min: a quota of 1200 is more than half of --max-requests 2000 spends on it; probing it takes about"
	re := regexp.MustCompile(`--max-requests (\d+) and --max-time (\S+) or more`)
	got := re.FindStringSubmatch(fmt.Sprint(err))
	if err == nil || !strings.Contains(err.Error(), want) || got == nil {
		t.Fatalf("%v; want %q ... --max-requests N and --max-time T or more", err, want)
	}
	c.MaxRequests, _ = strconv.Atoi(got[1])
	c.MaxTime, _ = time.ParseDuration(got[2])
	r, err := run(context.Background(), c, declaring(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict.Model != m.String() {
		t.Errorf("with --max-requests %d --max-time %v: %s; want %s", c.MaxRequests, c.MaxTime, r.Verdict.Text, m)
	}
}
