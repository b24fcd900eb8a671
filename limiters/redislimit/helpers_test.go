package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server returns a client of the Redis server the tests run against:
// REDIS_ADDR, else 127.0.0.1:6379. Without one the test fails: make test
// finds or starts a server (tools/with-redis).
func server(t testing.TB) *redis.Client {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("no Redis server at %s (%v): run the tests with make test, which finds or starts one, or set REDIS_ADDR", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// prefix returns a key prefix no other test uses, and removes every key
// under it when the test ends. Tests never touch other keys.
func prefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	p := "ratelab-test:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { removeAll(t, c, p) })
	return p
}

// removeAll deletes the keys under prefix p.
func removeAll(t testing.TB, c *redis.Client, p string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, glob(p)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scanning the test's keys: %v", err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("removing the test's keys: %v", err)
			return
		}
		keys = keys[n:]
	}
}

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
