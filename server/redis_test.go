package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/redistest"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/server"
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
		Spec:    limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 2}},
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
