package limiters_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

func TestParseLimit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want limiters.Limit
		str  string // what String prints
	}{
		{"10/s", limiters.Limit{N: 10, Per: time.Second}, "10/s"},
		{"100/min", limiters.Limit{N: 100, Per: time.Minute}, "100/min"},
		{"5/60s", limiters.Limit{N: 5, Per: time.Minute}, "5/min"}, // printed in the largest unit
		{"1000/day", limiters.Limit{N: 1000, Per: 24 * time.Hour}, "1000/day"},
		{"10/s burst 50", limiters.Limit{N: 10, Per: time.Second, Burst: 50}, "10/s burst 50"},
		{"  3/h   burst 3 ", limiters.Limit{N: 3, Per: time.Hour, Burst: 3}, "3/h burst 3"},
		{"10/90s", limiters.Limit{N: 10, Per: 90 * time.Second}, "10/90s"},
		{"10/1m30s", limiters.Limit{N: 10, Per: 90 * time.Second}, "10/90s"}, // a Go duration
		{"1/1.5s", limiters.Limit{N: 1, Per: 1500 * time.Millisecond}, "1/1500ms"},
		{"7/250ms", limiters.Limit{N: 7, Per: 250 * time.Millisecond}, "7/250ms"},
		{"1/2500us", limiters.Limit{N: 1, Per: 2500 * time.Microsecond}, "1/2.5ms"},
		{"60/hour", limiters.Limit{N: 60, Per: time.Hour}, "60/h"},
		{"2/m", limiters.Limit{N: 2, Per: time.Minute}, "2/min"},
		{"2/48h", limiters.Limit{N: 2, Per: 48 * time.Hour}, "2/2day"},
		{"1/sec", limiters.Limit{N: 1, Per: time.Second}, "1/s"},
		{"5/2days", limiters.Limit{N: 5, Per: 48 * time.Hour}, "5/2day"},
	} {
		got, err := limiters.ParseLimit(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseLimit(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			continue
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParseLimit(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
	}
}

func TestParseLimitRefuses(t *testing.T) {
	for _, tt := range []struct{ in, says string }{
		{"", "it is empty"},
		{"10", "no / between"},
		{"/s", "the count is missing"},
		{"ten/s", `the count "ten" is not a whole number`},
		{"-1/s", `the count "-1" is not a whole number`},
		{"0/s", "the count is zero"},
		{"1.5/s", `the count "1.5" is not a whole number`},
		{"99999999999/s", "the count 99999999999 is more than 2147483647"},
		{"10/", "the period is missing"},
		{"10/fortnight", `the period "fortnight" is not a unit`},
		{"10/0s", `the period "0s" is zero or too long`},
		{"10/-1s", `the period "-1s" is not a unit`},
		{"1/87601h0m", `the period "87601h0m" is zero or too long (at most 3650day)`}, // found by FuzzParseLimit
		{"1/0m700000000s", `the period "0m700000000s" is zero or too long`},
		{"10/99999day", `the period "99999day" is zero or too long`},
		{"10/s burst", "after the rate comes nothing, or burst and a number"},
		{"10/s burst 0", "the burst is zero"},
		{"10/s bust 5", `"bust" is not "burst"`},
		{"10/s burst 5 more", "after the rate comes nothing"},
	} {
		_, err := limiters.ParseLimit(tt.in)
		if !errors.Is(err, limiters.ErrLimitSyntax) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("ParseLimit(%q) = %v, want ErrLimitSyntax saying %q", tt.in, err, tt.says)
		}
	}
}

// A limit read for each algorithm: N per W for a window, a bucket of N
// (or the burst) refilled at N per W; a burst is refused for a window, and
// what no limiter can keep is refused for all.
func TestLimitFor(t *testing.T) {
	l, _ := limiters.ParseLimit("1000/day")
	if err := l.Validate(limiters.SlidingCounter); err != nil || l.Quota() != 1000 || l.Window() != 24*time.Hour {
		t.Errorf("1000/day for the sliding counter: quota %d per %v, %v", l.Quota(), l.Window(), err)
	}
	if err := l.Validate(limiters.GCRA); err != nil || l.Quota() != 1000 || l.Interval() != 86400*time.Millisecond {
		t.Errorf("1000/day for GCRA: quota %d, interval %v, %v; want 1000, a token every 86.4s", l.Quota(), l.Interval(), err)
	}
	l, _ = limiters.ParseLimit("10/s burst 50")
	if err := l.Validate(limiters.TokenBucket); err != nil || l.Quota() != 50 || l.Interval() != 100*time.Millisecond || l.Window() != 5*time.Second {
		t.Errorf("10/s burst 50 for the token bucket: quota %d, interval %v, window %v, %v", l.Quota(), l.Interval(), l.Window(), err)
	}
	if err := l.Validate(limiters.FixedWindow); !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), "fixed-window has no burst: it takes N/W, as in 10/s") {
		t.Errorf("a burst for the fixed window: %v", err)
	}
	if err := l.Validate("magic"); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("an unknown algorithm: %v", err)
	}
	// Parsed, but no limiter can keep it: 3 a nanosecond.
	l, _ = limiters.ParseLimit("3/1ns")
	if err := l.Validate(limiters.GCRA); !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), "3/1ns") {
		t.Errorf("3/1ns for GCRA: %v", err)
	}
	// The helpers, and names.
	if got := limiters.PerMinute(100); got != (limiters.Limit{N: 100, Per: time.Minute}) || got.Named().Name != "100/min" {
		t.Errorf("PerMinute(100) = %+v, named %q", got, got.Named().Name)
	}
	if got := (limiters.Limit{Name: "daily", N: 5}).Named().Name; got != "daily" {
		t.Errorf("Named() of a named limit = %q, want its own name", got)
	}
}

// FuzzParseLimit: whatever ParseLimit reads, String prints in a form it
// reads back to the same rate, and that form is stable.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"1/87601h0m", "10/s", "100/min", "5/60s", "1000/day", "10/s burst 50", "1/1.5s", "2/1m30s", "3/1ns", "1/2500us", "0/s", "10/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := limiters.ParseLimit(s)
		if err != nil {
			if !errors.Is(err, limiters.ErrLimitSyntax) {
				t.Fatalf("ParseLimit(%q) = %v, not an ErrLimitSyntax", s, err)
			}
			return
		}
		if r.N < 1 || r.N > limiters.MaxLimit || r.Per <= 0 || r.Burst < 0 || r.Burst > limiters.MaxLimit {
			t.Fatalf("ParseLimit(%q) = %+v: out of range", s, r)
		}
		printed := r.String()
		back, err := limiters.ParseLimit(printed)
		if err != nil || back != r {
			t.Fatalf("ParseLimit(%q) = %+v, printed %q, read back as %+v, %v", s, r, printed, back, err)
		}
		if again := back.String(); again != printed {
			t.Fatalf("%q printed again as %q", printed, again)
		}
	})
}
