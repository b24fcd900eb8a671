package httplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// A Redis limiter of several limits says them (Limits) but decides them
// together: one policy a limit, and the decision's item named after the
// policy of the limit with the least remaining. Against the real server
// make test provides.
func TestRedisComposite(t *testing.T) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("no Redis server at %s (%v): run the tests with make test, which finds or starts one, or set REDIS_ADDR", addr, err)
	}
	var nonce [6]byte
	rand.Read(nonce[:])
	l, err := redislimit.NewComposite(c, limiters.SlidingLog, []composite.Limit{
		{Name: "second", Rate: limiters.Rate{N: 2, Per: time.Second}},
		{Name: "hour", Rate: limiters.Rate{N: 5, Per: time.Hour}},
	}, redislimit.WithPrefix("ratelab-test:httplimit:"+hex.EncodeToString(nonce[:])+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.ResetAll(context.Background())
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
