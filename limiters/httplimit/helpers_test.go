package httplimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/slidinglog"
)

// decideFunc is a Limiter that decides by a function: a fixed decision, a
// broken backend.
type decideFunc func(ctx context.Context, r limiters.Request) (limiters.Decision, error)

func (f decideFunc) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return f(ctx, r)
}

func (f decideFunc) Close() error { return nil }

func (f decideFunc) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return f(ctx, limiters.Request{Key: key, N: n})
}

// fixed decides d every time.
func fixed(d limiters.Decision) decideFunc {
	return func(context.Context, limiters.Request) (limiters.Decision, error) { return d, nil }
}

// current decides whatever *d holds when it is asked.
func current(d *limiters.Decision) decideFunc {
	return func(context.Context, limiters.Request) (limiters.Decision, error) { return *d, nil }
}

// allowAll is a decision that admits, from a limiter that does not say
// its limits (no Policy).
var allowAll = limiters.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 10 * time.Millisecond}

// newSlidingLog is an exact limiter of n per w.
func newSlidingLog(t testing.TB, n int, w time.Duration, opts ...limiters.Option) *slidinglog.Limiter {
	t.Helper()
	l, err := slidinglog.New(limiters.Limit{N: n, Per: w}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// stopped is a Clock that stands still.
type stopped time.Time

func (c stopped) Now() time.Time { return time.Time(c) }

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// ok is the handler behind the limit: 200 and "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

func newMiddleware(t testing.TB, l limiters.Limiter, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serve runs one request through h, from key's user (header X-User).
func serve(h http.Handler, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	if key != "" {
		r.Header.Set("X-User", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// has reports whether h has the field called name.
func has(h http.Header, name string) bool { return len(h.Values(name)) > 0 }

// problem is an RFC 9457 body as the middleware writes it.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Violated []string `json:"violated-policies"`
}

func readProblem(t testing.TB, h http.Header, body []byte) problem {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("the problem body %q is not JSON: %v", body, err)
	}
	return p
}

// draft reads both draft fields of h, checked against the draft's syntax.
func draft(t testing.TB, h http.Header) (policies, limits []draftItem) {
	t.Helper()
	var err error
	if policies, err = parseDraft(httplimit.HeaderRateLimitPolicy, h.Get(httplimit.HeaderRateLimitPolicy)); err != nil {
		t.Fatal(err)
	}
	if limits, err = parseDraft(httplimit.HeaderRateLimit, h.Get(httplimit.HeaderRateLimit)); err != nil {
		t.Fatal(err)
	}
	return policies, limits
}

// seconds reads a header that holds delay-seconds (RFC 9110: 1*DIGIT).
func seconds(t testing.TB, h http.Header, name string) int64 {
	t.Helper()
	v := h.Get(name)
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			t.Fatalf("%s = %q, not delay-seconds", name, v)
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", name, v, err)
	}
	return n
}

func integer(t testing.TB, h http.Header, name string) int {
	t.Helper()
	n, err := strconv.Atoi(h.Get(name))
	if err != nil {
		t.Fatalf("%s = %q: %v", name, h.Get(name), err)
	}
	return n
}
