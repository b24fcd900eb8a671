package limiters_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A denial remembered before an admission at a later time must not answer
// a request at an earlier time once the clock steps back: the admission
// changed the state it was decided on.
func TestCachedDenialDoesNotOutliveAdmission(t *testing.T) {
	ms := func(n int64) time.Time { return time.Unix(0, n*int64(time.Millisecond)) }
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := newMemory(spec{Algorithm: a, Limit: limiters.PerSecond(2)}, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := t.Context()
			decide := func(at time.Time, n int) limiters.Decision {
				d, err := l.Decide(ctx, limiters.Request{Key: "k", N: n, At: at})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			decide(ms(100), 2)      // spend everything
			d := decide(ms(500), 1) // denied, and remembered
			decide(ms(1200), 1)     // admitted later on
			// The clock steps back.
			want, err := l.Peek(ctx, limiters.Request{Key: "k", N: 1, At: ms(800)})
			if err != nil {
				t.Fatal(err)
			}
			got := decide(ms(800), 1)
			if d.Allowed {
				t.Fatalf("fixture: Decide(k, 500ms, 1) admitted after spending 2")
			}
			if got.Allowed != want.Allowed || (!got.Allowed && got != want) {
				t.Fatalf("Decide(k, 800ms, 1) = %+v, but Peek then = %+v", got, want)
			}
		})
	}
}

// Property: whatever the order of times, a unit request is denied exactly
// when a peek, which takes the shard's lock and no shortcut, says it would
// be, and with the same RetryAfter and ResetAfter.
func TestDenialsAgreeWithPeek(t *testing.T) {
	seeds := 200
	if testing.Short() || raceEnabled {
		seeds = 30
	}
	ctx := t.Context()
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		all := specs(t, rng)
		win := all[0].Limit // the N per W drawn, which steps the clock for all six
		for _, s := range all {
			l, err := newMemory(s, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			w := int64(win.Per)
			now := int64(1e18)
			for i := range 400 {
				switch r := rng.IntN(10); {
				case r < 5:
					now += rng.Int64N(w/int64(win.N) + 1)
				case r < 8:
					now -= rng.Int64N(w/2 + 1) // back, by up to half a window
				default:
				}
				key := string(rune('a' + rng.IntN(2)))
				at := time.Unix(0, now)
				n := 1
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(win.N)
				}
				p, err := l.Peek(ctx, limiters.Request{Key: key, N: 1, At: at})
				if err != nil {
					t.Fatal(err)
				}
				d, err := l.Decide(ctx, limiters.Request{Key: key, N: n, At: at})
				if err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					continue
				}
				if d.Allowed != p.Allowed || (!d.Allowed && (d.RetryAfter != p.RetryAfter || d.ResetAfter != p.ResetAfter || d.Remaining != p.Remaining)) {
					t.Fatalf("seed %d, %v, step %d: Decide(%q, %d, 1) = %+v, Peek = %+v", seed, s, i, key, now, d, p)
				}
			}
			l.Close()
		}
	}
}

// Before 1970 is a time like any other: keys are not forgotten early.
func TestBefore1970(t *testing.T) {
	t0 := time.Date(1960, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := newMemory(spec{Algorithm: a, Limit: limiters.PerHour(1)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := t.Context()
			if d, err := l.Decide(ctx, limiters.Request{Key: "k", N: 1, At: t0}); err != nil || !d.Allowed {
				t.Fatalf("first request in 1960 denied: %+v, %v", d, err)
			}
			// Many other keys, then a sweep, all in 1960: k is an hour
			// from full quota and must stay.
			for i := range 5000 {
				if _, err := l.Decide(ctx, limiters.Request{Key: fmt.Sprint("other-", i), N: 1, At: t0.Add(time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			l.Sweep(t0.Add(time.Second))
			if d, err := l.Decide(ctx, limiters.Request{Key: "k", N: 1, At: t0.Add(2 * time.Second)}); err != nil || d.Allowed {
				t.Fatalf("Decide(k, 1960 + 2s, 1) = %+v, %v after one request an hour: k was forgotten", d, err)
			}
		})
	}
}
