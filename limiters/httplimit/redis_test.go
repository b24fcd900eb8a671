package httplimit_test

import (
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// A Redis limiter of several limits: one policy a limit, one RateLimit
// item (the decision's), and a denial names only the limits that denied.
// Against the real server make test provides; the one-second limit cannot
// refill between requests made within it, so every number is known.
//
// Was one RateLimit item a limit (the hour's r=4, 3, 3 as well): a
// decision carries the combined quota only now, the second's here, the
// limit of least room.
func TestRedisComposite(t *testing.T) {
	c := redistest.Client(t, &redis.Options{ContextTimeoutEnabled: true, PoolTimeout: time.Second, MaxRetries: -1})
	l, err := redislimit.New(c, limiters.SlidingLog, []limiters.Limit{
		{Name: "second", N: 2, Per: time.Second},
		{Name: "hour", N: 5, Per: time.Hour},
	}, redislimit.WithPrefix(redistest.Prefix(t, c)), redislimit.WithTimeout(10*time.Second)) // the test judges Redis's decisions, not the bound
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User")).Wrap(ok)
	for i, want := range []struct {
		status int
		second int64 // r of the item
	}{{200, 1}, {200, 0}, {429, 0}} {
		w := serve(h, "alice")
		if w.Code != want.status {
			t.Fatalf("request %d: status %d, want %d", i+1, w.Code, want.status)
		}
		if got, want := w.Header().Get(httplimit.HeaderRateLimitPolicy), `"second";q=2;w=1, "hour";q=5;w=3600`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
		_, items := draft(t, w.Header())
		if len(items) != 1 || items[0].name != "second" || items[0].params["r"] != want.second || items[0].params["t"] != 1 {
			t.Errorf("request %d: RateLimit %q: want second r=%d t=1", i+1, w.Header().Get(httplimit.HeaderRateLimit), want.second)
		}
		if w.Code == 429 {
			if p := readProblem(t, w.Header(), w.Body.Bytes()); len(p.Violated) != 1 || p.Violated[0] != "second" {
				t.Errorf("violated-policies %q, want [second]", p.Violated)
			}
			if s := seconds(t, w.Header(), httplimit.HeaderRetryAfter); s != 1 {
				t.Errorf("Retry-After %d, want 1", s)
			}
		}
	}
}

// A Redis that does not answer: the limiter's failure policy decides.
// Failing open serves the request unmetered, without rate-limit fields;
// failing closed answers 503; falling back to memory is an ordinary
// decision, with its fields, and no error.
func TestRedisDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	for _, tc := range []struct {
		name          string
		opt           redislimit.Option
		status        int
		fields        bool
		limiterErrors int64
	}{
		{"fail open", redislimit.WithFailureMode(redislimit.FailOpen), 200, false, 1},
		{"fail closed", redislimit.WithFailureMode(redislimit.FailClosed), 503, false, 1},
		{"fall back", redislimit.WithFallback(1), 200, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{limiters.PerMinute(10)}, tc.opt, redislimit.WithTimeout(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			m := newMiddleware(t, l, httplimit.WithHeaderKey("X-User"))
			w := serve(m.Wrap(ok), "alice")
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			for _, f := range rateLimitFields {
				if got := has(w.Header(), f); got != tc.fields {
					t.Errorf("%s sent: %v, want %v", f, got, tc.fields)
				}
			}
			if tc.status == 503 && seconds(t, w.Header(), httplimit.HeaderRetryAfter) < 1 {
				t.Errorf("Retry-After %q, want 1 or more", w.Header().Get(httplimit.HeaderRetryAfter))
			}
			if s := m.Stats(); s.LimiterErrors != tc.limiterErrors {
				t.Errorf("Stats() = %+v, want %d limiter errors", s, tc.limiterErrors)
			}
		})
	}
}
