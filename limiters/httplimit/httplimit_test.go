package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// A real server on loopback: 200, 200, then 429 with a Retry-After that,
// waited, is enough to be served again.
func TestServer(t *testing.T) {
	// Two a second, exactly (the sliding log): the test fails only if
	// three requests over loopback take a whole second.
	l := newSlidingLog(t, 2, time.Second)
	var denied atomic.Int64 // the denial's RetryAfter
	m := newMiddleware(t, l, WithHooks(Hooks{Denied: func(_ *http.Request, _ string, d limiters.Decision) {
		denied.Store(int64(d.RetryAfter))
	}}))
	srv := httptest.NewServer(m.Wrap(ok))
	defer srv.Close()
	get := func(step string, want int) *http.Response {
		t.Helper()
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", step, res.StatusCode, body, want)
		}
		return res
	}
	get("request 1", 200)
	res := get("request 2", 200)
	if got := integer(t, res.Header, HeaderRemaining); got != 0 {
		t.Errorf("request 2: %s = %d, want 0", HeaderRemaining, got)
	}
	res = get("request 3, the quota spent", 429)
	retry := seconds(t, res.Header, HeaderRetryAfter)
	if real := time.Duration(denied.Load()); real <= 0 || time.Duration(retry)*time.Second < real {
		t.Fatalf("request 3: Retry-After %d, earlier than the decision's RetryAfter %v", retry, real)
	}
	time.Sleep(time.Duration(retry) * time.Second) // as a client that honours Retry-After
	get("request 4, after Retry-After", 200)
}

// A limiter whose backend fails: the configured failure mode, counted and
// reported, whatever Decision came with the error.
func TestLimiterFailure(t *testing.T) {
	down := errors.New("backend down")
	for _, c := range []struct {
		mode   FailureMode
		d      limiters.Decision // what the broken limiter returns with its error
		status int
	}{
		{FailOpen, limiters.Decision{}, 200},                // the default: a denial with the error is not followed
		{FailClosed, limiters.Decision{Allowed: true}, 503}, // nor an admission
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			broken := decideFunc(func(context.Context, string, int) (limiters.Decision, error) { return c.d, down })
			var got []error
			opts := []Option{WithHooks(Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }})}
			if c.mode == FailClosed {
				opts = append(opts, WithLimiterFailure(FailClosed))
			}
			m := newMiddleware(t, broken, opts...)
			w := serve(m.Wrap(ok), "")
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			for _, h := range []string{HeaderLimit, HeaderRemaining, HeaderReset, HeaderRateLimit, HeaderRateLimitPolicy} {
				if v := w.Header().Get(h); v != "" {
					t.Errorf("%s: %q on a request the limiter did not decide", h, v)
				}
			}
			if s := m.Stats(); s.LimiterErrors != 1 || s.KeyErrors != 0 {
				t.Errorf("Stats() = %+v, want one limiter error", s)
			}
			if len(got) != 1 || !errors.Is(got[0], ErrLimiter) || !errors.Is(got[0], down) {
				t.Errorf("the Error hook got %v, want one error wrapping ErrLimiter and the backend's", got)
			}
			if c.status == 503 {
				p := readProblem(t, w.Header(), w.Body.Bytes())
				if p.Type != "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity" || p.Status != 503 {
					t.Errorf("problem %+v, want temporary-reduced-capacity", p)
				}
				if got := seconds(t, w.Header(), HeaderRetryAfter); got != 1 {
					t.Errorf("Retry-After %d, want 1", got)
				}
			} else if w.Body.String() != "ok" {
				t.Errorf("body %q, want the handler's", w.Body)
			}
		})
	}
}

