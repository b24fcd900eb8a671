package probe

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// simCase is a target the probe is run against in simulated time.
type simCase struct {
	m      model
	budget time.Duration // the most the probe may take
}

func simCases() []simCase {
	w := func(a limiters.Algorithm, n int, per time.Duration) model {
		return model{Algorithm: a, Limit: limiters.Limit{N: n, Per: per}}
	}
	b := func(n int, per time.Duration, burst int) model {
		return model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: n, Per: per, Burst: burst}}
	}
	with := func(m model, f func(*model)) model { f(&m); return m }
	return []simCase{
		{w(limiters.FixedWindow, 20, 2*time.Second), 60 * time.Second},
		{with(w(limiters.FixedWindow, 20, 10*time.Second), func(m *model) { m.Anchored = true }), 120 * time.Second},
		{with(w(limiters.FixedWindow, 20, 10*time.Second), func(m *model) { m.Anchored, m.CountsRefused, m.Restarts = true, true, true }), 120 * time.Second},
		{w(limiters.SlidingLog, 20, 2*time.Second), 60 * time.Second},
		{with(w(limiters.SlidingLog, 20, 10*time.Second), func(m *model) { m.CountsRefused = true }), 120 * time.Second},
		{with(w(limiters.SlidingLog, 20, 10*time.Second), func(m *model) { m.Seconds = true }), 120 * time.Second},
		{w(limiters.SlidingCounter, 20, 2*time.Second), 60 * time.Second},
		{with(w(limiters.SlidingCounter, 30, 10*time.Second), func(m *model) { m.Rounding = rounded }), 120 * time.Second},
		{with(w(limiters.SlidingCounter, 30, 10*time.Second), func(m *model) { m.Seconds = true }), 120 * time.Second},
		// Its rounds leave it tied with the counter that rounds its
		// weighted count (an experiment tells the two apart by one
		// decision, within the search's noise): named only after a round
		// more of the two, each experiment on more keys.
		{with(w(limiters.SlidingCounter, 30, 3*time.Second), func(m *model) { m.Seconds = true }), 60 * time.Second},
		{b(10, time.Second, 6), 60 * time.Second},
		{b(1, time.Second, 1), 60 * time.Second},
		{b(10, time.Second, 1), 60 * time.Second},
		{b(10, time.Second, 20), 60 * time.Second},
	}
}

// The probe, with no policy given, names each simulated target: its
// family, its quota, its rate within 2%, and a model that decides as it
// does; within the budget of requests and of time.
func TestProbeSimulated(t *testing.T) {
	for _, tt := range simCases() {
		t.Run(tt.m.String(), func(t *testing.T) {
			t.Parallel()
			sim := simulate(tt.m, 1, time.Millisecond)
			c := Config{Target: Target{URL: "http://sim/", Key: Key{Kind: "header", Name: "X-User"}}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
			var log []string
			r, err := run(context.Background(), c, sim, func(s string) { log = append(log, s) })
			for _, l := range log {
				t.Log(l)
			}
			if err != nil {
				t.Fatal(err)
			}
			v := r.Verdict
			t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, v.Text)
			for _, f := range r.Fit {
				t.Logf("  %s %s %v: %.1f%% %v", f.Algorithm, f.Limit, f.Variants, 100*f.Share, f.Wrong)
			}
			for _, u := range v.Unresolved {
				t.Logf("  unresolved: %s", u)
			}
			if !v.Named {
				t.Fatalf("no model named: %s", v.Text)
			}
			got, err := parseModel(r.Fit[0])
			if err != nil {
				t.Fatal(err)
			}
			if got.Family() != tt.m.Family() || got.quota() != tt.m.quota() || differs(got, tt.m) {
				t.Errorf("named %s, want %s", got, tt.m)
			}
			if a := agreement(got, tt.m, 1); a < 0.995 {
				t.Errorf("named %s, which decides as %s on %.1f%% of random traffic", got, tt.m, 100*a)
			}
			if r.Requests > 2000 || r.Elapsed > tt.budget.Seconds() {
				t.Errorf("%d requests in %.1fs, want within 2000 and %v", r.Requests, r.Elapsed, tt.budget)
			}
		})
	}
}

