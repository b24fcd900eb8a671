package limiters_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A key cap forgets keys, and a forgotten key starts fresh, even one whose
// denials the limiter remembered: no denial outlives its key.
func TestEvictedKeyStartsFresh(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			s := spec{Algorithm: a, Limit: limiters.Limit{N: 3, Per: 10 * time.Second}}
			l, err := newMemory(s, limiters.WithMaxKeys(64), limiters.WithSweepInterval(-1), limiters.WithKeyNames())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := t.Context()
			t0 := time.Unix(1000, 0)
			// "victim" is spent and denied first, so it is the key
			// nearest to full quota when the cap needs room.
			for range 3 {
				if _, err := l.Decide(ctx, limiters.Request{Key: "victim", N: 1, At: t0}); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				if d, err := l.Decide(ctx, limiters.Request{Key: "victim", N: 1, At: t0}); err != nil || d.Allowed {
					t.Fatalf("fixture: victim admitted past its limit: %+v, %v", d, err)
				}
			}
			// Busy keys arrive until the cap has had to forget victim.
			// It is the key nearest to full quota (for the fixed window,
			// tied with every other: all fill up at the window's end), so
			// it goes soon; the bound only guards against never.
			later := t0.Add(2 * time.Second)
			held := true
			for i := 0; held; i++ {
				if i == 50000 {
					t.Fatalf("fixture: victim still held after %d keys passed through a cap of 64", i)
				}
				if _, err := l.Decide(ctx, limiters.Request{Key: fmt.Sprint("busy-", i), N: 3, At: later}); err != nil {
					t.Fatal(err)
				}
				if i%100 == 99 {
					held = false
					err := l.Walk(ctx, func(key string, d limiters.Decision) bool {
						held = held || key == "victim"
						return true
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if st := l.Stats(); st.Keys > 64 || st.Evicted == 0 {
				t.Fatalf("fixture: %+v, want at most 64 keys and some evicted", st)
			}
			if d, err := l.Decide(ctx, limiters.Request{Key: "victim", N: 1, At: later}); err != nil || !d.Allowed || d.Remaining != 2 {
				t.Fatalf("victim forgotten under the cap: Decide = %+v, %v, want a fresh key's (allowed, Remaining 2)", d, err)
			}
		})
	}
}
