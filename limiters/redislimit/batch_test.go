package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// TestBatchingSameAsMemory replays random traces from many goroutines at
// once through one batching limiter, so that pipelines carry decisions of
// different keys and times together: every decision must be the in-memory
// limiter's, field for field.
func TestBatchingSameAsMemory(t *testing.T) {
	c := server(t)
	seed := uint64(time.Now().UnixNano())
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, seed))
			s := randomSpec(r, a, false)
			mem, err := memory.New(s, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			red, err := New(c, s, WithPrefix(prefix(t, c)), WithTimeout(2*time.Second), WithBatching(Batching{Pipelines: 2, MaxBatch: 32}))
			if err != nil {
				t.Fatal(err)
			}
			defer red.Close()
			var wg sync.WaitGroup
			for g := range 24 {
				trace := randomTrace(r, s.Judged().Length, s.Judged().Limit, 60)
				wg.Go(func() {
					for i, st := range trace {
						key := fmt.Sprint("g", g, "-", st.key) // each goroutine its own keys
						var want, got limiters.Decision
						var err error
						if st.peek {
							want = mem.PeekAtN(key, st.at, st.n)
							got = red.PeekAtN(key, st.at, st.n)
						} else {
							want = mem.AllowAt(key, st.at, st.n)
							got, _, err = red.DecideAt(context.Background(), key, st.at, st.n)
						}
						if err != nil || got != want {
							t.Errorf("%v, goroutine %d, step %d (%s at %v, n=%d, peek %v):\n  redis  %+v (%v)\n  memory %+v", s, g, i, key, st.at.Format(time.RFC3339Nano), st.n, st.peek, got, err, want)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestBatchingClose checks that Close answers what is queued, stops the
// senders, and that decisions after it follow the failure mode.
func TestBatchingClose(t *testing.T) {
	c := server(t)
	before := runtime.NumGoroutine()
	l, err := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1000, Rate: 1000}},
		WithPrefix(prefix(t, c)), WithFailureMode(FailClosed), WithBatching(Batching{Pipelines: 3}))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				d, err := l.AllowN(context.Background(), fmt.Sprint("k", g%4), 1)
				if err != nil && !errors.Is(err, ErrUnavailable) {
					t.Errorf("decision %d of goroutine %d: %v, want success or ErrUnavailable", i, g, err)
				}
				if err != nil && d.Allowed {
					t.Errorf("fail closed, but a failed decision admitted: %+v", d)
				}
				mu.Lock()
				answered++
				mu.Unlock()
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	l.Close()
	wg.Wait() // every decision came back, before Close or after
	if answered != 16*20 {
		t.Fatalf("%d decisions answered, want %d", answered, 16*20)
	}
	d, err := l.AllowN(context.Background(), "k0", 1)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errClosed) || d.Allowed {
		t.Errorf("after Close: %+v, %v; want a fail-closed denial saying the limiter is closed", d, err)
	}
	l.Close() // twice is fine
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// TestBatchingCanceled checks that a caller whose context ends stops
// waiting, and that the limiter goes on deciding for the others.
func TestBatchingCanceled(t *testing.T) {
	c := server(t)
	l, err := New(c, limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 5, Length: time.Minute}},
		WithPrefix(prefix(t, c)), WithBatching(Batching{Pipelines: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.AllowN(ctx, "k", 1); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("canceled context: %v, want ErrUnavailable and context.Canceled", err)
	}
	d, err := l.AllowN(context.Background(), "other", 1)
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Errorf("after a canceled decision: %+v, %v", d, err)
	}
}

func TestBatchingBadParameters(t *testing.T) {
	c := server(t)
	for _, b := range []Batching{{Pipelines: -1}, {MaxBatch: -2}} {
		if _, err := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, WithBatching(b)); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%+v: %v, want ErrInvalidParameter", b, err)
		}
	}
}
