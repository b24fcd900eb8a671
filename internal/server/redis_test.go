package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// redisFor returns the options of the test Redis server (package
// redistest; the test fails without one) and a key prefix of the test's
// own, whose keys are removed when it ends.
func redisFor(t *testing.T) (*redis.Options, string) {
	t.Helper()
	return &redis.Options{Addr: redistest.Addr()}, redistest.Prefix(t, redistest.Client(t, nil))
}

// TestRedisDenyThenAllow: on Redis (its own clock, the real time), a key
// is served, then denied once its quota is spent, then served again after
// Retry-After; the keys are under the prefix.
func TestRedisDenyThenAllow(t *testing.T) {
	opt, prefix := redisFor(t)
	s := start(t, server.Config{
		Algorithm: limiters.GCRA, Limit: bucket(1, 2),
		Backend: "redis", Redis: opt, RedisPrefix: prefix, FailClosed: true,
	})
	if got := s.get(t, "alice"); got.status != 200 || !got.echo.Allowed || got.echo.Limit != 1 {
		t.Fatalf("first request: status %d, echo %s: want 200, allowed, limit 1", got.status, got.body)
	}
	// Redis's clock runs: a request may come half a second late and be
	// served, but the quota refills one request per half second, so a
	// denial comes.
	var denied reply
	for range 100 {
		if denied = s.get(t, "alice"); denied.status == http.StatusTooManyRequests {
			break
		}
	}
	if denied.status != http.StatusTooManyRequests {
		t.Fatalf("no 429 in 100 requests at capacity 1, 2/s")
	}
	retry, err := strconv.Atoi(denied.header.Get("Retry-After"))
	if err != nil || retry < 1 {
		t.Fatalf("429: Retry-After %q, want whole seconds", denied.header.Get("Retry-After"))
	}
	time.Sleep(time.Duration(retry) * time.Second)
	if got := s.get(t, "alice"); got.status != 200 {
		t.Errorf("after Retry-After: status %d, want 200", got.status)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 || !strings.Contains(keys[0], "{alice}") {
		t.Errorf("keys under the prefix: %v (%v), want alice's one", keys, err)
	}
}

// TestRedisTiersReload: tiers on Redis, reloaded as in memory.
func TestRedisTiersReload(t *testing.T) {
	opt, prefix := redisFor(t)
	onRedis := strings.Replace(tiered, "algorithm: sliding-log", "algorithm: sliding-log\nbackend: redis", 1)
	path := writeFile(t, "", onRedis)
	s := start(t, server.Config{File: path, Redis: opt, RedisPrefix: prefix})
	if got := s.get(t, "alice"); got.echo.Tier != "premium" || got.echo.Limit != 5 {
		t.Fatalf("alice: echo %s, want premium, limit 5", got.body)
	}
	if got := s.get(t, "bob"); got.echo.Tier != "free" || got.echo.Limit != 2 {
		t.Fatalf("bob: echo %s, want free, limit 2", got.body)
	}
	writeFile(t, path, strings.Replace(onRedis, "free: [2/min]", "free: [3/min]", 1))
	if line := s.reloadBySignal(t); line != "reloaded "+path+"\n" {
		t.Fatalf("SIGHUP: logged %q, want a reload", line)
	}
	if got := s.get(t, "alice"); got.echo.Remaining != 3 {
		t.Errorf("alice after a reload that kept premium: echo %s, want remaining 3", got.body)
	}
	if got := s.get(t, "bob"); got.echo.Limit != 3 || got.echo.Remaining != 2 {
		t.Errorf("bob after a reload that changed free: echo %s, want limit 3, remaining 2", got.body)
	}
	writeFile(t, path, tiered) // backend memory: refused, as a move would lose every quota
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), path+": backend:") {
		t.Errorf("Reload moving the backend: %v, want an error naming the file", err)
	}
	if got := s.get(t, "bob"); got.echo.Remaining != 1 {
		t.Errorf("bob after a refused reload: echo %s, want remaining 1", got.body)
	}
}

