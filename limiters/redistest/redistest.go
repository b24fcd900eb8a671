// Package redistest is what a test of a limiter kept in Redis needs: the
// real Redis server it runs against (REDIS_ADDR, else one on
// 127.0.0.1:6379), a key prefix of each test's own, removed when the test
// ends (tests never flush a database), or a server of the test's own
// (Own). The servers one starts and breaks, and the proxy that takes one
// away as a network does, are package redisfault's: the lab uses them
// too, and a test helper is not linked into a command.
//
// Without a server a test that asks for one is skipped, with one line
// saying why, unless REDIS_REQUIRED is set (make test sets it: there a
// missing server is a failure, not a skip).
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters/redisfault"
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

// Require returns Addr when a server answers there; else the test is
// skipped, saying so in one line, or fails if REDIS_REQUIRED is set. The
// server is asked once per test binary (PING, two seconds at most).
func Require(t testing.TB) string {
	t.Helper()
	probe.Do(func() {
		c := redis.NewClient(&redis.Options{Addr: Addr(), MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		probe.err = c.Ping(ctx).Err()
	})
	if probe.err != nil {
		if os.Getenv("REDIS_REQUIRED") != "" {
			t.Fatalf("no Redis server at %s (%v), and REDIS_REQUIRED is set: make test finds or starts one (tools/with-redis), or set REDIS_ADDR", Addr(), probe.err)
		}
		t.Skipf("no Redis server at %s (REDIS_ADDR; make test starts one)", Addr())
	}
	return Addr()
}

var probe struct {
	sync.Once
	err error
}

// Client returns a client of the test server, with opt's settings (nil:
// go-redis's defaults) and Addr, closed when the test ends. Without a
// server the test is skipped or fails, as Require says.
func Client(t testing.TB, opt *redis.Options) *redis.Client {
	t.Helper()
	o := redis.Options{}
	if opt != nil {
		o = *opt
	}
	o.Addr = Require(t)
	c := redis.NewClient(&o)
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

// Own starts a redis-server of the test's own on a free loopback port,
// stopped when the test ends, and returns its address: for a test that
// reads what the whole server holds or spends, which other tests' keys
// would move. Without Redis (redis-server among it) the test is skipped
// or fails, as Require says.
func Own(t testing.TB) string {
	t.Helper()
	Require(t)
	s, err := redisfault.NewServers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	addr, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
