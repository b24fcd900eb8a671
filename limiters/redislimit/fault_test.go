package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// TestServerStopsAndReturns stops a real Redis server while decisions are
// being made and starts it again: while it is down every decision follows
// the failure mode, with ErrUnavailable, in bounded time; once it is back
// decisions are Redis's again within a second (the new server has no
// scripts: EVALSHA falls back to EVAL, a pipeline to SCRIPT LOAD); no
// goroutine is left behind. With and without batching.
func TestServerStopsAndReturns(t *testing.T) {
	for _, tc := range []struct {
		mode redislimit.FailureMode
		opts []redislimit.Option
	}{
		{redislimit.FailOpen, nil},
		{redislimit.FailClosed, nil},
		{redislimit.FailOpen, []redislimit.Option{redislimit.WithBatching(redislimit.Batching{})}},
		{redislimit.FailClosed, []redislimit.Option{redislimit.WithBatching(redislimit.Batching{Pipelines: 2, MaxBatch: 8})}},
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
			warm(t, c, limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second, Burst: 3}}, "warm:") // a server of its own
			// Without the denial cache, which would answer the fourth
			// request's key while the server is down and after it comes
			// back empty (TestDenialCacheServerDown).
			l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second, Burst: 3}},
				append([]redislimit.Option{redislimit.WithTimeout(100 * time.Millisecond), redislimit.WithFailureMode(mode), redislimit.WithDenialCache(-1)}, tc.opts...)...)
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
				if !errors.Is(err, redislimit.ErrUnavailable) {
					t.Fatalf("request %d with the server down: error %v, want ErrUnavailable", i+1, err)
				}
				if want := mode == redislimit.FailOpen; d.Allowed != want || d.Limit != 3 {
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
			admin := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port)})
			if redistest.CommandCalls(t, admin)["eval"] == 0 {
				t.Errorf("the returned server had no scripts, but EVAL was never sent")
			}
			admin.Close()
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
		for i, mode := range []redislimit.FailureMode{redislimit.FailOpen, redislimit.FailClosed, redislimit.FailOpen, redislimit.FailClosed} {
			// A client that ignores context deadlines: the limiter bounds
			// the wait itself.
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			opts := []redislimit.Option{redislimit.WithTimeout(50 * time.Millisecond), redislimit.WithFailureMode(mode)}
			if i >= 2 {
				opts = append(opts, redislimit.WithBatching(redislimit.Batching{}))
			}
			l, err := redislimit.New(c, limiters.FixedWindow, []limiters.Limit{{N: 10, Per: time.Second}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, err := l.AllowN(context.Background(), "k", 1)
			took := time.Since(start)
			if !errors.Is(err, redislimit.ErrUnavailable) || d.Allowed != (mode == redislimit.FailOpen) || d.Policy == nil {
				t.Errorf("%s, %v, batching %v: %+v, %v", addr, mode, i >= 2, d, err)
			}
			if took > 2*time.Second {
				t.Errorf("%s, %v, batching %v: the decision took %v with a 50ms timeout", addr, mode, i >= 2, took)
			}
			if mode == redislimit.FailClosed && d.RetryAfter != 50*time.Millisecond {
				t.Errorf("fail closed: RetryAfter %v, want the timeout", d.RetryAfter)
			}
			l.Close()
			c.Close()
		}
	}
}

// garbled is a client whose every script is answered with reply, as a
// broken server or proxy might.
type garbled struct {
	*redis.Client
	reply any
}

func (g garbled) Process(ctx context.Context, cmd redis.Cmder) error {
	cmd.(*redis.Cmd).SetVal(g.reply)
	return nil
}

// TestMalformedReply checks that a reply the limiter cannot read is a
// failure of Redis's, never a decision: the error wraps ErrUnavailable,
// the decision is the failure mode's, and the error hook hears of it.
func TestMalformedReply(t *testing.T) {
	c := server(t)
	for _, tc := range []struct {
		a     limiters.Algorithm
		per   time.Duration
		reply any
	}{
		{limiters.FixedWindow, time.Second, "1 0 5 4 0"},
		{limiters.FixedWindow, time.Second, "2 0 5 4 0 1"},
		{limiters.FixedWindow, time.Second, int64(1)},
		{limiters.GCRA, 500, "x"},
		{limiters.GCRA, 500, int64(501)}, // C=5, T=100ns: more debt than the capacity holds
	} {
		var heard []error
		l, err := redislimit.New(garbled{c, tc.reply}, tc.a, []limiters.Limit{{N: 5, Per: tc.per}},
			redislimit.WithFailureMode(redislimit.FailClosed), redislimit.WithTimeout(time.Second), redislimit.WithDenialCache(-1),
			redislimit.WithErrorHook(func(err error) { heard = append(heard, err) }))
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.AllowN(t.Context(), "k", 1)
		if !errors.Is(err, redislimit.ErrUnavailable) || d.Allowed || d.RetryAfter != time.Second || d.Limit != 5 || d.Policy == nil {
			t.Errorf("%s, a reply %#v: %s, %v; want refused, failing closed", tc.a, tc.reply, show(d), err)
		}
		if len(heard) != 1 || !errors.Is(heard[0], redislimit.ErrUnavailable) {
			t.Errorf("%s, a reply %#v: the hook heard %v", tc.a, tc.reply, heard)
		}
	}
}
