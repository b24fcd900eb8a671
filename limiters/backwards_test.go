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
			l, err := newMemory(spec{
				Algorithm: a,
				Window:    window{Limit: 2, Length: time.Second},
				Bucket:    bucket{Capacity: 2, Rate: 2},
			}, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.AllowAt("k", ms(100), 2)      // spend everything
			d := l.AllowAt("k", ms(500), 1) // denied, and remembered
			l.AllowAt("k", ms(1200), 1)     // admitted later on
			want := l.PeekAt("k", ms(800))  // the clock steps back
			got := l.AllowAt("k", ms(800), 1)
			if d.Allowed {
				t.Fatalf("fixture: AllowAt(k, 500ms, 1) admitted after spending 2")
			}
			if got.Allowed != want.Allowed || (!got.Allowed && got != want) {
				t.Fatalf("AllowAt(k, 800ms, 1) = %+v, but PeekAt then = %+v", got, want)
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
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, s := range specs(rng) {
			l, err := newMemory(s, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			w := int64(s.Window.Length)
			now := int64(1e18)
			for i := range 400 {
				switch r := rng.IntN(10); {
				case r < 5:
					now += rng.Int64N(w/int64(s.Window.Limit) + 1)
				case r < 8:
					now -= rng.Int64N(w/2 + 1) // back, by up to half a window
				default:
				}
				key := string(rune('a' + rng.IntN(2)))
				at := time.Unix(0, now)
				n := 1
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(s.Window.Limit)
				}
				p := l.PeekAt(key, at)
				d := l.AllowAt(key, at, n)
				if n != 1 {
					continue
				}
				if d.Allowed != p.Allowed || (!d.Allowed && (d.RetryAfter != p.RetryAfter || d.ResetAfter != p.ResetAfter || d.Remaining != p.Remaining)) {
					t.Fatalf("seed %d, %v, step %d: AllowAt(%q, %d, 1) = %+v, PeekAt = %+v", seed, s, i, key, now, d, p)
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
			l, err := newMemory(spec{
				Algorithm: a,
				Window:    window{Limit: 1, Length: time.Hour},
				Bucket:    bucket{Capacity: 1, Rate: 1.0 / 3600},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if !l.AllowAt("k", t0, 1).Allowed {
				t.Fatal("first request in 1960 denied")
			}
			// Many other keys, then a sweep, all in 1960: k is an hour
			// from full quota and must stay.
			for i := range 5000 {
				l.AllowAt(fmt.Sprint("other-", i), t0.Add(time.Second), 1)
			}
			l.Sweep(t0.Add(time.Second))
			if d := l.AllowAt("k", t0.Add(2*time.Second), 1); d.Allowed {
				t.Fatalf("AllowAt(k, 1960 + 2s, 1) = %+v after one request an hour: k was forgotten", d)
			}
		})
	}
}
