package limiters_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// fixed is a clock that always says the same time.
type fixed time.Time

func (c fixed) Now() time.Time { return time.Time(c) }

// Walk reports each key with what it has left, exactly, as of the
// limiter's clock: here one that stands still at the time the keys spent.
func TestWalkAtTheClock(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for _, a := range limiters.Algorithms() {
		l, err := newAlgorithm(a, limiters.Limit{N: 5, Per: 10 * time.Second}, limiters.WithClock(fixed(t0)), limiters.WithKeyNames())
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if d, _ := l.Decide(t.Context(), limiters.Request{Key: fmt.Sprint("walker-", i), N: i, At: t0}); !d.Allowed {
				t.Fatalf("%s: fixture: walker-%d denied", a, i)
			}
		}
		got := map[string]int{}
		err = l.(limiters.Walker).Walk(t.Context(), func(key string, d limiters.Decision) bool {
			got[key] = d.Remaining
			return true
		})
		if want := map[string]int{"walker-1": 4, "walker-2": 3, "walker-3": 2}; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Walk reported remaining %v, %v; want %v", a, got, err, want)
		}
		l.Close()
	}
}