// redisBehind returns the options of a Redis reached through a proxy the
// test can take away, and a key prefix of the test's own. The tests give
// Redis 2s: their first request must be Redis's, its script perhaps cold
// on a busy host; taken away, the proxy refuses at once, so no request
// waits the 2s out.
func redisBehind(t *testing.T) (*redis.Options, string, *redisfault.Proxy) {
	t.Helper()
	opt, prefix := redisFor(t)
	p, err := redisfault.NewProxy(opt.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &redis.Options{Addr: p.Addr()}, prefix, p
}

// Failing open while Redis is away, a served request's echo names its key
// and says it was unmetered, and no internal error reaches the client.
func TestRedisFailOpenEcho(t *testing.T) {
	opt, prefix, away := redisBehind(t)
	s := start(t, server.Config{
		Algorithm: limiters.GCRA, Limit: limiters.PerMinute(100),
		Backend: "redis", Redis: opt, RedisPrefix: prefix, RedisTimeout: 2 * time.Second,
		Headers: httplimit.AllHeaders,
	})
	if got := s.get(t, "alice"); got.status != 200 || got.echo.Unmetered {
		t.Fatalf("with Redis: status %d, echo %s; want 200, metered", got.status, got.body)
	}
	away.Set(redisfault.Refused)
	got := s.get(t, "alice")
	if got.status != 200 || got.echo.Key != "alice" || !got.echo.Unmetered || got.echo.Limit != 0 {
		t.Errorf("Redis away, failing open: status %d, echo %s; want 200 for alice, unmetered", got.status, got.body)
	}
	for _, leak := range []string{"redis", "error", "refused", "dial"} {
		if strings.Contains(strings.ToLower(string(got.body)), leak) {
			t.Errorf("Redis away: the body %s says %q: an internal error reached the client", got.body, leak)
		}
	}
	if _, sent := got.header[http.CanonicalHeaderKey(httplimit.HeaderRateLimit)]; sent {
		t.Errorf("Redis away: unmetered, yet sent RateLimit %q", got.header.Get(httplimit.HeaderRateLimit))
	}
}

// Falling back to memory on a fleet of two while Redis is away, the
// headers describe the limit in force: each server's half.
func TestRedisFallbackHeaders(t *testing.T) {
	opt, prefix, away := redisBehind(t)
	s := start(t, server.Config{
		Algorithm: limiters.FixedWindow, Limit: limiters.PerHour(100),
		Backend: "redis", Redis: opt, RedisPrefix: prefix, RedisTimeout: 2 * time.Second, Fallback: 2,
		Headers: httplimit.AllHeaders,
	})
	policy := func(r reply) string { return r.header.Get(httplimit.HeaderRateLimitPolicy) }
	if got := s.get(t, "alice"); got.status != 200 || policy(got) != `"100/h";q=100;w=3600` || got.echo.Limit != 100 {
		t.Fatalf("with Redis: status %d, RateLimit-Policy %q, echo %s; want q=100", got.status, policy(got), got.body)
	}
	away.Set(redisfault.Refused)
	got := s.get(t, "alice")
	if got.status != 200 || policy(got) != `"100/h";q=50;w=3600` || got.echo.Limit != 50 || got.header.Get(httplimit.HeaderLimit) != "50" {
		t.Errorf("Redis away, falling back: status %d, RateLimit-Policy %q, %s %q, echo %s; want the half in force, q=50",
			got.status, policy(got), httplimit.HeaderLimit, got.header.Get(httplimit.HeaderLimit), got.body)
	}
	for range 49 {
		s.get(t, "alice")
	}
	if got := s.get(t, "alice"); got.status != http.StatusTooManyRequests {
		t.Errorf("the 51st request on the fallback's half: status %d, want 429", got.status)
	}
}

// RedisFailures counts the decisions made without Redis, one a request
// while it is away, as the metric ratelab_decision_errors_total{kind="limiter"}
// does; none while it answers.
func TestRedisFailures(t *testing.T) {
	opt, prefix, away := redisBehind(t)
	s := start(t, server.Config{
		Algorithm: limiters.GCRA, Limit: limiters.PerMinute(100),
		Backend: "redis", Redis: opt, RedisPrefix: prefix, RedisTimeout: 2 * time.Second,
	})
	s.get(t, "alice")
	if n := s.RedisFailures(); n != 0 {
		t.Fatalf("with Redis: RedisFailures() = %d, want 0", n)
	}
	away.Set(redisfault.Refused)
	for range 7 { // past the breaker's 5: it fails fast, and counts
		s.get(t, "alice")
	}
	if n := s.RedisFailures(); n != 7 {
		t.Errorf("7 requests with Redis away: RedisFailures() = %d, want 7", n)
	}
	const metric = `ratelab_decision_errors_total{kind="limiter"} 7`
	w := httptest.NewRecorder()
	s.Metrics().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(w.Body.String(), "\n"+metric+"\n") {
		t.Errorf("the metrics lack %q:\n%s", metric, w.Body)
	}
}