// A request without a key, or whose cost cannot be computed, is refused
// by default and served when the key failure mode is FailOpen; the
// limiter is not asked either way.
func TestKeyFailure(t *testing.T) {
	failingCost := func(*http.Request) (int, error) { return 0, errors.New("no cost") }
	zeroCost := func(*http.Request) (int, error) { return 0, nil }
	for _, c := range []struct {
		name   string
		opts   []Option
		status int
	}{
		{"no key, by default", nil, 400},
		{"no key, fail open", []Option{WithKeyFailure(FailOpen)}, 200},
		{"a cost that fails", []Option{WithCost(failingCost)}, 400},
		{"a cost below 1", []Option{WithCost(zeroCost)}, 400},
		{"a cost below 1, fail open", []Option{WithCost(zeroCost), WithKeyFailure(FailOpen)}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked atomic.Int64
			l := decideFunc(func(context.Context, string, int) (limiters.Decision, error) {
				asked.Add(1)
				return allowAll, nil
			})
			var got []error
			key := "alice"
			if strings.HasPrefix(c.name, "no key") {
				key = ""
			}
			opts := append([]Option{WithHeaderKey("X-User"), WithHooks(Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }})}, c.opts...)
			m := newMiddleware(t, l, opts...)
			w := serve(m.Wrap(ok), key)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			if asked.Load() != 0 {
				t.Errorf("the limiter was asked %d times, want 0", asked.Load())
			}
			if s := m.Stats(); s.KeyErrors != 1 || s.LimiterErrors != 0 {
				t.Errorf("Stats() = %+v, want one key error", s)
			}
			if len(got) != 1 || !errors.Is(got[0], ErrKey) {
				t.Errorf("the Error hook got %v, want one error wrapping ErrKey", got)
			}
			if c.status == 400 {
				if p := readProblem(t, w.Header(), w.Body.Bytes()); p.Status != 400 {
					t.Errorf("problem %+v, want status 400", p)
				}
			}
		})
	}
}

// Shadow mode serves what it would deny, with the decision's headers, and
// counts it.
func TestShadow(t *testing.T) {
	l := newSlidingLog(t, 1, time.Hour)
	var denials, admissions int
	m := newMiddleware(t, l, WithShadow(), WithHeaderKey("X-User"), WithHooks(Hooks{
		Allowed: func(*http.Request, string, limiters.Decision) { admissions++ },
		Denied:  func(*http.Request, string, limiters.Decision) { denials++ },
	}))
	h := m.Wrap(ok)
	for i := range 4 {
		w := serve(h, "alice")
		if w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d in shadow mode: %d %q, want 200 ok", i+1, w.Code, w.Body)
		}
		if v := w.Header().Get(HeaderRetryAfter); v != "" {
			t.Errorf("request %d in shadow mode: Retry-After %q", i+1, v)
		}
		_, limits := draft(t, w.Header())
		if got := limits[0].params["r"]; got != 0 {
			t.Errorf("request %d: RateLimit r=%d, want 0 (the quota of 1 is spent)", i+1, got)
		}
	}
	if s := m.Stats(); s.ShadowDenied != 3 {
		t.Errorf("Stats().ShadowDenied = %d, want 3", s.ShadowDenied)
	}
	if denials != 3 || admissions != 1 {
		t.Errorf("hooks: %d denied, %d allowed, want 3 and 1", denials, admissions)
	}
	// Shadow denials consume nothing: alice's quota is as her one
	// admitted request left it.
	if d := l.PeekAt("alice", time.Now()); d.Remaining != 0 || d.Allowed {
		t.Errorf("alice after shadow denials: %+v, want her one request's worth spent", d)
	}
}

