package redislimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
)

// ownServer starts a redis-server of the test's own on a free loopback
// port (with extra arguments, if any), keeping nothing on disk, and
// returns its port and a function that stops it. The test fails if redis-server is not installed.
func ownServer(t *testing.T, port int, extra ...string) (int, func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test starts and stops a Redis server of its own and needs redis-server (Debian: apt-get install redis-server): %v", err)
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, extra...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port)})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer within 5s", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return port, stop
}

// TestServerStopsAndReturns stops a real Redis server while decisions are
// being made and starts it again: while it is down every decision follows
// the failure mode, with ErrUnavailable, in bounded time; once it is back
// decisions are Redis's again within a second (the new server has no
// scripts: EVALSHA falls back to EVAL, a pipeline to SCRIPT LOAD); no
// goroutine is left behind. With and without batching.
func TestServerStopsAndReturns(t *testing.T) {
	for _, tc := range []struct {
		mode FailureMode
		opts []Option
	}{
		{FailOpen, nil},
		{FailClosed, nil},
		{FailOpen, []Option{WithBatching(Batching{})}},
		{FailClosed, []Option{WithBatching(Batching{Pipelines: 2, MaxBatch: 8})}},
	} {
		mode := tc.mode
		name := mode.String()
		if tc.opts != nil {
			name += ", batching"
		}
		t.Run(name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			port, stop := ownServer(t, 0)
			c := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
			// Without the denial cache, which would answer the fourth
			// request's key while the server is down and after it comes
			// back empty (TestDenialCacheServerDown).
			l, err := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 3, Rate: 1}},
				append([]Option{WithTimeout(100 * time.Millisecond), WithFailureMode(mode), WithDenialCache(-1)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			// Up: three admitted, the fourth denied.
			for i := range 4 {
				d, err := l.AllowN(ctx, "k", 1)
				if err != nil || d.Allowed != (i < 3) {
					t.Fatalf("request %d with the server up: %+v, %v", i+1, d, err)
				}
			}
			stop()
			// Down: the failure mode decides, every call within a bound.
			for i := range 20 {
				start := time.Now()
				d, err := l.AllowN(ctx, "k", 1)
				if took := time.Since(start); took > 2*time.Second {
					t.Fatalf("a decision with the server down took %v", took)
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("request %d with the server down: error %v, want ErrUnavailable", i+1, err)
				}
				if want := mode == FailOpen; d.Allowed != want || d.Limit != 3 {
					t.Fatalf("request %d with the server down (%v): %+v", i+1, mode, d)
				}
			}
			// Back: Redis decides again (a fresh server: a fresh bucket).
			_, stop = ownServer(t, port)
			back := time.Now()
			for {
				d, err := l.AllowN(ctx, "k", 1)
				if err == nil {
					if !d.Allowed || d.Remaining != 2 {
						t.Fatalf("first decision after the server returned: %+v", d)
					}
					break
				}
				if time.Since(back) > time.Second {
					t.Fatalf("still failing a second after the server returned: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if l.evals.Load() == 0 {
				t.Errorf("the returned server had no scripts, but EVAL was never sent")
			}
			stop()
			l.Close()
			c.Close()
			// Nothing left running: the pool's goroutines end with the client.
			noneLeft(t, before)
		})
	}
}

// TestUnreachable checks that a server that never answers (a port nothing
// listens on, and one that accepts but never replies) gives the failure
// mode within the timeout, even through a client that ignores context
// deadlines (go-redis without ContextTimeoutEnabled).
func TestUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accept and say nothing
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, addr := range []string{closedAddr, silent.Addr().String()} {
		for i, mode := range []FailureMode{FailOpen, FailClosed, FailOpen, FailClosed} {
			// A client that ignores context deadlines: the limiter bounds
			// the wait itself.
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			opts := []Option{WithTimeout(50 * time.Millisecond), WithFailureMode(mode)}
			if i >= 2 {
				opts = append(opts, WithBatching(Batching{}))
			}
			l, err := New(c, limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 10, Length: time.Second}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, err := l.AllowN(context.Background(), "k", 1)
			took := time.Since(start)
			if !errors.Is(err, ErrUnavailable) || d.Allowed != (mode == FailOpen) {
				t.Errorf("%s, %v, batching %v: %+v, %v", addr, mode, i >= 2, d, err)
			}
			if took > 2*time.Second {
				t.Errorf("%s, %v, batching %v: the decision took %v with a 50ms timeout", addr, mode, i >= 2, took)
			}
			if mode == FailClosed && d.RetryAfter != 50*time.Millisecond {
				t.Errorf("fail closed: RetryAfter %v, want the timeout", d.RetryAfter)
			}
			c.Close()
		}
	}
}

// quiet drops go-redis's log lines: the fault tests make it log every
// failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }
