package redislimit_test

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
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// TestBatchingSameAsMemory replays random traces from many goroutines at
// once through one batching limiter, so that batches carry decisions of
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
		client redislimit.Client
	}{{"script", c}, {"pipeline", ring}} {
		t.Run(tc.name, func(t *testing.T) { batchingSameAsMemory(t, c, tc.client, seed) })
	}
}

func batchingSameAsMemory(t *testing.T, c *redis.Client, client redislimit.Client, seed uint64) {
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, seed))
			for _, k := range []int{1, 3} { // one limit, and three at once
				var limits []limiters.Limit
				for i := range k {
					lim := randomLimit(r, a, false)
					lim.Name = fmt.Sprint("l", i)
					limits = append(limits, lim)
				}
				mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := redislimit.New(client, a, limits, redislimit.WithPrefix(prefix(t, c)), redislimit.WithTimeout(2*time.Second),
					redislimit.WithBatching(redislimit.Batching{Pipelines: 2, MaxBatch: 32}))
				if err != nil {
					t.Fatal(err)
				}
				defer red.Close()
				if redislimit.Scripted(red) != (client == redislimit.Client(c)) {
					t.Fatalf("batch script %v through %T", redislimit.Scripted(red), client)
				}
				var wg sync.WaitGroup
				for g := range 24 {
					trace := randomTrace(r, limits[0].Window(), limits[0].Quota(), 60)
					wg.Go(func() {
						for i, st := range trace {
							key := fmt.Sprint("g", g, "-", st.key) // each goroutine its own keys
							var want, got limiters.Decision
							var err error
							if st.peek {
								want, _ = mem.Peek(ctx, at(key, st.at, st.n))
								got, err = red.Peek(ctx, at(key, st.at, st.n))
							} else {
								want, _ = mem.Decide(ctx, at(key, st.at, st.n))
								got, err = red.Decide(ctx, at(key, st.at, st.n))
							}
							if err != nil || !same(got, want) {
								t.Errorf("%v, goroutine %d, step %d (%s at %v, n=%d, peek %v):\n  redis  %s (%v)\n  memory %s",
									limits, g, i, key, st.at.Format(time.RFC3339Nano), st.n, st.peek, show(got), err, show(want))
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
				if n := red.Counts(); n.Sent <= n.RoundTrips {
					t.Errorf("%d decisions in %d round trips: the test should make batches of several", n.Sent, n.RoundTrips)
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
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1000, Per: time.Second}},
		redislimit.WithPrefix(prefix(t, c)), redislimit.WithFailureMode(redislimit.FailClosed), redislimit.WithBatching(redislimit.Batching{Pipelines: 3}))
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
				if err != nil && !errors.Is(err, redislimit.ErrUnavailable) {
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
	if !errors.Is(err, redislimit.ErrUnavailable) || !errors.Is(err, redislimit.ErrClosed) || d.Allowed {
		t.Errorf("after Close: %+v, %v; want a fail-closed denial saying the limiter is closed", d, err)
	}
	l.Close() // twice is fine
	noneLeft(t, before)
}

// TestBatchingCanceled checks that a caller whose context ends stops
// waiting, and that the limiter goes on deciding for the others.
func TestBatchingCanceled(t *testing.T) {
	c := server(t)
	l, err := redislimit.New(c, limiters.FixedWindow, []limiters.Limit{{N: 5, Per: time.Minute}},
		redislimit.WithPrefix(prefix(t, c)), redislimit.WithBatching(redislimit.Batching{Pipelines: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.AllowN(ctx, "k", 1); !errors.Is(err, context.Canceled) || !errors.Is(err, redislimit.ErrUnavailable) {
		t.Errorf("canceled context: %v, want ErrUnavailable and context.Canceled", err)
	}
	d, err := l.AllowN(context.Background(), "other", 1)
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Errorf("after a canceled decision: %+v, %v", d, err)
	}
}

func TestBatchingBadParameters(t *testing.T) {
	c := server(t)
	for _, b := range []redislimit.Batching{{Pipelines: -1}, {MaxBatch: -2}} {
		if _, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second}}, redislimit.WithBatching(b)); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%+v: %v, want ErrInvalidParameter", b, err)
		}
	}
}
