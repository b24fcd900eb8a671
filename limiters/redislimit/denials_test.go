package redislimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// On the same trace at explicit times, a Limiter with the denial cache
// decides as one without it, field for field, and as the same algorithm
// in memory (TestSameAsMemory runs with the cache, its default); here an
// attack, where the cache answers most requests without a round trip.
func TestDenialCacheSameDecisions(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			for trial := range 4 {
				lim := []limiters.Limit{randomLimit(r, a, false)}
				with, err := redislimit.New(c, a, lim, patient, redislimit.WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatal(err)
				}
				without, err := redislimit.New(c, a, lim, patient, redislimit.WithPrefix(prefix(t, c)), redislimit.WithDenialCache(-1))
				if err != nil {
					t.Fatal(err)
				}
				// Ten times the limit, on three keys, time stepping back now
				// and then; one request in five costs more than 1.
				trace := randomTrace(r, lim[0].Window()/10, lim[0].Quota(), 400)
				for i, st := range trace {
					got, err1 := with.Decide(context.Background(), at(st.key, st.at, st.n))
					want, err2 := without.Decide(context.Background(), at(st.key, st.at, st.n))
					if err1 != nil || err2 != nil || !same(got, want) {
						t.Fatalf("%v, trial %d, step %d (%s at %v, n=%d):\n  cached   %s (%v)\n  uncached %s (%v)",
							lim, trial, i, st.key, st.at.Format(time.RFC3339Nano), st.n, show(got), err1, show(want), err2)
					}
				}
				cw, cwo := with.Counts(), without.Counts()
				if cwo.Sent != int64(len(trace)) || cw.Sent >= cwo.Sent || cw.RoundTrips != cw.Sent {
					t.Errorf("%v: with the cache %+v, without %+v: want every one of %d sent without it, fewer with it", lim, cw, cwo, len(trace))
				}
			}
		})
	}
}

// Several limits: the limits that denied (Denied), and the Limit, are the
// cache's answer too.
func TestDenialCacheComposite(t *testing.T) {
	c := server(t)
	limits := []limiters.Limit{{Name: "second", N: 3, Per: time.Second}, {Name: "minute", N: 5, Per: time.Minute}}
	with, err := redislimit.New(c, limiters.GCRA, limits, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	without, err := redislimit.New(c, limiters.GCRA, limits, patient, redislimit.WithPrefix(prefix(t, c)), redislimit.WithDenialCache(-1))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		when := t0.Add(time.Duration(i) * 37 * time.Millisecond)
		got, _ := with.Decide(context.Background(), at("k", when, 1))
		want, _ := without.Decide(context.Background(), at("k", when, 1))
		if !same(got, want) {
			t.Fatalf("step %d at +%v: cached %s, uncached %s", i, when.Sub(t0), show(got), show(want))
		}
	}
	if n := 200 - with.Counts().Sent; n < 150 {
		t.Errorf("the cache answered %d of 200, want most: five a minute", n)
	}
}

// Reset through the Limiter clears what it cached; a Reset by another
// process is not seen, until the cached retry-after passes.
func TestDenialCacheReset(t *testing.T) {
	c := server(t)
	p := prefix(t, c)
	limits := []limiters.Limit{{N: 2, Per: time.Hour}}
	l, err := redislimit.New(c, limiters.FixedWindow, limits, patient, redislimit.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	other, err := redislimit.New(c, limiters.FixedWindow, limits, patient, redislimit.WithPrefix(p)) // another process, on the same keys
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deny := func(what string) {
		t.Helper()
		for range 3 {
			l.AllowN(ctx, "k", 1)
		}
		sent := l.Counts().Sent
		if d, err := l.AllowN(ctx, "k", 1); d.Allowed || err != nil || l.Counts().Sent != sent {
			t.Fatalf("%s: %+v, %v, %+v: want a denial from the cache", what, d, err, l.Counts())
		}
	}
	deny("the third request on")
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.AllowN(ctx, "k", 1); !d.Allowed || d.Remaining != 1 {
		t.Errorf("after Reset: %+v, want admitted with one left", d)
	}
	deny("again")
	if err := other.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.AllowN(ctx, "k", 1); d.Allowed {
		t.Errorf("after another process's Reset: %+v, want the cached denial (documented)", d)
	}
	if d, _ := l.AllowN(ctx, "k", 2); !d.Allowed {
		t.Errorf("a cost of 2, which goes to Redis, after the other's Reset: %+v, want admitted", d)
	}
	deny("once more")
	if err := l.ResetAll(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.AllowN(ctx, "k", 1); !d.Allowed {
		t.Errorf("after ResetAll: %+v, want admitted", d)
	}
}

// While Redis is down a cached denial is still Redis's last word: the key
// stays denied, with no wait and no error, until its retry-after; other
// keys follow the failure mode.
func TestDenialCacheServerDown(t *testing.T) {
	port, stop := ownServer(t, 0)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	warm(t, c, limiters.GCRA, []limiters.Limit{{N: 1, Per: 10 * time.Second}}, "warm:") // a server of its own
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1, Per: 10 * time.Second}}, redislimit.WithTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.AllowN(ctx, "k", 1)
	if d, err := l.AllowN(ctx, "k", 1); d.Allowed || err != nil {
		t.Fatalf("the second request: %+v, %v: want denied for ten seconds", d, err)
	}
	stop()
	sent := l.Counts().Sent
	if d, err := l.AllowN(ctx, "k", 1); d.Allowed || err != nil || d.RetryAfter <= 9*time.Second {
		t.Errorf("with the server down: %+v, %v: want the cached denial", d, err)
	}
	if n := l.Counts().Sent; n != sent {
		t.Errorf("the cached denial sent %d decisions to Redis: it should make no call", n-sent)
	}
	if d, err := l.AllowN(ctx, "other", 1); !d.Allowed || err == nil {
		t.Errorf("another key with the server down: %+v, %v: want fail open, with the error", d, err)
	}
}

// Many goroutines on one key, with the cache, admit exactly the limit, and
// all but a few of the denials are the cache's; a cached denial makes no
// allocation.
func TestDenialCacheConcurrent(t *testing.T) {
	c := server(t)
	// A decision that failed is the failure mode's: reported, not counted.
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1, Per: 1000 * time.Second, Burst: 50}}, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				d, err := l.AllowN(context.Background(), "hot", 1)
				if err != nil {
					t.Errorf("a decision failed: %v", err)
				} else if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	counts := l.Counts()
	if admitted.Load() != 50 {
		t.Errorf("admitted %d, want the capacity, 50", admitted.Load())
	}
	if counts.Sent > 200 || counts.RoundTrips != counts.Sent {
		t.Errorf("counts %+v: want most of the 3,150 denials from the cache", counts)
	}
	if a := testing.AllocsPerRun(100, func() { l.AllowN(context.Background(), "hot", 1) }); a != 0 {
		t.Errorf("a cached denial makes %v allocations, want 0", a)
	}
}
