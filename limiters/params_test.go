package limiters_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// Every constructor refuses what it cannot enforce, with an error that
// names the package and the problem and wraps ErrInvalidParameter.
func TestConstructorsValidate(t *testing.T) {
	okW := limiters.Window{Limit: 10, Length: time.Second}
	okB := limiters.Bucket{Capacity: 10, Rate: 1}
	for _, tt := range []struct {
		name string
		w    limiters.Window
		b    limiters.Bucket
		says string // for the window algorithms, then the bucket ones
	}{
		{"zero", limiters.Window{}, limiters.Bucket{}, "must be between 1 and"},
		{"negative limit", limiters.Window{Limit: -1, Length: time.Second}, limiters.Bucket{Capacity: -1, Rate: 1}, "got -1"},
		{"limit too large", limiters.Window{Limit: math.MaxInt32 + 1, Length: time.Second}, limiters.Bucket{Capacity: math.MaxInt32 + 1, Rate: 1}, "got 2147483648"},
		{"zero window or rate", limiters.Window{Limit: 1}, limiters.Bucket{Capacity: 1}, "got 0"},
		{"negative window or rate", limiters.Window{Limit: 1, Length: -time.Second}, limiters.Bucket{Capacity: 1, Rate: -2}, "-"},
		{"window too long, NaN rate", limiters.Window{Limit: 1, Length: limiters.MaxPeriod + 1}, limiters.Bucket{Capacity: 1, Rate: math.NaN()}, ""},
		{"infinite rate", okW, limiters.Bucket{Capacity: 1, Rate: math.Inf(1)}, "positive finite"},
		{"rate above 1e9", okW, limiters.Bucket{Capacity: 1, Rate: 2e9}, "at most 1e9"},
		{"refill beyond ten years", okW, limiters.Bucket{Capacity: 1000, Rate: 1e-6}, "years to refill"},
		{"rate the nanosecond cannot hold", okW, limiters.Bucket{Capacity: 10, Rate: 7.5e8}, "nearest rates that are exact are 5e+08 and 1e+09"},
	} {
		for _, a := range limiters.Algorithms() {
			w, b := tt.w, tt.b
			if a.IsBucket() {
				w = okW
			} else {
				b = okB
			}
			if w == okW && b == okB {
				continue // this row has nothing wrong for a
			}
			l, err := memory.New(limiters.Spec{Algorithm: a, Window: w, Bucket: b})
			if err == nil {
				l.Close()
				t.Errorf("%s, %s: no error", tt.name, a)
				continue
			}
			pkg := strings.ReplaceAll(string(a), "-", "")
			if !errors.Is(err, limiters.ErrInvalidParameter) || !strings.HasPrefix(err.Error(), pkg+": ") || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s, %s: error %q, want %q... wrapping ErrInvalidParameter and saying %q", tt.name, a, err, pkg+": ", tt.says)
			}
		}
	}
	// Rates that are exact enough are accepted, however odd.
	for _, r := range []float64{1e-6, 1.0 / 3, 7, 99999.7, 1e6, 2.5e6, 1e9} {
		if err := (limiters.Bucket{Capacity: 1, Rate: r}).Validate(); err != nil {
			t.Errorf("rate %v: %v", r, err)
		}
	}
	if _, err := memory.New(limiters.Spec{Algorithm: "magic", Window: okW}); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("unknown algorithm: error %v, want ErrInvalidParameter", err)
	}
	if _, err := memory.New(limiters.Spec{Algorithm: limiters.GCRA, Bucket: okB}, limiters.WithMaxKeys(-1)); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("negative MaxKeys: error %v, want ErrInvalidParameter", err)
	}
	if _, err := memory.New(limiters.Spec{Algorithm: limiters.SlidingLog, Window: limiters.Window{Limit: 1 << 27, Length: time.Second}}); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("a sliding log of 2^27 per window: error %v, want ErrInvalidParameter", err)
	}
}

// Close stops what every limiter runs in the background: synctest fails
// the test if a goroutine is left when the bubble ends.
func TestCloseLeavesNothingRunning(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := limiters.Spec{Algorithm: a, Window: limiters.Window{Limit: 5, Length: time.Second}, Bucket: limiters.Bucket{Capacity: 5, Rate: 5}}
				c := limiters.NewCoarseClock(time.Millisecond)
				l, err := memory.New(s, limiters.WithSweepInterval(time.Second), limiters.WithClock(c))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"a", "b", "c"} {
					l.AllowN(t.Context(), k, 1)
				}
				time.Sleep(time.Minute) // sweeps run, and forget the keys
				synctest.Wait()
				if n := l.Stats().Keys; n != 0 {
					t.Errorf("after a minute of sweeps: %d keys held, want 0", n)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				c.Stop()
			})
		})
	}
}
