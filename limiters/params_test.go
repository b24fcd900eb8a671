package limiters_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Every constructor refuses what it cannot enforce, with an error that
// names the package and the problem and wraps ErrInvalidParameter.
func TestConstructorsValidate(t *testing.T) {
	sec := time.Second
	for _, tt := range []struct {
		name string
		l    limiters.Limit
		// What a window algorithm and a bucket algorithm say; "" when
		// they accept it.
		window, bucket string
	}{
		{"zero", limiters.Limit{}, "must be between 1 and", "must be between 1 and"},
		{"negative N", limiters.Limit{N: -1, Per: sec}, "got -1", "got -1"},
		{"N too large", limiters.Limit{N: math.MaxInt32 + 1, Per: sec}, "got 2147483648", "got 2147483648"},
		{"zero period", limiters.Limit{N: 1}, "got 0s", "got 0s"},
		{"negative period", limiters.Limit{N: 1, Per: -sec}, "got -1s", "got -1s"},
		{"period too long", limiters.Limit{N: 1, Per: limiters.MaxPeriod + 1}, "10 years", "10 years"},
		{"a burst", limiters.Limit{N: 10, Per: sec, Burst: 20}, "has no burst: it takes N/W, as in 10/s", ""},
		{"negative burst", limiters.Limit{N: 10, Per: sec, Burst: -1}, "has no burst", "burst must be between 1 and"},
		{"faster than a nanosecond", limiters.Limit{N: 2, Per: time.Nanosecond}, "", "faster than a unit a nanosecond"},
		{"refill beyond ten years", limiters.Limit{N: 1, Per: 1e6 * sec, Burst: 1000}, "has no burst", "years to refill"},
		{"a rate the nanosecond cannot hold", limiters.Limit{N: 3, Per: 4 * time.Nanosecond}, "", "the nearest rates that are exact are 5e+08 and 1e+09 per second"},
	} {
		for _, a := range limiters.Algorithms() {
			says := tt.window
			if a.IsBucket() {
				says = tt.bucket
			}
			l, err := newAlgorithm(a, tt.l)
			if err == nil {
				l.Close()
			}
			pkg := strings.ReplaceAll(string(a), "-", "")
			switch {
			case says == "" && err != nil:
				t.Errorf("%s, %s: %v, want it accepted", tt.name, a, err)
			case says == "":
			case err == nil:
				t.Errorf("%s, %s: no error", tt.name, a)
			case !errors.Is(err, limiters.ErrInvalidParameter) || !strings.HasPrefix(err.Error(), pkg+": ") || !strings.Contains(err.Error(), says):
				t.Errorf("%s, %s: error %q, want %q... wrapping ErrInvalidParameter and saying %q", tt.name, a, err, pkg+": ", says)
			}
		}
	}
	// A bucket of a capacity and a rate per second (the CLI's --capacity
	// and --rate) refuses rates it cannot keep, and keeps the rest
	// exactly: its interval is 1/R rounded to the nanosecond.
	for _, tt := range []struct {
		c    int
		r    float64
		says string
	}{
		{0, 1, "capacity must be between 1 and"},
		{1, 0, "got 0"},
		{1, -2, "got -2"},
		{1, math.NaN(), "positive finite"},
		{1, math.Inf(1), "positive finite"},
		{1, 2e9, "at most 1e9"},
		{10, 7.5e8, "nearest rates that are exact are 5e+08 and 1e+09"},
	} {
		if _, err := limiters.Bucket(tt.c, tt.r); !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Bucket(%d, %v) = %v, want ErrInvalidParameter saying %q", tt.c, tt.r, err, tt.says)
		}
	}
	for _, r := range []float64{1e-6, 1.0 / 3, 7, 99999.7, 1e6, 2.5e6, 1e9} {
		l, err := limiters.Bucket(1, r)
		if err == nil {
			err = l.Validate(limiters.GCRA)
		}
		if err != nil {
			t.Errorf("rate %v: %v", r, err)
		} else if want := time.Duration(math.Round(1e9 / r)); l.Interval() != want {
			t.Errorf("Bucket(1, %v).Interval() = %v, want %v", r, l.Interval(), want)
		}
	}
	if _, err := newMemory(spec{Algorithm: "magic", Limit: limiters.Limit{N: 10, Per: sec}}); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("unknown algorithm: error %v, want ErrInvalidParameter", err)
	}
	if _, err := newMemory(spec{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 1, Per: sec, Burst: 10}}, limiters.WithMaxKeys(-1)); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("negative MaxKeys: error %v, want ErrInvalidParameter", err)
	}
	if _, err := newMemory(spec{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 1 << 27, Per: sec}}); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("a sliding log of 2^27 per window: error %v, want ErrInvalidParameter", err)
	}
}

// Close stops what every limiter runs in the background: synctest fails
// the test if a goroutine is left when the bubble ends.
func TestCloseLeavesNothingRunning(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := spec{Algorithm: a, Limit: limiters.PerSecond(5)}
				c := limiters.NewCoarseClock(time.Millisecond)
				l, err := newMemory(s, limiters.WithSweepInterval(time.Second), limiters.WithClock(c))
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
