package httplimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/redistest"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// A Redis limiter of several limits says what each decided
// (EachDecider): one policy and one RateLimit item a limit, and a denial
// names only the limits that denied. Against the real server make test
// provides; the one-second limit cannot refill between requests made
// within it, so every number is known.
func TestRedisComposite(t *testing.T) {
	c := redistest.Client(t, &redis.Options{ContextTimeoutEnabled: true, PoolTimeout: time.Second, MaxRetries: -1})
	l, err := redislimit.NewComposite(c, limiters.SlidingLog, []composite.Limit{
		{Name: "second", Rate: limiters.Rate{N: 2, Per: time.Second}},
		{Name: "hour", Rate: limiters.Rate{N: 5, Per: time.Hour}},
	}, redislimit.WithPrefix(redistest.Prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	h := newMiddleware(t, l, WithHeaderKey("X-User")).Wrap(ok)
	for i, want := range []struct {
		status       int
		second, hour int64 // r of each item
	}{{200, 1, 4}, {200, 0, 3}, {429, 0, 3}} {
		w := serve(h, "alice")
		if w.Code != want.status {
			t.Fatalf("request %d: status %d, want %d", i+1, w.Code, want.status)
		}
		if got, want := w.Header().Get(HeaderRateLimitPolicy), `"second";q=2;w=1, "hour";q=5;w=3600`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
		_, items := draft(t, w.Header())
		if len(items) != 2 || items[0].name != "second" || items[1].name != "hour" ||
			items[0].params["r"] != want.second || items[1].params["r"] != want.hour ||
			items[0].params["t"] != 1 || items[1].params["t"] < 1 {
			t.Errorf("request %d: RateLimit %q: want second r=%d t=1, hour r=%d", i+1, w.Header().Get(HeaderRateLimit), want.second, want.hour)
		}
		if w.Code == 429 {
			if p := readProblem(t, w.Header(), w.Body.Bytes()); len(p.Violated) != 1 || p.Violated[0] != "second" {
				t.Errorf("violated-policies %q, want [second]", p.Violated)
			}
			if s := seconds(t, w.Header(), HeaderRetryAfter); s != 1 {
				t.Errorf("Retry-After %d, want 1", s)
			}
		}
	}
}
