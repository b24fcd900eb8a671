package leakybucket_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/leakybucket"
)

func newShaper(t *testing.T, c int, rate float64) *leakybucket.Limiter {
	t.Helper()
	lim, err := limiters.Bucket(c, rate)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leakybucket.New(lim, limiters.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A burst into a bucket of 5 leaking 10 per second comes out 100ms apart;
// the sixth finds no room and is turned away at once.
func TestWaitShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newShaper(t, 5, 10)
		start := time.Now()
		var mu sync.Mutex
		var released []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			d, err := l.Wait(context.Background(), "k", 0) // cost 0 is refused
			if err == nil || d.Allowed {
				t.Fatalf("Wait(k, 0) = %+v, %v; want an ErrInvalidCost", d, err)
			}
			// Queue in order, one after the other, at the same instant.
			ready := make(chan struct{})
			wg.Go(func() {
				close(ready)
				d, err := l.Wait(context.Background(), "k", 1)
				if err != nil || !d.Allowed {
					t.Errorf("Wait #%d = %+v, %v; want admitted", i, d, err)
				}
				mu.Lock()
				released = append(released, time.Since(start))
				mu.Unlock()
			})
			<-ready
			synctest.Wait()
		}
		d, err := l.Wait(context.Background(), "k", 1)
		if err != nil || d.Allowed || d.RetryAfter != 100*time.Millisecond {
			t.Fatalf("sixth Wait into a full bucket = %+v, %v; want denied at once, RetryAfter 100ms", d, err)
		}
		wg.Wait()
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
		for i := range want {
			if released[i] != want[i] {
				t.Fatalf("released at %v, want %v", released, want)
			}
		}
	})
}

// Wait refuses up front what a deadline would cut short, and a cancelled
// wait returns the context's error.
func TestWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newShaper(t, 5, 10)
		for range 3 {
			l.AllowN(context.Background(), "k", 1) // 300ms of water ahead
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		d, err := l.Wait(ctx, "k", 1)
		if !errors.Is(err, context.DeadlineExceeded) || d.Allowed {
			t.Fatalf("Wait with 250ms left behind 300ms of water = %+v, %v; want DeadlineExceeded, not admitted", d, err)
		}
		if p, _ := l.Peek(context.Background(), limiters.Request{Key: "k", N: 1}); p.Remaining != 2 {
			t.Fatalf("after a refused Wait, Remaining = %d, want 2: nothing was queued", p.Remaining)
		}
		if d.RetryAfter != 300*time.Millisecond {
			t.Fatalf("refused Wait: RetryAfter = %v, want 300ms, when its turn would have come", d.RetryAfter)
		}
		// A refusal for time is not a denial: a request admits at once,
		// even one whose clock is a little behind.
		if d, _ := l.Decide(context.Background(), limiters.Request{Key: "k", N: 1, At: time.Now().Add(-time.Millisecond)}); !d.Allowed {
			t.Fatalf("Decide after a Wait refused for its deadline = %+v, want admitted", d)
		}

		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		if _, err := l.Wait(ctx, "k", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait = %v, want context.Canceled", err)
		}
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Fatalf("cancelled Wait returned after %v, want 50ms", waited)
		}
		if _, err := l.Wait(ctx, "k", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with a done context = %v, want context.Canceled", err)
		}
	})
}
