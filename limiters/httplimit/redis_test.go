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

// A Redis limiter of several limits says them (Limits) but decides them
// together: one policy a limit, and the decision's item named after the
// policy of the limit with the least remaining. Against the real server
// make test provides.
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
	w := serve(h, "alice")
	if got, want := w.Header().Get(HeaderRateLimitPolicy), `"second";q=2;w=1, "hour";q=5;w=3600`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	policies, items := draft(t, w.Header())
	if len(policies) != 2 || len(items) != 1 || items[0].name != "second" || items[0].params["r"] != 1 {
		t.Errorf("RateLimit %q: want one item, second's, with r=1", w.Header().Get(HeaderRateLimit))
	}
}
