// Package redistest gives tests the real Redis server they run against:
// REDIS_ADDR, else one on 127.0.0.1:6379 (make test finds or starts one,
// with tools/with-redis), and a key prefix of each test's own, removed
// when the test ends. Tests never flush a database.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the test server's address: REDIS_ADDR, else 127.0.0.1:6379.
func Addr() string {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// URL is Addr as a redis:// URL, database 0.
func URL() string { return "redis://" + Addr() + "/0" }

// Client returns a client of the test server, with opt's settings (nil:
// go-redis's defaults) and Addr, closed when the test ends. The test
// fails if the server does not answer PING within two seconds.
func Client(t testing.TB, opt *redis.Options) *redis.Client {
	t.Helper()
	o := redis.Options{}
	if opt != nil {
		o = *opt
	}
	o.Addr = Addr()
	c := redis.NewClient(&o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("no Redis server at %s (%v): run the tests with make test, which finds or starts one (tools/with-redis), or set REDIS_ADDR", o.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Prefix returns a key prefix no other test uses, made of the test's name
// and a random part, and removes every key under it (SCAN and UNLINK
// through c) when the test ends.
func Prefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")", "*", "_", "?", "_", "[", "(", "]", ")", `\`, "_").Replace(t.Name())
	p := "ratelab-test:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { Remove(t, c, p) })
	return p
}

// Remove deletes the keys under prefix p, which must hold no SCAN
// pattern character.
func Remove(t testing.TB, c *redis.Client, p string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
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

// CommandCalls returns how many times the server of c has run each
// command (INFO commandstats: calls, and rejected calls, such as EVALSHA
// of a script it does not have), by name.
func CommandCalls(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k == "calls" || k == "rejected_calls" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				out[name] += n
			}
		}
	}
	return out
}