// A composite gets one policy and one RateLimit item per limit, and a
// denial names only the limits that denied.
func TestComposite(t *testing.T) {
	burst := limiters.Rate{N: 2, Per: time.Minute}
	hourly := limiters.Rate{N: 3, Per: time.Hour}
	bucket := limiters.Rate{N: 10, Per: time.Second, Burst: 50}
	l, err := composite.New(limiters.GCRA, []composite.Limit{{Name: "burst", Rate: burst}, {Rate: hourly}, {Rate: bucket}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := newMiddleware(t, l, WithHeaderKey("X-User"), WithClock(stopped(t0)))
	h := m.Wrap(ok)
	wantPolicy := `"burst";q=2;w=60, "3/h";q=3;w=3600, "10/s burst 50";q=50;w=5`
	for i, step := range []struct {
		status   int
		r        [3]int64
		t        [3]int64
		retry    int64 // -1 for none
		violated []string
	}{
		// GCRA at one instant: each limit's quota is its capacity, and
		// the time to full is what the requests so far cost.
		{200, [3]int64{1, 2, 49}, [3]int64{30, 1200, 1}, -1, nil},
		{200, [3]int64{0, 1, 48}, [3]int64{60, 2400, 1}, -1, nil},
		// The burst is spent: retry when one of its two comes back, 30s;
		// no item's window ends after that.
		{429, [3]int64{0, 1, 48}, [3]int64{30, 30, 1}, 30, []string{"burst"}},
	} {
		w := serve(h, "alice")
		if w.Code != step.status {
			t.Fatalf("request %d: %d, want %d", i+1, w.Code, step.status)
		}
		if got := w.Header().Get(HeaderRateLimitPolicy); got != wantPolicy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, wantPolicy)
		}
		policies, limits := draft(t, w.Header())
		if len(policies) != 3 || len(limits) != 3 {
			t.Fatalf("request %d: %d policies and %d limits, want 3 of each", i+1, len(policies), len(limits))
		}
		for j, it := range limits {
			if it.name != policies[j].name || it.params["r"] != step.r[j] || it.params["t"] != step.t[j] {
				t.Errorf("request %d: RateLimit item %d = %q;r=%d;t=%d, want %q;r=%d;t=%d", i+1, j,
					it.name, it.params["r"], it.params["t"], policies[j].name, step.r[j], step.t[j])
			}
		}
		if step.retry >= 0 {
			if got := seconds(t, w.Header(), HeaderRetryAfter); got != step.retry {
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
	l, err := composite.New(limiters.SlidingLog, []composite.Limit{
		{Rate: limiters.Rate{N: 1, Per: time.Minute}}, {Rate: limiters.Rate{N: 5, Per: time.Minute}}, {Rate: limiters.Rate{N: 1, Per: time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := newMiddleware(t, l, WithHeaderKey("X-User"), WithClock(stopped(t0))).Wrap(ok)
	serve(h, "alice")
	w := serve(h, "alice")
	if w.Code != 429 {
		t.Fatalf("request 2: %d, want 429", w.Code)
	}
	if p := readProblem(t, w.Header(), w.Body.Bytes()); !slices.Equal(p.Violated, []string{"1/min", "1/h"}) {
		t.Errorf("violated-policies %q, want [1/min 1/h]", p.Violated)
	}
	if got := seconds(t, w.Header(), HeaderRetryAfter); got != 3600 {
		t.Errorf("Retry-After %d, want 3600: when both admit again", got)
	}
}

// Tiers: each user's limits in RateLimit-Policy, and one RateLimit item,
// the decision's.
func TestTiers(t *testing.T) {
	l, err := tiers.New(tiers.Config{
		Algorithm: limiters.SlidingLog,
		Tiers: map[string][]composite.Limit{
			"free": {{Rate: limiters.Rate{N: 2, Per: time.Minute}}, {Name: "hourly", Rate: limiters.Rate{N: 5, Per: time.Hour}}},
			"pro":  {{Rate: limiters.Rate{N: 100, Per: time.Minute}}},
		},
		Default: "free",
		Users:   map[string]string{"alice": "pro"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := newMiddleware(t, l, WithHeaderKey("X-User")).Wrap(ok)
	for _, c := range []struct {
		user, policy, limit string
	}{
		{"bob", `"2/min";q=2;w=60, "hourly";q=5;w=3600`, `"2/min";r=1;t=60`},
		{"alice", `"100/min";q=100;w=60`, `"100/min";r=99;t=60`},
	} {
		w := serve(h, c.user)
		if got := w.Header().Get(HeaderRateLimitPolicy); got != c.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", c.user, got, c.policy)
		}
		if got := w.Header().Get(HeaderRateLimit); got != c.limit {
			t.Errorf("%s: RateLimit %q, want %q", c.user, got, c.limit)
		}
		draft(t, w.Header())
	}
	serve(h, "bob")
	w := serve(h, "bob")
	if p := readProblem(t, w.Header(), w.Body.Bytes()); w.Code != 429 || !slices.Equal(p.Violated, []string{"2/min"}) {
		t.Errorf("bob's third request: %d, violated-policies %q, want 429 and [2/min]", w.Code, p.Violated)
	}
}

// A single limiter says its limit: q and w from its parameters.
func TestSinglePolicy(t *testing.T) {
	b, err := gcra.New(limiters.Bucket{Capacity: 20, Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct {
		l    limiters.Limiter
		opts []Option
		want string
	}{
		{newSlidingLog(t, 100, time.Minute), nil, `"default";q=100;w=60`},
		{b, nil, `"default";q=20;w=2`},
		{newSlidingLog(t, 5, 500*time.Millisecond), nil, `"default";q=5`}, // no sub-second w
		{b, []Option{WithPolicies(Policy{Name: "api \"v1\"", Quota: 20, Window: 2 * time.Second})}, `"api \"v1\"";q=20;w=2`},
		{b, []Option{WithPolicies(Policy{Name: "naïve", Quota: 20})}, `"na??ve";q=20`}, // a String holds ASCII only
		{fixed(allowAll), nil, `"default";q=100`},
	} {
		w := serve(newMiddleware(t, c.l, append([]Option{WithHeaderKey("X-User")}, c.opts...)...).Wrap(ok), "alice")
		if got := w.Header().Get(HeaderRateLimitPolicy); got != c.want {
			t.Errorf("%T %v: RateLimit-Policy %q, want %q", c.l, c.opts, got, c.want)
		}
		draft(t, w.Header())
	}
}

// WithPolicies on a limiter that cannot name its limits (a Redis
// composite): the item is named after the policy of the decision's quota.
func TestPoliciesPick(t *testing.T) {
	var d limiters.Decision
	h := newMiddleware(t, current(&d), WithHeaderKey("X-User"), WithPolicies(
		Policy{Name: "second", Quota: 10, Window: time.Second}, Policy{Name: "hour", Quota: 1000, Window: time.Hour},
	)).Wrap(ok)
	for _, c := range []struct {
		d    limiters.Decision
		want string
	}{
		{limiters.Decision{Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: time.Hour}, `"hour";r=3;t=3600`},
		{limiters.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}, `"second";r=9;t=1`},
		{limiters.Decision{Allowed: true, Limit: 7, Remaining: 1}, `"second";r=1;t=0`},
	} {
		d = c.d
		if got := serve(h, "alice").Header().Get(HeaderRateLimit); got != c.want {
			t.Errorf("decision %+v: RateLimit %q, want %q", c.d, got, c.want)
		}
	}
}

func TestHeadersOption(t *testing.T) {
	for _, c := range []struct {
		h              Headers
		legacy, iDraft bool
	}{{AllHeaders, true, true}, {LegacyHeaders, true, false}, {DraftHeaders, false, true}, {NoHeaders, false, false}} {
		deny := limiters.Decision{Limit: 1, RetryAfter: 1500 * time.Millisecond, ResetAfter: 2 * time.Second}
		for _, d := range []limiters.Decision{allowAll, deny} {
			w := serve(newMiddleware(t, fixed(d), WithHeaderKey("X-User"), WithHeaders(c.h)).Wrap(ok), "alice")
			hdr := w.Header()
			if _, got := hdr[keyLimit]; got != c.legacy {
				t.Errorf("WithHeaders(%b), decision %+v: legacy fields %v, want %v", c.h, d, got, c.legacy)
			}
			if _, got := hdr[keyRateLimit]; got != c.iDraft {
				t.Errorf("WithHeaders(%b), decision %+v: draft fields %v, want %v", c.h, d, got, c.iDraft)
			}
			if !d.Allowed {
				if got := seconds(t, hdr, HeaderRetryAfter); got != 2 {
					t.Errorf("WithHeaders(%b): Retry-After %d, want 2 whatever the headers chosen", c.h, got)
				}
				if p := readProblem(t, hdr, w.Body.Bytes()); !slices.Equal(p.Violated, []string{DefaultPolicy}) {
					t.Errorf("WithHeaders(%b): violated-policies %q", c.h, p.Violated)
				}
			}
		}
	}
}

// A cost above the limit is never admitted: 429 without Retry-After, and a
// problem that says so.
func TestNever(t *testing.T) {
	l := newSlidingLog(t, 3, time.Minute)
	h := newMiddleware(t, l, WithHeaderKey("X-User"), WithCost(func(*http.Request) (int, error) { return 5, nil })).Wrap(ok)
	w := serve(h, "alice")
	if w.Code != 429 {
		t.Fatalf("a cost of 5 against a limit of 3: %d, want 429", w.Code)
	}
	if v, has := w.Header()[keyRetryAfter]; has {
		t.Errorf("Retry-After %q for a request never admitted", v)
	}
	if p := readProblem(t, w.Header(), w.Body.Bytes()); !strings.Contains(p.Detail, "never") {
		t.Errorf("detail %q, want it to say the request will never be admitted", p.Detail)
	}
	draft(t, w.Header())
}

func TestHooks(t *testing.T) {
	l := newSlidingLog(t, 1, time.Hour)
	var events []string
	var took []time.Duration
	note := func(s string) { events = append(events, s) }
	h := newMiddleware(t, l, WithHeaderKey("X-User"), WithHooks(Hooks{
		Allowed: func(_ *http.Request, key string, d limiters.Decision) { note("allowed " + key) },
		Denied:  func(_ *http.Request, key string, d limiters.Decision) { note("denied " + key) },
		Latency: func(_ *http.Request, d time.Duration) { took = append(took, d) },
	})).Wrap(ok)
	serve(h, "alice")
	serve(h, "alice")
	serve(h, "")
	if want := []string{"allowed alice", "denied alice"}; !slices.Equal(events, want) {
		t.Errorf("hooks saw %q, want %q", events, want)
	}
	if len(took) != 2 || took[0] < 0 || took[1] < 0 {
		t.Errorf("Latency hook got %v, want two non-negative durations (none for a request without a key)", took)
	}
}

func TestNewErrors(t *testing.T) {
	l, err := composite.New(limiters.SlidingLog, []composite.Limit{{Rate: limiters.Rate{N: 1, Per: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tl, err := tiers.New(tiers.Config{Algorithm: limiters.GCRA, Tiers: map[string][]composite.Limit{"t": {{Rate: limiters.Rate{N: 1, Per: time.Second}}}}, Default: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	for _, c := range []struct {
		l    limiters.Limiter
		opts []Option
		want string
	}{
		{nil, nil, "no limiter"},
		{fixed(allowAll), []Option{WithKey(nil)}, "WithKey(nil)"},
		{fixed(allowAll), []Option{WithHeaderKey("")}, `"" is not a header name`},
		{fixed(allowAll), []Option{WithHeaders(8)}, "headers 0x8"},
		{fixed(allowAll), []Option{WithKeyFailure(7)}, "key failure mode FailureMode(7)"},
		{fixed(allowAll), []Option{WithLimiterFailure(-1)}, "limiter failure mode FailureMode(-1)"},
		{fixed(allowAll), []Option{WithPolicies()}, "no policy"},
		{fixed(allowAll), []Option{WithPolicies(Policy{Quota: 1})}, "policy 1 has no name"},
		{fixed(allowAll), []Option{WithPolicies(Policy{Name: "a"}, Policy{Name: "a"})}, `policies 1 and 2 are both named "a"`},
		{fixed(allowAll), []Option{WithPolicies(Policy{Name: "a", Quota: -1})}, `policy "a": quota -1`},
		{l, []Option{WithPolicies(Policy{Name: "a"}, Policy{Name: "b"})}, "2 policies for a limiter of 1 limits"},
		{tl, []Option{WithPolicies(Policy{Name: "a"})}, "per key"},
	} {
		_, err := New(c.l, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%T, %d options) = %v, want an error saying %s", c.l, len(c.opts), err, c.want)
		}
	}
}

// The hot path, proved: a decision with every header costs no allocation
// of its own (the values are cut from slabs, one allocated every forty
// responses or so), a denial none either, and a key from the client's
// address one (its string).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it holds")
	}
	deny := limiters.Decision{Limit: 100, RetryAfter: time.Second, ResetAfter: time.Minute}
	for _, c := range []struct {
		name string
		d    limiters.Decision
		key  Option
		want float64
	}{
		{"allowed, header key", allowAll, WithHeaderKey("X-User"), 0},
		{"denied, header key", deny, WithHeaderKey("X-User"), 0},
		{"allowed, client IP", allowAll, WithClientIP(IPConfig{}), 1},
	} {
		h := newMiddleware(t, fixed(c.d), c.key).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		got := testing.AllocsPerRun(1000, func() {
			clear(w.Header())
			w.Body.Reset()
			h.ServeHTTP(w, r)
		})
		if got != c.want {
			t.Errorf("%s: %v allocations a request, want %v", c.name, got, c.want)
		}
	}
}

// FailWithDecision follows the Decision a limiter returns with its error
// (one that falls back on its own): served with its headers, or 429; the
// error still counted and handed to the hook.
func TestLimiterFailureWithDecision(t *testing.T) {
	down := errors.New("backend down, decided in memory")
	for _, c := range []struct {
		d      limiters.Decision
		status int
	}{
		{limiters.Decision{Allowed: true, Limit: 5, Remaining: 4}, 200},
		{limiters.Decision{Limit: 5, RetryAfter: 2 * time.Second, ResetAfter: 2 * time.Second}, 429},
	} {
		fellBack := decideFunc(func(context.Context, string, int) (limiters.Decision, error) { return c.d, down })
		var got []error
		m := newMiddleware(t, fellBack, WithLimiterFailure(FailWithDecision),
			WithHooks(Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }}))
		w := serve(m.Wrap(ok), "")
		if w.Code != c.status {
			t.Fatalf("%+v: status %d, want %d", c.d, w.Code, c.status)
		}
		if v := w.Header().Get(HeaderLimit); v != "5" {
			t.Errorf("%s: %q, want the fallback's limit, 5", HeaderLimit, v)
		}
		if s := m.Stats(); s.LimiterErrors != 1 || len(got) != 1 || !errors.Is(got[0], down) {
			t.Errorf("Stats() = %+v, hook got %v: want the error counted and reported once", s, got)
		}
	}
	if _, err := New(fixed(allowAll), WithKeyFailure(FailWithDecision)); err == nil {
		t.Error("FailWithDecision for a request without a key: want an error")
	}
}
