package httplimit

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

func TestCeilSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 0},
		{1, 1},
		{time.Second - 1, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{90 * time.Second, 90},
		{limiters.Never, int64(limiters.Never/time.Second) + 1}, // no overflow
	} {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestAppendPolicy(t *testing.T) {
	for _, c := range []struct {
		l    limiters.Limit
		want string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, `"100/min";q=100;w=60`}, // no name: its rate
		{limiters.Limit{Name: "burst", N: 10, Per: time.Second, Burst: 20}, `"burst";q=20;w=2`},
		{limiters.Limit{Name: `api "v1" \ x`, N: 5, Per: time.Hour}, `"api \"v1\" \\ x";q=5;w=3600`},
		{limiters.Limit{Name: "naïve\n", N: 5, Per: 500 * time.Millisecond}, `"na??ve?";q=5`}, // ASCII only; no sub-second w
		{limiters.Limit{Name: "big", N: 2e9, Per: 1500 * time.Millisecond}, `"big";q=2000000000`},
	} {
		if got := string(appendPolicy(nil, c.l)); got != c.want {
			t.Errorf("appendPolicy(%+v) = %s, want %s", c.l, got, c.want)
		}
	}
}

func TestAppendInt(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{{-1, "0"}, {0, "0"}, {9, "9"}, {10, "10"}, {99, "99"}, {100, "100"}, {maxSFInt + 1, "999999999999999"}} {
		if got := string(appendInt(nil, c.v)); got != c.want {
			t.Errorf("appendInt(%d) = %s, want %s", c.v, got, c.want)
		}
	}
}
