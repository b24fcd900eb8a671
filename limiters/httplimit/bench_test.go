package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// BenchmarkMiddleware: what the middleware adds to a request on top of the
// limiter's decision. Each case runs twice: path=direct calls the limiter
// and then the handler, as a handler that limits itself would;
// path=middleware sends the same pre-built request through the
// middleware. The difference is the middleware's cost (compare with
// benchstat -col /path). The handler does nothing, and one recorder is
// reused, its header map and body cleared each time in both paths.
func BenchmarkMiddleware(b *testing.B) {
	// noop decides as a limiter of one limit would, its Policy included.
	policy := limiters.NewPolicy(limiters.PerMinute(100))
	admit := limiters.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 10 * time.Millisecond, Policy: policy}
	deny := limiters.Decision{Limit: 100, RetryAfter: 1500 * time.Millisecond, ResetAfter: time.Minute, Policy: policy,
		Denied: limiters.Denials(0).Deny(0, true)}
	for _, c := range []struct {
		limiter, outcome, key string
		headers               httplimit.Headers
	}{
		{"noop", "allowed", "header", httplimit.AllHeaders},
		{"noop", "allowed", "header", httplimit.NoHeaders},
		{"noop", "allowed", "header", httplimit.LegacyHeaders},
		{"noop", "allowed", "header", httplimit.DraftHeaders},
		{"noop", "allowed", "ip", httplimit.AllHeaders},
		{"noop", "denied", "header", httplimit.AllHeaders},
		{"gcra", "allowed", "header", httplimit.AllHeaders},
		{"gcra", "denied", "header", httplimit.AllHeaders},
		{"composite3", "allowed", "header", httplimit.AllHeaders},
		{"composite3", "denied", "header", httplimit.AllHeaders},
	} {
		var l limiters.Limiter
		switch c.limiter {
		case "noop":
			d := admit
			if c.outcome == "denied" {
				d = deny
			}
			l = fixed(d)
		case "gcra":
			l = benchGCRA(b, c.outcome)
		case "composite3":
			l = benchComposite(b, c.outcome)
		}
		key := httplimit.WithHeaderKey("X-User")
		if c.key == "ip" {
			key = httplimit.WithClientIP(httplimit.IPConfig{})
		}
		m := newMiddleware(b, l, key, httplimit.WithHeaders(c.headers))
		next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
		h := m.Wrap(next)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User", "alice")
		want := map[string]int{"allowed": 200, "denied": 429}[c.outcome]
		if got := serve(h, "alice").Code; got != want { // the fixture decides as its name says
			b.Fatalf("%+v: status %d, want %d", c, got, want)
		}
		name := fmt.Sprintf("limiter=%s/outcome=%s/key=%s/headers=%s", c.limiter, c.outcome, c.key, headerName(c.headers))
		ctx := context.Background()
		b.Run(name+"/path=direct", func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			admitted := 0
			for b.Loop() {
				clear(w.Header())
				w.Body.Reset()
				if d, _ := l.AllowN(ctx, "alice", 1); d.Allowed {
					admitted++
				}
				next.ServeHTTP(w, r)
			}
			if want := map[string]int{"allowed": b.N, "denied": 0}[c.outcome]; admitted != want {
				b.Fatalf("%d of %d admitted, want %s", admitted, b.N, c.outcome)
			}
		})
		b.Run(name+"/path=middleware", func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				clear(w.Header())
				w.Body.Reset()
				h.ServeHTTP(w, r)
			}
			if w.Code != want {
				b.Fatalf("status %d, want %d", w.Code, want)
			}
		})
	}
}

func headerName(h httplimit.Headers) string {
	switch h {
	case httplimit.AllHeaders:
		return "all"
	case httplimit.LegacyHeaders:
		return "legacy"
	case httplimit.DraftHeaders:
		return "draft"
	}
	return "none"
}

// benchGCRA admits every request (a bucket of 100 refilled every
// nanosecond: full again before the next request), or denies every one (100
// a day, spent). The numbers in the headers are as long as an API's
// usually are.
func benchGCRA(b *testing.B, outcome string) limiters.Limiter {
	limit := limiters.Limit{N: 1e9, Per: time.Second, Burst: 100}
	if outcome == "denied" {
		limit = limiters.Limit{N: 100, Per: 24 * time.Hour}
	}
	l, err := gcra.New(limit)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	l.AllowN(context.Background(), "alice", 100)
	return l
}

// benchComposite is three named limits, refilled faster than requests
// come or, for denied, the last spent.
func benchComposite(b *testing.B, outcome string) limiters.Limiter {
	limits := []limiters.Limit{
		{Name: "burst", N: 1e9, Per: time.Second, Burst: 10},
		{Name: "minute", N: 1e9, Per: time.Second, Burst: 100},
		{Name: "hour", N: 1e9, Per: time.Second, Burst: 1000},
	}
	if outcome == "denied" {
		limits[2] = limiters.Limit{Name: "hour", N: 1, Per: time.Hour}
	}
	l, err := composite.New(limiters.GCRA, limits)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	l.AllowN(context.Background(), "alice", 1)
	return l
}
