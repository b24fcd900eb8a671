package redislimit_test

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// server returns a client of the Redis server the tests run against (see
// package redistest), with deadlines honoured: the limiter's light path.
func server(t testing.TB) *redis.Client {
	t.Helper()
	return redistest.Client(t, &redis.Options{PoolSize: 64, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
}

// patient is the option of the limiters whose decisions a test judges:
// 10s for Redis, not the default 250ms, which the race detector on a busy
// host (make test runs three packages at once on 2 cores) can pass, and a
// decision past it is the failure mode's, not Redis's. Put first, so that
// a test's own WithTimeout wins; the fault tests judge the bound.
var patient = redislimit.WithTimeout(10 * time.Second)

// warm makes one decision of algorithm a on limits through c, patiently,
// under prefix: a fault test's first decision, which must be Redis's
// within a bound of 50 or 100ms, then finds a connection in the pool and
// the script on the server (cold, through the fault proxy, beside 6 CPU
// hogs, the first decision took up to 65ms).
func warm(t *testing.T, c redislimit.Client, a limiters.Algorithm, limits []limiters.Limit, prefix string) {
	t.Helper()
	l, err := redislimit.New(c, a, limits, patient, redislimit.WithPrefix(prefix), redislimit.WithDenialCache(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.AllowN(context.Background(), "warm-up", 1); err != nil {
		t.Fatalf("warming the pool and the script: %v", err)
	}
}

// prefix returns a key prefix no other test uses, and removes every key
// under it when the test ends. Tests never touch other keys.
func prefix(t testing.TB, c *redis.Client) string { return redistest.Prefix(t, c) }

// noneLeft fails the test if, within five seconds, there are still more
// goroutines than before. (A decision gives up at its deadline, but
// go-redis's pool goes on dialing on a goroutine of its own, five tries
// 100ms apart, each up to its dial timeout: on a busy host under the race
// detector that outlived two seconds once in six runs.)
func noneLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		var stacks strings.Builder
		pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		t.Errorf("%d goroutines after, %d before:\n%s", n, before, stacks.String())
	}
}

// same reports whether two decisions are the same, field for field, their
// policies compared by value.
func same(a, b limiters.Decision) bool {
	pa, pb := a.Policy, b.Policy
	a.Policy, b.Policy = nil, nil
	return a == b && (pa == pb || pa != nil && pb != nil && reflect.DeepEqual(*pa, *pb))
}

// show formats d for a failure message, its policy's limits included.
func show(d limiters.Decision) string {
	if d.Policy == nil {
		return fmt.Sprintf("%+v", d)
	}
	p := d.Policy
	d.Policy = nil
	return fmt.Sprintf("%+v under %v", d, p.Limits)
}

// at is a decision of n for key at t.
func at(key string, t time.Time, n int) limiters.Request {
	return limiters.Request{Key: key, N: n, At: t}
}

// ownServer starts a redis-server of the test's own on loopback, on port
// or a free one for 0 (redisfault.Servers: nothing kept on disk), and
// returns its port and a function that stops it (SIGKILL). The test fails
// if redis-server is not installed.
func ownServer(t *testing.T, port int) (int, func()) {
	t.Helper()
	s, err := redisfault.NewServers(t.TempDir())
	if err != nil {
		t.Fatalf("this test starts and stops a Redis server of its own: %v", err)
	}
	t.Cleanup(s.Close)
	addr, err := s.StartOn(port)
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ = strconv.Atoi(p)
	return port, func() { s.Kill(addr) }
}

// quiet drops go-redis's log lines: the fault tests make it log every
// failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }
