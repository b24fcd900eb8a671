package redislimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/redistest"
	"github.com/ratelab/ratelab/limiters"
)

// switchProxy is a TCP proxy to the test server that can be made to stop
// answering: a connection made while it is down, or bytes sent while it
// is, are swallowed, as by a host that vanished.
type switchProxy struct {
	l    net.Listener
	down atomic.Bool
	wg   sync.WaitGroup
}

func newSwitchProxy(t *testing.T) *switchProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{l: l}
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { l.Close(); p.wg.Wait() })
	return p
}

func (p *switchProxy) serve(c net.Conn) {
	defer c.Close()
	if p.down.Load() {
		io.Copy(io.Discard, c)
		return
	}
	up, err := net.Dial("tcp", redistest.Addr())
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() { // replies, unless down
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				break
			}
			if !p.down.Load() {
				c.Write(buf[:n])
			}
		}
		close(done)
	}()
	io.Copy(up, c)
	up.Close()
	<-done
}

func (p *switchProxy) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.l.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true,
		PoolTimeout: 100 * time.Millisecond, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// A Redis that stops answering: three decisions wait for the timeout, then
// the breaker decides at once (its error says so) by the failure mode;
// after the cool-down one probe goes, and fails, and the breaker opens
// again; once Redis answers, the next probe closes it.
func TestBreaker(t *testing.T) {
	p := newSwitchProxy(t)
	c := p.client(t)
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
	p.down.Store(true)
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
	p.down.Store(false)
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
	p := newSwitchProxy(t)
	c := p.client(t)
	s := limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 10, Length: time.Second}}
	l, err := New(c, s, WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))), WithTimeout(50*time.Millisecond),
		WithFallback(4), WithBreaker(1, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p.down.Store(true)
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
