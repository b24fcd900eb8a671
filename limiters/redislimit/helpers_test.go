package redislimit

import (
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/redistest"
)

// server returns a client of the Redis server the tests run against (see
// package redistest), with deadlines honoured: the limiter's light path.
func server(t testing.TB) *redis.Client {
	t.Helper()
	return redistest.Client(t, &redis.Options{PoolSize: 64, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
}

// prefix returns a key prefix no other test uses, and removes every key
// under it when the test ends. Tests never touch other keys.
func prefix(t testing.TB, c *redis.Client) string { return redistest.Prefix(t, c) }

// noneLeft fails the test if, within two seconds, there are still more
// goroutines than before.
func noneLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after, %d before", n, before)
	}
}
