package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// A real server on loopback: 200, 200, then 429 with a Retry-After that,
// waited, is enough to be served again.
func TestServer(t *testing.T) {
	// Two a second, exactly (the sliding log): the test fails only if
	// three requests over loopback take a whole second.
	l := newSlidingLog(t, 2, time.Second)
	var denied atomic.Int64 // the denial's RetryAfter
	m := newMiddleware(t, l, httplimit.WithHooks(httplimit.Hooks{Denied: func(_ *http.Request, _ string, d limiters.Decision) {
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
	if got := integer(t, res.Header, httplimit.HeaderRemaining); got != 0 {
		t.Errorf("request 2: %s = %d, want 0", httplimit.HeaderRemaining, got)
	}
	res = get("request 3, the quota spent", 429)
	retry := seconds(t, res.Header, httplimit.HeaderRetryAfter)
	if real := time.Duration(denied.Load()); real <= 0 || time.Duration(retry)*time.Second < real {
		t.Fatalf("request 3: Retry-After %d, earlier than the decision's RetryAfter %v", retry, real)
	}
	time.Sleep(time.Duration(retry) * time.Second) // as a client that honours Retry-After
	get("request 4, after Retry-After", 200)
}

// Shadow mode serves what it would deny, with the decision's headers, and
// counts it.
func TestShadow(t *testing.T) {
	l := newSlidingLog(t, 1, time.Hour)
	var denials, admissions int
	m := newMiddleware(t, l, httplimit.WithShadow(), httplimit.WithHeaderKey("X-User"), httplimit.WithHooks(httplimit.Hooks{
		Allowed: func(*http.Request, string, limiters.Decision) { admissions++ },
		Denied:  func(*http.Request, string, limiters.Decision) { denials++ },
	}))
	h := m.Wrap(ok)
	for i := range 4 {
		w := serve(h, "alice")
		if w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d in shadow mode: %d %q, want 200 ok", i+1, w.Code, w.Body)
		}
		if v := w.Header().Get(httplimit.HeaderRetryAfter); v != "" {
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
	if d, _ := l.Peek(context.Background(), limiters.Request{Key: "alice", N: 1}); d.Remaining != 0 || d.Allowed {
		t.Errorf("alice after shadow denials: %+v, want her one request's worth spent", d)
	}
}

func TestHeadersOption(t *testing.T) {
	for _, c := range []struct {
		h              httplimit.Headers
		legacy, iDraft bool
	}{
		{httplimit.AllHeaders, true, true},
		{httplimit.LegacyHeaders, true, false},
		{httplimit.DraftHeaders, false, true},
		{httplimit.NoHeaders, false, false},
	} {
		deny := limiters.Decision{Limit: 1, RetryAfter: 1500 * time.Millisecond, ResetAfter: 2 * time.Second}
		for _, d := range []limiters.Decision{allowAll, deny} {
			w := serve(newMiddleware(t, fixed(d), httplimit.WithHeaderKey("X-User"), httplimit.WithHeaders(c.h)).Wrap(ok), "alice")
			hdr := w.Header()
			if got := has(hdr, httplimit.HeaderLimit); got != c.legacy {
				t.Errorf("WithHeaders(%b), decision %+v: legacy fields %v, want %v", c.h, d, got, c.legacy)
			}
			if got := has(hdr, httplimit.HeaderRateLimit); got != c.iDraft {
				t.Errorf("WithHeaders(%b), decision %+v: draft fields %v, want %v", c.h, d, got, c.iDraft)
			}
			if !d.Allowed {
				if got := seconds(t, hdr, httplimit.HeaderRetryAfter); got != 2 {
					t.Errorf("WithHeaders(%b): Retry-After %d, want 2 whatever the headers chosen", c.h, got)
				}
				if p := readProblem(t, hdr, w.Body.Bytes()); !slices.Equal(p.Violated, []string{httplimit.DefaultPolicy}) {
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
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User"), httplimit.WithCost(func(*http.Request) (int, error) { return 5, nil })).Wrap(ok)
	w := serve(h, "alice")
	if w.Code != 429 {
		t.Fatalf("a cost of 5 against a limit of 3: %d, want 429", w.Code)
	}
	if has(w.Header(), httplimit.HeaderRetryAfter) {
		t.Errorf("Retry-After %q for a request never admitted", w.Header().Get(httplimit.HeaderRetryAfter))
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
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User"), httplimit.WithHooks(httplimit.Hooks{
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
	// The rows for WithKeyFailure(7), WithLimiterFailure(-1) and
	// WithPolicies (no policy, a policy without a name, two of one name, a
	// negative quota, more policies than limits, policies for tiers) are
	// gone with those options: failure modes are the limiter's now, and a
	// decision says its own limits. WithSettle's errors are in
	// TestSettleComposite.
	for _, c := range []struct {
		l    limiters.Limiter
		opts []httplimit.Option
		want string
	}{
		{nil, nil, "no limiter"},
		{fixed(allowAll), []httplimit.Option{httplimit.WithKey(nil)}, "WithKey(nil)"},
		{fixed(allowAll), []httplimit.Option{httplimit.WithHeaderKey("")}, `"" is not a header name`},
		{fixed(allowAll), []httplimit.Option{httplimit.WithHeaders(8)}, "headers 0x8"},
	} {
		_, err := httplimit.New(c.l, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%T, %d options) = %v, want an error saying %s", c.l, len(c.opts), err, c.want)
		}
	}
}