// parseModel reads a fit back into a model.
func parseModel(f Fit) (model, error) {
	l, err := limiters.ParseLimit(f.Limit)
	if err != nil {
		return model{}, err
	}
	m := model{Algorithm: f.Algorithm, Limit: l}
	vs := allVariants(f.Algorithm)
	if f.Algorithm.IsBucket() {
		vs = append(vs, model{Algorithm: f.Algorithm, Nginx: true})
	}
	for _, v := range vs {
		v.Limit = l
		if fmt.Sprint(v.variants()) == fmt.Sprint(f.Variants) {
			return v, nil
		}
	}
	return m, fmt.Errorf("no variant of %s named %v", f.Algorithm, f.Variants)
}

// Targets none of the six explains, in simulated time: one that admits
// at random, seven in ten; and two windows at once, 10 a second and 30 in
// 10 seconds. The probe names none, shows the best it found as such, and
// --expect fails on it.
func TestProbeSimulatedNone(t *testing.T) {
	two := []model{
		{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 10, Per: time.Second}},
		{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 30, Per: 10 * time.Second}},
	}
	for name, decide := range map[string]func() func(string, time.Time) bool{
		"at random": func() func(string, time.Time) bool {
			rng := rand.New(rand.NewPCG(3, 3))
			return func(string, time.Time) bool { return rng.Float64() < 0.7 }
		},
		"two limits at once": func() func(string, time.Time) bool {
			states := map[string][]state{}
			return func(key string, at time.Time) bool {
				st, ok := states[key]
				if !ok {
					st = []state{two[0].newState(), two[1].newState()}
					states[key] = st
				}
				t := at.UnixNano()
				if !st[0].admits(t, 1) || !st[1].admits(t, 1) {
					return false
				}
				st[0].admit(t, 1)
				st[1].admit(t, 1)
				return true
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sim := simulate(model{}, 1, time.Millisecond)
			d := decide()
			sim.decide = func(key string, at time.Time) (bool, http.Header) { return d(key, at), nil }
			c := Config{Target: Target{URL: "http://sim/", Key: byUser}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
			r, err := run(context.Background(), c, sim, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, r.Verdict.Text)
			if r.Verdict.Named || !strings.HasPrefix(r.Verdict.Text, "none of the six explains it: the best, ") {
				t.Errorf("verdict %+v: want none named, the best shown as such", r.Verdict)
			}
			if s := r.Strays(Expect{Limit: limiters.PerSecond(10), Tolerance: 0.02}); len(s) != 1 || !strings.HasPrefix(s[0], "none of the six explains it") {
				t.Errorf("strays %q: want --expect failed, saying none explains it", s)
			}
		})
	}
}

// A simulated target whose fields tell the truth: the probe finds them
// so. Its claim (a limit field and a wait, rounded up to whole seconds)
// agrees, the remaining quota is exact one request at a time, and each
// wait is honest, or honest but for the rounding.
func TestProbeSimulatedFields(t *testing.T) {
	for _, m := range []model{
		{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 20, Per: 2 * time.Second}, Anchored: true},
		{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 20, Per: 2 * time.Second}},
		{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 6}},
	} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			sim := honestFields(simulate(m, 2, time.Millisecond), m)
			c := Config{Target: Target{URL: "http://sim/", Key: byUser}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
			r, err := run(context.Background(), c, sim, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; claims %+v; remaining %+v; waits %+v", r.Verdict.Text, r.Claims, r.Remaining, r.RetryAfter)
			if r.Remaining.Verdict != "exact" || r.Remaining.Checked == 0 {
				t.Errorf("remaining %+v: want exact", r.Remaining)
			}
			for _, ra := range r.RetryAfter {
				if !strings.HasPrefix(ra.Verdict, "honest") {
					t.Errorf("Retry-After %+v: want honest", ra)
				}
			}
		})
	}
}

