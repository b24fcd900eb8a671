package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// proxy is a redisfault.Proxy to the Redis server at to, closed when the
// test ends.
func proxy(t *testing.T, to string) *redisfault.Proxy {
	t.Helper()
	p, err := redisfault.NewProxy(to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// through returns a client through p that neither retries nor redials,
// and waits for a connection at most timeout, closed when the test ends.
func through(t *testing.T, p *redisfault.Proxy, timeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1,
		ContextTimeoutEnabled: true, PoolTimeout: timeout, DialTimeout: timeout})
	t.Cleanup(func() { c.Close() })
	return c
}

// Each fault, through a proxy in front of a Redis server of the test's
// own: while it lasts every decision follows the failure mode (fail
// closed) with ErrUnavailable, within the timeout and a little (nothing
// hangs); the server ran each decision at most once (no retry counted
// one twice); when it clears, decisions are Redis's again, and the time
// that took is reported; no goroutine is left behind.
func TestFaults(t *testing.T) {
	port, _ := ownServer(t, 0)
	admin := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port)})
	defer admin.Close()
	const timeout = 100 * time.Millisecond
	for _, fault := range []redisfault.Fault{redisfault.Slow, redisfault.Reset, redisfault.Silent, redisfault.Trickle} {
		t.Run(fault.String(), func(t *testing.T) {
			before := runtime.NumGoroutine()
			p := proxy(t, fmt.Sprint("127.0.0.1:", port))
			c := through(t, p, timeout)
			warm(t, c, limiters.GCRA, []limiters.Limit{{N: 1000, Per: time.Second}}, fmt.Sprintf("faults-warm:%d:", fault))
			l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1000, Per: time.Second}},
				redislimit.WithPrefix(fmt.Sprintf("faults:%d:", fault)), redislimit.WithTimeout(timeout), redislimit.WithFailureMode(redislimit.FailClosed))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 20 { // warm: a pool of connections that worked
				if _, err := l.AllowN(ctx, "k", 1); err != nil {
					t.Fatal(err)
				}
			}
			calls := redistest.CommandCalls(t, admin)
			p.Set(fault)
			var mu sync.Mutex
			var took []time.Duration
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 10 {
						start := time.Now()
						d, err := l.AllowN(ctx, fmt.Sprintf("k%d-%d", g, i), 1)
						el := time.Since(start)
						if !errors.Is(err, redislimit.ErrUnavailable) || d.Allowed {
							t.Errorf("during the fault: %+v, %v; want ErrUnavailable, failing closed", d, err)
						}
						mu.Lock()
						took = append(took, el)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			slices.Sort(took)
			p99 := took[len(took)*99/100]
			if worst := took[len(took)-1]; worst > 10*timeout {
				t.Errorf("a decision took %v during the fault, with a timeout of %v: it hangs", worst, timeout)
			}
			p.Set(redisfault.Pass)
			cleared := time.Now()
			recovered := time.Duration(-1)
			for time.Since(cleared) < 5*time.Second {
				if d, err := l.AllowN(ctx, "after", 1); err == nil && d.Allowed {
					recovered = time.Since(cleared)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if recovered < 0 {
				t.Fatalf("no decision of Redis's within 5s of the fault clearing")
			}
			after := redistest.CommandCalls(t, admin)
			if ran := after["evalsha"] + after["eval"] - calls["evalsha"] - calls["eval"]; ran > 40+int64(recovered/(5*time.Millisecond))+2 {
				t.Errorf("the server ran %d scripts for 40 decisions during the fault and the recovery's few: a decision sent twice", ran)
			}
			t.Logf("%s: 40 decisions failed closed, median %v, p99 %v, worst %v (timeout %v); decided by Redis again %v after it cleared",
				fault, took[len(took)/2].Round(time.Millisecond), p99.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), timeout, recovered.Round(time.Millisecond))
			l.Close()
			c.Close()
			p.Close()
			noneLeft(t, before)
		})
	}
}
