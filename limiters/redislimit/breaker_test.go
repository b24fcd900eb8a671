package redislimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/redistest"
	"github.com/ratelab/ratelab/limiters"
)

// A Redis that stops answering: three decisions wait for the timeout, then
// the breaker decides at once (its error says so) by the failure mode;
// after the cool-down one probe goes, and fails, and the breaker opens
// again; once Redis answers, the next probe closes it.
func TestBreaker(t *testing.T) {
	p := newFaultProxy(t, redistest.Addr())
	c := p.client(t, 100*time.Millisecond)
	l, err := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 10, Rate: 10}},
		WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))), WithTimeout(100*time.Millisecond),
		WithFailureMode(FailClosed), WithBreaker(3, 300*time.Millisecond), WithDenialCache(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("Redis up: %+v, %v", d, err)
	}
	p.fault.Store(halfOpen)
	for i := range 3 {
		d, err := l.AllowN(ctx, "k", 1)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBreakerOpen) || d.Allowed {
			t.Fatalf("failure %d: %+v, %v; want a timeout, failing closed", i+1, d, err)
		}
	}
	for i := range 50 {
		d, err := l.AllowN(ctx, "k", 1)
		if !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Fatalf("decision %d with the breaker open: %+v, %v; want ErrBreakerOpen, failing closed", i, d, err)
		}
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := l.AllowN(ctx, "k", 1); errors.Is(err, ErrBreakerOpen) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the probe: %v; want it to go to Redis, and time out", err)
	}
	if _, err := l.AllowN(ctx, "k", 1); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("after a failed probe: %v; want the breaker open again", err)
	}
	p.fault.Store(pass)
	time.Sleep(350 * time.Millisecond)
	for i := range 3 {
		if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("Redis back, decision %d: %+v, %v", i, d, err)
		}
	}
	if n := l.breaker.opened.Load(); n != 2 {
		t.Errorf("the breaker opened %d times, want 2", n)
	}
}

// Falling back: while Redis is down, each process of a fleet of 4 admits
// its share of the limit, a quarter of it (rounded up), per window.
func TestFallback(t *testing.T) {
	p := newFaultProxy(t, redistest.Addr())
	c := p.client(t, 50*time.Millisecond)
	s := limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 10, Length: time.Second}}
	l, err := New(c, s, WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))), WithTimeout(50*time.Millisecond),
		WithFallback(4), WithBreaker(1, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p.fault.Store(halfOpen)
	at := time.Unix(1_800_000_000, 0)
	for w := range 2 {
		admitted := 0
		for i := range 10 {
			d, _, err := l.DecideAt(context.Background(), "k", at.Add(time.Duration(w)*time.Second+time.Duration(i)*time.Millisecond), 1)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Redis down: err %v", err)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("window %d: the fallback admitted %d of 10, want 3 (10 / 4, rounded up)", w, admitted)
		}
	}
	for _, bad := range []Option{WithFallback(0), WithBreaker(-1, 0)} {
		if _, err := New(c, s, bad); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%v: want ErrInvalidParameter", err)
		}
	}
}