// A window too long for --max-time: the probe says what it found and
// that it could not settle it, and names no model.
func TestProbeSimulatedLongWindow(t *testing.T) {
	m := model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 5, Per: time.Hour}}
	sim := simulate(m, 1, time.Millisecond)
	c := Config{Target: Target{URL: "http://sim/", Key: byUser}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := run(context.Background(), c, sim, nil)
	if err == nil || !strings.Contains(err.Error(), "a quota of 5 at once, then nothing admitted again in 5") || !strings.Contains(err.Error(), "half of --max-time 2m0s") || !strings.Contains(err.Error(), "--max-time 7m0s or more") {
		t.Fatalf("a window of an hour: %v, want it said unsettled within --max-time, with the quota found", err)
	}
	t.Logf("%d requests in %.0fs: %v", r.Requests, r.Elapsed, err)
	if r.Verdict.Named || r.Requests > 200 || r.Elapsed > 70 {
		t.Errorf("%d requests in %.0fs, verdict %+v: want none named, in at most half of --max-time and 200 requests", r.Requests, r.Elapsed, r.Verdict)
	}
}

// A fresh key's rounds that straddle a window's edge get more than the
// quota (a fixed window of 20/s gave 40 on a busy host, its rounds
// 0.8s long): the quiet keys, each spent at once, say the quota, and the
// fingerprint is planned for it.
func TestProbeSimulatedStraddle(t *testing.T) {
	m := model{Algorithm: limiters.FixedWindow, Limit: limiters.PerSecond(20)}
	sim := simulate(m, 1, 3*time.Millisecond)
	sim.clock = time.Unix(1_800_000_000, 990_000_000) // 10ms before a window's edge
	c := Config{Target: Target{URL: "http://sim/", Key: byUser}, Seed: 1, Timeout: time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	var log []string
	r, err := run(context.Background(), c, sim, func(s string) { log = append(log, s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range log {
		t.Log(l)
	}
	said := strings.Join(log, "\n")
	if !strings.Contains(said, "the first key's rounds straddled a refill; the quota is 20") {
		t.Errorf("the calibration said nothing of the straddle: want the quiet keys' 20 taken")
	}
	if r.Calibration.Quota != 20 || r.planned.N != 20 {
		t.Errorf("calibrated %d, the fingerprint planned for %v: want 20, and 20/s", r.Calibration.Quota, r.planned)
	}
	if got, err := parseModel(r.Fit[0]); err != nil || !r.Verdict.Named || got.String() != m.String() {
		t.Errorf("named %v (%s), want %s", got, r.Verdict.Text, m)
	}
}

// Limiters that delay, in simulated time: a bucket with a queue, b at
// once and q more held and released one every 1/r, refused beyond, as
// nginx's limit_req without nodelay (burst=10 at 5r/s: 1 at once, 10
// held), with delay= (burst=12 delay=8 at 10r/s: 9 at once, 4 held), and
// a handler waiting on rate.Limiter.Wait (4/s burst 4, a deadline of a
// second: 4 at once, 4 held), and others. The probe names each as a
// bucket with a queue, its rate within 2%, what it admits at once and
// holds exactly, and the held answers on the schedule it says.
func TestProbeSimulatedQueue(t *testing.T) {
	for _, tt := range []struct {
		name string
		T    time.Duration
		b, q int
	}{
		{"nginx 5r/s burst=10", 200 * time.Millisecond, 1, 10},
		{"nginx 10r/s burst=12 delay=8", 100 * time.Millisecond, 9, 4},
		{"Wait 4/s burst 4, 1s", 250 * time.Millisecond, 4, 4},
		{"nginx 20r/s burst=30", 50 * time.Millisecond, 1, 30},
		{"nginx 2r/s burst=10 delay=4", 500 * time.Millisecond, 5, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runLogged(t, queued(tt.T, tt.b, tt.q, 1, 2*time.Millisecond), 2*time.Minute, 0)
			q := r.Queue
			if !r.Verdict.Named || q == nil {
				t.Fatalf("verdict %q, queue %+v: want a bucket with a queue named", r.Verdict.Text, q)
			}
			if q.AtOnce != tt.b || q.Held != tt.q || math.Abs(float64(q.Interval-tt.T)) > 0.02*float64(tt.T) {
				t.Errorf("queue %d at once, %d held, one every %v; want %d, %d, %v", q.AtOnce, q.Held, q.Interval, tt.b, tt.q, tt.T)
			}
			if q.Checked == 0 || float64(q.OnSchedule) < 0.9*float64(q.Checked) {
				t.Errorf("%d of %d held answers on the schedule; want 90%% or more", q.OnSchedule, q.Checked)
			}
		})
	}
}

// Two limits at once, in simulated time, as ratelab serve's tier of a
// second's and a minute's sliding logs, and nginx's two zones on one
// location (a bucket of 5/s burst 5 and one of 40 a minute, 40 at once;
// the plan's pair, 47/s and 299/min, on nginx's clock), and a bucket
// beside an hourly log that the target declares (Kong's fields): each
// named with both, each within 2%.
func TestProbeSimulatedTwoLimits(t *testing.T) {
	for _, tt := range []struct {
		name    string
		m       model
		declare http.Header
	}{
		{"nginx's zones 47/s and 299/min, on its clock", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 47, Per: time.Second, Burst: 47}, Also: limiters.Limit{N: 299, Per: time.Minute, Burst: 299}, Nginx: true}, nil},
		{"a bucket 10/s burst 10 and a sliding log 1000/h, declared", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 10}, Also: limiters.Limit{N: 1000, Per: time.Hour}, AlsoAlgorithm: limiters.SlidingLog},
			http.Header{"X-Ratelimit-Limit-Second": {"10"}, "X-Ratelimit-Limit-Hour": {"1000"}}},
		{"sliding logs 5/s and 40/min", model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 5, Per: time.Second}, Also: limiters.Limit{N: 40, Per: time.Minute}}, nil},
		{"buckets 5/s burst 5 and 40/min burst 40", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 5, Per: time.Second, Burst: 5}, Also: limiters.Limit{N: 40, Per: time.Minute, Burst: 40}}, nil},
		{"a fixed window 10/s and another of 30/10s", model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 10, Per: time.Second}, Also: limiters.Limit{N: 30, Per: 10 * time.Second}}, nil},
		{"one limit, 20/2s", model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 20, Per: 2 * time.Second}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := simulate(tt.m, 1, 2*time.Millisecond)
			if tt.declare != nil {
				decide := sim.decide
				sim.decide = func(key string, at time.Time) (bool, http.Header) {
					ok, _ := decide(key, at)
					return ok, tt.declare.Clone()
				}
			}
			r := runLogged(t, sim, 3*time.Minute, time.Minute)
			if _, two := tt.m.second(); !two {
				if !r.Verdict.Named || r.Longer == nil || r.Longer.Second != "" || !strings.HasPrefix(r.Longer.Looked, "no second limit up to ") {
					t.Errorf("verdict %q, longer %+v: want one limit named, and how far it looked for a second", r.Verdict.Text, r.Longer)
				}
				return
			}
			if !r.Verdict.Named || r.Longer == nil || r.Longer.Second == "" {
				t.Fatalf("verdict %q, longer %+v: want both limits named", r.Verdict.Text, r.Longer)
			}
			got, err := parseModelString(r.Longer.Second)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tt.m.second()
			if got.Family() != want.Family() && !slices.ContainsFunc(r.Verdict.Unresolved, func(u string) bool { return strings.Contains(u, want.Family()) }) {
				// Within the hour it ran, an hourly log and an hourly
				// window on the epoch decide alike: either, the other
				// said to explain as much.
				t.Errorf("second limit %s, want %s, or it among those that explain as many: %q", got, want, r.Verdict.Unresolved)
			}
			want.Algorithm = got.Algorithm
			if math.Abs(float64(got.Limit.Quota()-want.Limit.Quota())) > 0.02*float64(want.Limit.Quota()) || differs(got, want) {
				t.Errorf("second limit %s, want %s", got, want)
			}
		})
	}
}

// runLogged probes sim with no hint within most, looking for a second
// limit for up to look, and logs what the probe said.
func runLogged(t *testing.T, sim *simulated, most, look time.Duration) *Report {
	t.Helper()
	c := Config{Target: Target{URL: "http://sim/", Key: byUser}, Seed: 1, Timeout: 5 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: most, Look: look}
	var said []string
	r, err := run(context.Background(), c, sim, func(s string) { said = append(said, s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, r.Verdict.Text)
	for _, s := range said {
		t.Log(s)
	}
	return r
}
