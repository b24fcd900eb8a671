package redislimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// A Redis that stops answering: three decisions wait for the timeout, then
// the breaker decides at once (its error says so) by the failure mode;
// after the cool-down one probe goes, and fails, and the breaker opens
// again; once Redis answers, the next probe closes it.
func TestBreaker(t *testing.T) {
	p := proxy(t, redistest.Require(t))
	c := through(t, p, 100*time.Millisecond)
	warm(t, c, limiters.GCRA, []limiters.Limit{{N: 10, Per: time.Second}}, redistest.Prefix(t, redistest.Client(t, nil)))
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 10, Per: time.Second}},
		redislimit.WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))), redislimit.WithTimeout(100*time.Millisecond),
		redislimit.WithFailureMode(redislimit.FailClosed), redislimit.WithBreaker(3, 300*time.Millisecond), redislimit.WithDenialCache(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("Redis up: %+v, %v", d, err)
	}
	p.Set(redisfault.Silent)
	for i := range 3 {
		d, err := l.AllowN(ctx, "k", 1)
		if !errors.Is(err, redislimit.ErrUnavailable) || errors.Is(err, redislimit.ErrBreakerOpen) || d.Allowed {
			t.Fatalf("failure %d: %+v, %v; want a timeout, failing closed", i+1, d, err)
		}
	}
	if !l.BreakerOpen() {
		t.Error("BreakerOpen() = false after three failures, want true")
	}
	for i := range 50 {
		d, err := l.AllowN(ctx, "k", 1)
		if !errors.Is(err, redislimit.ErrBreakerOpen) || !errors.Is(err, redislimit.ErrUnavailable) || d.Allowed {
			t.Fatalf("decision %d with the breaker open: %+v, %v; want ErrBreakerOpen, failing closed", i, d, err)
		}
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := l.AllowN(ctx, "k", 1); errors.Is(err, redislimit.ErrBreakerOpen) || !errors.Is(err, redislimit.ErrUnavailable) {
		t.Fatalf("the probe: %v; want it to go to Redis, and time out", err)
	}
	if _, err := l.AllowN(ctx, "k", 1); !errors.Is(err, redislimit.ErrBreakerOpen) {
		t.Fatalf("after a failed probe: %v; want the breaker open again", err)
	}
	p.Set(redisfault.Pass)
	time.Sleep(350 * time.Millisecond)
	for i := range 3 {
		if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("Redis back, decision %d: %+v, %v", i, d, err)
		}
	}
	if l.BreakerOpen() {
		t.Error("BreakerOpen() = true once Redis answers again, want false")
	}
	if n := redislimit.BreakerOpened(l); n != 2 {
		t.Errorf("the breaker opened %d times, want 2", n)
	}
}

// Every call goes through one runner: a Settle against a Redis that does
// not answer is bounded by the timeout, even through a client that ignores
// context deadlines (it used to call the client directly, and wait for
// the client's own read timeout, 3s); Settle, Reset, Walk and Peek count
// as failures for the breaker, and once it is open they are refused at
// once, without a round trip, with ErrBreakerOpen.
func TestSettleBounded(t *testing.T) {
	for _, honours := range []bool{false, true} {
		p := proxy(t, redistest.Require(t))
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: honours})
		t.Cleanup(func() { c.Close() })
		const timeout = 100 * time.Millisecond
		var heard int
		warm(t, c, limiters.FixedWindow, []limiters.Limit{{N: 10, Per: time.Minute}}, redistest.Prefix(t, redistest.Client(t, nil)))
		l, err := redislimit.New(c, limiters.FixedWindow, []limiters.Limit{{N: 10, Per: time.Minute}},
			redislimit.WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))), redislimit.WithTimeout(timeout),
			redislimit.WithBreaker(4, time.Minute), redislimit.WithErrorHook(func(error) { heard++ }))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var rs []limiters.Reservation
		for range 2 {
			r, err := l.Reserve(ctx, limiters.Request{Key: "k", N: 3})
			if err != nil || !r.Allowed() {
				t.Fatalf("Reserve with Redis up: %+v, %v", r.Decision(), err)
			}
			rs = append(rs, r)
		}
		p.Set(redisfault.Silent)
		calls := []struct {
			name string
			call func() error
		}{
			{"Settle", func() error { _, err := l.Settle(ctx, limiters.Settlement{Reservation: rs[0], Actual: 1}); return err }},
			{"Reset", func() error { return l.Reset(ctx, "k") }},
			{"Walk", func() error { return l.Walk(ctx, func(string, limiters.Decision) bool { return true }) }},
			{"Peek", func() error { _, err := l.Peek(ctx, limiters.Request{Key: "k", N: 1}); return err }},
		}
		for _, call := range calls {
			start := time.Now()
			err := call.call()
			if took := time.Since(start); took > 3*timeout {
				t.Errorf("honours deadlines %v: %s took %v with a timeout of %v", honours, call.name, took, timeout)
			}
			if !errors.Is(err, redislimit.ErrUnavailable) || errors.Is(err, redislimit.ErrBreakerOpen) {
				t.Errorf("honours deadlines %v: %s: %v, want ErrUnavailable, the breaker still closed", honours, call.name, err)
			}
		}
		if !l.BreakerOpen() || heard != 4 {
			t.Fatalf("honours deadlines %v: after four failures the breaker is open %v, and the hook heard %d", honours, l.BreakerOpen(), heard)
		}
		trips := l.Counts().RoundTrips
		start := time.Now()
		_, err = l.Settle(ctx, limiters.Settlement{Reservation: rs[1], Actual: 1})
		if !errors.Is(err, redislimit.ErrBreakerOpen) || !errors.Is(err, redislimit.ErrUnavailable) {
			t.Errorf("honours deadlines %v: Settle with the breaker open: %v, want ErrBreakerOpen", honours, err)
		}
		for _, call := range calls[1:] {
			if err := call.call(); !errors.Is(err, redislimit.ErrBreakerOpen) {
				t.Errorf("honours deadlines %v: %s with the breaker open: %v, want ErrBreakerOpen", honours, call.name, err)
			}
		}
		if took := time.Since(start); took > timeout/2 || l.Counts().RoundTrips != trips {
			t.Errorf("honours deadlines %v: the refusals took %v and %d round trips, want at once and none", honours, took, l.Counts().RoundTrips-trips)
		}
		p.Set(redisfault.Pass)
	}
}
