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

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// TestBatchingSameAsMemory replays random traces from many goroutines at
// once through one batching limiter, so that pipelines carry decisions of
// different keys and times together: every decision must be the in-memory
// limiter's, field for field.
//
// Through a *redis.Client a batch is one run of the batch script; through
// a Ring (as through a Cluster) it is a pipeline: both are checked.
func TestBatchingSameAsMemory(t *testing.T) {
	c := server(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": c.Options().Addr}, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	defer ring.Close()
	seed := uint64(time.Now().UnixNano())
	for _, tc := range []struct {
		name   string
		client Client
	}{{"script", c}, {"pipeline", ring}} {
		t.Run(tc.name, func(t *testing.T) { batchingSameAsMemory(t, c, tc.client, seed) })
	}
}

func batchingSameAsMemory(t *testing.T, c *redis.Client, client Client, seed uint64) {
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, seed))
			for _, k := range []int{1, 3} { // one limit, and three at once
				var limits []composite.Limit
				for i := range k {
					s := randomSpec(r, a, false).Judged()
					limits = append(limits, composite.Limit{Name: fmt.Sprint("l", i), Rate: limiters.Rate{N: s.Limit, Per: s.Length}})
				}
				mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := NewComposite(client, a, limits, WithPrefix(prefix(t, c)), WithTimeout(2*time.Second), WithBatching(Batching{Pipelines: 2, MaxBatch: 32}))
				if err != nil {
					t.Fatal(err)
				}
				defer red.Close()
				if (red.batch.many != nil) != (client == Client(c)) {
					t.Fatalf("batch script %v through %T", red.batch.many != nil, client)
				}
				var wg sync.WaitGroup
				for g := range 24 {
					trace := randomTrace(r, limits[0].Rate.Per, limits[0].Rate.N, 60)
					wg.Go(func() {
						for i, st := range trace {
							key := fmt.Sprint("g", g, "-", st.key) // each goroutine its own keys
							var want, got limiters.Decision
							wantDenied, gotDenied := -1, -1
							var err error
							if st.peek {
								want, got = mem.PeekAt(key, st.at), red.PeekAt(key, st.at)
							} else {
								want, wantDenied = mem.DecideAt(key, st.at, st.n, nil)
								got, gotDenied, err = red.DecideAt(context.Background(), key, st.at, st.n)
							}
							if err != nil || got != want || gotDenied != wantDenied {
								t.Errorf("%v, goroutine %d, step %d (%s at %v, n=%d, peek %v):\n  redis  %+v denied by %d (%v)\n  memory %+v denied by %d", limits, g, i, key, st.at.Format(time.RFC3339Nano), st.n, st.peek, got, gotDenied, err, want, wantDenied)
								return
							}
						}
					})
				}
				wg.Wait()
				// Some batch must have held several decisions, or this
				// tested decisions one by one. How many depends on how
				// the 24 goroutines are scheduled: on a loaded machine,
				// 1440 decisions went in 1352 batches.
				if d, b := red.batch.decisions.Load(), red.batch.batches.Load(); d <= b {
					t.Errorf("%d decisions in %d batches: the test should make batches of several", d, b)
				}
			}
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
	noneLeft(t, before)
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
