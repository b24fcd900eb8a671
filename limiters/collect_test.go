package limiters_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/fixedwindow"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/leakybucket"
	"github.com/ratelab/ratelab/limiters/slidingcounter"
	"github.com/ratelab/ratelab/limiters/slidinglog"
	"github.com/ratelab/ratelab/limiters/tokenbucket"
)

// A limiter nobody holds any more is collected, closed or not, and its
// sweeper goroutine ends. (The fixed window's sweeper once held the
// limiter itself, through the function that says when a key is idle:
// every fixed window made was kept for good, 36 KB each, even after Close;
// TestModel in composite, which makes 43,200 of them, held 1.1 GB.)
func TestDroppedLimiterIsCollected(t *testing.T) {
	type limiter interface {
		limiters.Limiter
		Close() error
	}
	// Each returns the limiter and a way to ask whether it is still
	// there, through a weak pointer to the algorithm's own type.
	newOf := map[limiters.Algorithm]func(limiters.Limit) (limiter, func() bool, error){
		limiters.FixedWindow: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(fixedwindow.New(l))
		},
		limiters.SlidingLog: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(slidinglog.New(l))
		},
		limiters.SlidingCounter: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(slidingcounter.New(l))
		},
		limiters.TokenBucket: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(tokenbucket.New(l))
		},
		limiters.LeakyBucket: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(leakybucket.New(l))
		},
		limiters.GCRA: func(l limiters.Limit) (limiter, func() bool, error) {
			return watch(gcra.New(l))
		},
	}
	for _, a := range limiters.Algorithms() {
		for _, closed := range []bool{false, true} {
			name := string(a) + "/dropped"
			if closed {
				name = string(a) + "/closed"
			}
			t.Run(name, func(t *testing.T) {
				goroutines := runtime.NumGoroutine()
				alive := func() func() bool {
					l, alive, err := newOf[a](limiters.PerSecond(1))
					if err != nil {
						t.Fatal(err)
					}
					for range 2 { // one admitted, one denied
						if _, err := l.Decide(context.Background(), limiters.Request{Key: "k", N: 1, At: time.Unix(1e9, 0)}); err != nil {
							t.Fatal(err)
						}
					}
					if closed {
						l.Close()
					}
					return alive
				}()
				for range 50 {
					runtime.GC()
					if !alive() && runtime.NumGoroutine() <= goroutines {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				if alive() {
					t.Fatal("the limiter is still reachable after 50 collections: something it made holds it")
				}
				t.Fatalf("%d goroutines, %d before the limiter was made: its sweeper did not end", runtime.NumGoroutine(), goroutines)
			})
		}
	}
}

// watch returns l, as a limiter, and whether it is still reachable.
func watch[T any, P interface {
	*T
	limiters.Limiter
	Close() error
}](l P, err error) (interface {
	limiters.Limiter
	Close() error
}, func() bool, error) {
	if err != nil {
		return nil, nil, err
	}
	w := weak.Make((*T)(l))
	return l, func() bool { return w.Value() != nil }, nil
}
