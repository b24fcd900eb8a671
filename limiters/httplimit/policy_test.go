package httplimit_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/tiers"
)

func newComposite(t testing.TB, a limiters.Algorithm, limits ...limiters.Limit) *composite.Limiter {
	t.Helper()
	l, err := composite.New(a, limits, limiters.WithClock(stopped(t0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A composite gets one policy per limit, and one RateLimit item: the
// decision's, named after the limit of least room. A denial names only
// the limits that denied.
//
// Was one RateLimit item per limit (r=1,2,49 and t=30,1200,1 for request
// 1): a decision no longer carries each limit's own remaining (it cost a
// quarter of a hot key's decision), so the item is the combined quota's,
// as it was already for tiers: its t is the longest ResetAfter, at most
// its limit's window (and the Retry-After).
func TestComposite(t *testing.T) {
	l := newComposite(t, limiters.GCRA,
		limiters.Limit{Name: "burst", N: 2, Per: time.Minute},
		limiters.Limit{N: 3, Per: time.Hour},
		limiters.Limit{N: 10, Per: time.Second, Burst: 50})
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User")).Wrap(ok)
	wantPolicy := `"burst";q=2;w=60, "3/h";q=3;w=3600, "10/s burst 50";q=50;w=5`
	for i, step := range []struct {
		status   int
		item     string
		retry    int64 // -1 for none
		violated []string
	}{
		// GCRA at one instant: the burst has the least room; the longest
		// ResetAfter is the hourly limit's (1200s a request), cut to the
		// burst's window.
		{200, `"burst";r=1;t=60`, -1, nil},
		{200, `"burst";r=0;t=60`, -1, nil},
		// The burst is spent: retry when one of its two comes back, 30s;
		// the item's window ends no later.
		{429, `"burst";r=0;t=30`, 30, []string{"burst"}},
	} {
		w := serve(h, "alice")
		if w.Code != step.status {
			t.Fatalf("request %d: %d, want %d", i+1, w.Code, step.status)
		}
		if got := w.Header().Get(httplimit.HeaderRateLimitPolicy); got != wantPolicy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, wantPolicy)
		}
		policies, limits := draft(t, w.Header())
		if len(policies) != 3 || len(limits) != 1 {
			t.Fatalf("request %d: %d policies and %d limits, want 3 and 1", i+1, len(policies), len(limits))
		}
		if got := w.Header().Get(httplimit.HeaderRateLimit); got != step.item {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, step.item)
		}
		if step.retry >= 0 {
			if got := seconds(t, w.Header(), httplimit.HeaderRetryAfter); got != step.retry {
				t.Errorf("request %d: Retry-After %d, want %d", i+1, got, step.retry)
			}
			if p := readProblem(t, w.Header(), w.Body.Bytes()); !slices.Equal(p.Violated, step.violated) {
				t.Errorf("request %d: violated-policies %q, want %q", i+1, p.Violated, step.violated)
			}
		}
	}
}

// Limits denied together are all named.
func TestCompositeViolatedPolicies(t *testing.T) {
	l := newComposite(t, limiters.SlidingLog, limiters.PerMinute(1), limiters.PerMinute(5), limiters.PerHour(1))
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User")).Wrap(ok)
	serve(h, "alice")
	w := serve(h, "alice")
	if w.Code != 429 {
		t.Fatalf("request 2: %d, want 429", w.Code)
	}
	if p := readProblem(t, w.Header(), w.Body.Bytes()); !slices.Equal(p.Violated, []string{"1/min", "1/h"}) {
		t.Errorf("violated-policies %q, want [1/min 1/h]", p.Violated)
	}
	if got := seconds(t, w.Header(), httplimit.HeaderRetryAfter); got != 3600 {
		t.Errorf("Retry-After %d, want 3600: when both admit again", got)
	}
}

// Tiers: each user's limits in RateLimit-Policy, and one RateLimit item,
// the decision's.
func TestTiers(t *testing.T) {
	l, err := tiers.New(tiers.Config{
		Algorithm: limiters.SlidingLog,
		Tiers: map[string][]limiters.Limit{
			"free": {limiters.PerMinute(2), {Name: "hourly", N: 5, Per: time.Hour}},
			"pro":  {limiters.PerMinute(100)},
		},
		Default: "free",
		Users:   map[string]string{"alice": "pro"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User")).Wrap(ok)
	for _, c := range []struct {
		user, policy, limit string
	}{
		{"bob", `"2/min";q=2;w=60, "hourly";q=5;w=3600`, `"2/min";r=1;t=60`},
		{"alice", `"100/min";q=100;w=60`, `"100/min";r=99;t=60`},
		{"bob", `"2/min";q=2;w=60, "hourly";q=5;w=3600`, `"2/min";r=0;t=60`}, // back to bob's tier
	} {
		w := serve(h, c.user)
		if got := w.Header().Get(httplimit.HeaderRateLimitPolicy); got != c.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", c.user, got, c.policy)
		}
		if got := w.Header().Get(httplimit.HeaderRateLimit); got != c.limit {
			t.Errorf("%s: RateLimit %q, want %q", c.user, got, c.limit)
		}
		draft(t, w.Header())
	}
	w := serve(h, "bob")
	if p := readProblem(t, w.Header(), w.Body.Bytes()); w.Code != 429 || !slices.Equal(p.Violated, []string{"2/min"}) {
		t.Errorf("bob's third request: %d, violated-policies %q, want 429 and [2/min]", w.Code, p.Violated)
	}
}

// A single limiter says its limit: q and w from its parameters, the name
// its own. (Was "default" for every single limiter, and names set with
// WithPolicies: the limiter names its limit now, its rate when the limit
// has no name, and the names are the limits'.)
func TestSinglePolicy(t *testing.T) {
	newGCRA := func(l limiters.Limit) limiters.Limiter {
		g, err := gcra.New(l)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	for _, c := range []struct {
		l    limiters.Limiter
		want string
	}{
		{newSlidingLog(t, 100, time.Minute), `"100/min";q=100;w=60`},
		{newGCRA(limiters.Limit{N: 10, Per: time.Second, Burst: 20}), `"10/s burst 20";q=20;w=2`},
		{newSlidingLog(t, 5, 500*time.Millisecond), `"5/500ms";q=5`}, // no sub-second w
		{newGCRA(limiters.Limit{Name: `api "v1"`, N: 10, Per: time.Second, Burst: 20}), `"api \"v1\"";q=20;w=2`},
		{newGCRA(limiters.Limit{Name: "naïve", N: 10, Per: time.Second, Burst: 20}), `"na??ve";q=20;w=2`}, // a String holds ASCII only
		{fixed(allowAll), `"default";q=100`},
	} {
		w := serve(newMiddleware(t, c.l, httplimit.WithHeaderKey("X-User")).Wrap(ok), "alice")
		if got := w.Header().Get(httplimit.HeaderRateLimitPolicy); got != c.want {
			t.Errorf("%T: RateLimit-Policy %q, want %q", c.l, got, c.want)
		}
		draft(t, w.Header())
	}
}

// The item is named after the first limit of the decision's quota, else
// the first limit. (Was stated with WithPolicies for a limiter that could
// not name its limits; the decision's Policy names them now.)
func TestPoliciesPick(t *testing.T) {
	policy := limiters.NewPolicy(limiters.Limit{Name: "second", N: 10, Per: time.Second}, limiters.Limit{Name: "hour", N: 1000, Per: time.Hour})
	var d limiters.Decision
	h := newMiddleware(t, current(&d), httplimit.WithHeaderKey("X-User")).Wrap(ok)
	for _, c := range []struct {
		d    limiters.Decision
		want string
	}{
		{limiters.Decision{Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: time.Hour}, `"hour";r=3;t=3600`},
		{limiters.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}, `"second";r=9;t=1`},
		{limiters.Decision{Allowed: true, Limit: 7, Remaining: 1}, `"second";r=1;t=0`},
	} {
		d = c.d
		d.Policy = policy
		if got := serve(h, "alice").Header().Get(httplimit.HeaderRateLimit); got != c.want {
			t.Errorf("decision %+v: RateLimit %q, want %q", c.d, got, c.want)
		}
	}
	// A denial that does not say which limit denied names the item's.
	d = limiters.Decision{Limit: 1000, RetryAfter: time.Minute, ResetAfter: time.Hour, Policy: policy}
	w := serve(h, "alice")
	if p := readProblem(t, w.Header(), w.Body.Bytes()); w.Code != 429 || !slices.Equal(p.Violated, []string{"hour"}) {
		t.Errorf("a denial without Denied: %d, violated-policies %q, want 429 and [hour]", w.Code, p.Violated)
	}
}

// logged is a user's decorator: it logs each decision and forwards
// Decide, nothing else.
type logged struct {
	l   limiters.Limiter
	log []string
}

func (g *logged) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	d, err := g.l.Decide(ctx, r)
	g.log = append(g.log, r.Key)
	return d, err
}

func (g *logged) Close() error { return g.l.Close() }

func (g *logged) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return g.Decide(ctx, limiters.Request{Key: key, N: n})
}

// A limiter wrapped in a decorator gets exactly the headers and bodies it
// gets unwrapped: the middleware reads the Decision, not the limiter's
// type.
func TestDecorated(t *testing.T) {
	limits := []limiters.Limit{{Name: "burst", N: 2, Per: time.Minute}, limiters.PerHour(3), {N: 10, Per: time.Second, Burst: 50}}
	plain := newMiddleware(t, newComposite(t, limiters.GCRA, limits...), httplimit.WithHeaderKey("X-User")).Wrap(ok)
	dec := &logged{l: newComposite(t, limiters.GCRA, limits...)}
	wrapped := newMiddleware(t, dec, httplimit.WithHeaderKey("X-User")).Wrap(ok)
	codes := map[int]int{}
	for i := range 4 {
		want, got := serve(plain, "alice"), serve(wrapped, "alice")
		codes[got.Code]++
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("request %d: decorated %d %q, want %d %q", i+1, got.Code, got.Body, want.Code, want.Body)
		}
		if g, w := got.Header(), want.Header(); !equalHeaders(g, w) {
			t.Errorf("request %d: decorated header %v, want %v", i+1, g, w)
		}
	}
	if codes[http.StatusOK] != 2 || codes[http.StatusTooManyRequests] != 2 || len(dec.log) != 4 {
		t.Errorf("statuses %v, %d logged: want 2 served, 2 denied, 4 logged", codes, len(dec.log))
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
