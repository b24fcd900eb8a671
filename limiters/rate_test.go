package limiters_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want limiters.Rate
		str  string // what String prints
	}{
		{"10/s", limiters.Rate{N: 10, Per: time.Second}, "10/s"},
		{"100/min", limiters.Rate{N: 100, Per: time.Minute}, "100/min"},
		{"5/60s", limiters.Rate{N: 5, Per: time.Minute}, "5/min"}, // printed in the largest unit
		{"1000/day", limiters.Rate{N: 1000, Per: 24 * time.Hour}, "1000/day"},
		{"10/s burst 50", limiters.Rate{N: 10, Per: time.Second, Burst: 50}, "10/s burst 50"},
		{"  3/h   burst 3 ", limiters.Rate{N: 3, Per: time.Hour, Burst: 3}, "3/h burst 3"},
		{"10/90s", limiters.Rate{N: 10, Per: 90 * time.Second}, "10/90s"},
		{"10/1m30s", limiters.Rate{N: 10, Per: 90 * time.Second}, "10/90s"}, // a Go duration
		{"1/1.5s", limiters.Rate{N: 1, Per: 1500 * time.Millisecond}, "1/1500ms"},
		{"7/250ms", limiters.Rate{N: 7, Per: 250 * time.Millisecond}, "7/250ms"},
		{"1/2500us", limiters.Rate{N: 1, Per: 2500 * time.Microsecond}, "1/2.5ms"},
		{"60/hour", limiters.Rate{N: 60, Per: time.Hour}, "60/h"},
		{"2/m", limiters.Rate{N: 2, Per: time.Minute}, "2/min"},
		{"2/48h", limiters.Rate{N: 2, Per: 48 * time.Hour}, "2/2day"},
		{"1/sec", limiters.Rate{N: 1, Per: time.Second}, "1/s"},
		{"5/2days", limiters.Rate{N: 5, Per: 48 * time.Hour}, "5/2day"},
	} {
		got, err := limiters.ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			continue
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParseRate(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
	}
}

func TestParseRateRefuses(t *testing.T) {
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
		{"1/87601h0m", `the period "87601h0m" is zero or too long (at most 3650day)`}, // found by FuzzParseRate
		{"1/0m700000000s", `the period "0m700000000s" is zero or too long`},
		{"10/99999day", `the period "99999day" is zero or too long`},
		{"10/s burst", "after the rate comes nothing, or burst and a number"},
		{"10/s burst 0", "the burst is zero"},
		{"10/s bust 5", `"bust" is not "burst"`},
		{"10/s burst 5 more", "after the rate comes nothing"},
	} {
		_, err := limiters.ParseRate(tt.in)
		if !errors.Is(err, limiters.ErrRateSyntax) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("ParseRate(%q) = %v, want ErrRateSyntax saying %q", tt.in, err, tt.says)
		}
	}
}

func TestRateSpec(t *testing.T) {
	r, _ := limiters.ParseRate("1000/day")
	s, err := r.Spec(limiters.SlidingCounter)
	if err != nil || s.Window != (limiters.Window{Limit: 1000, Length: 24 * time.Hour}) {
		t.Errorf("1000/day for the sliding counter = %+v, %v", s, err)
	}
	s, err = r.Spec(limiters.GCRA)
	if err != nil || s.Bucket.Capacity != 1000 || s.Bucket.Interval() != 86400*time.Millisecond {
		t.Errorf("1000/day for GCRA = %+v (interval %v), %v, want capacity 1000, a token every 86.4s", s, s.Bucket.Interval(), err)
	}
	r, _ = limiters.ParseRate("10/s burst 50")
	if s, err = r.Spec(limiters.TokenBucket); err != nil || s.Bucket != (limiters.Bucket{Capacity: 50, Rate: 10}) {
		t.Errorf("10/s burst 50 for the token bucket = %+v, %v", s, err)
	}
	if _, err = r.Spec(limiters.FixedWindow); !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), "fixed-window has no burst: it takes N/W, as in 10/s") {
		t.Errorf("a burst for the fixed window: %v", err)
	}
	if _, err = r.Spec("magic"); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("an unknown algorithm: %v", err)
	}
	// Parsed, but no limiter can keep it: 3 a nanosecond.
	r, _ = limiters.ParseRate("3/1ns")
	if _, err = r.Spec(limiters.GCRA); !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), "3/1ns for gcra") {
		t.Errorf("3/1ns for GCRA: %v", err)
	}
}

// FuzzParseRate: whatever ParseRate reads, String prints in a form it
// reads back to the same rate, and that form is stable.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1/87601h0m", "10/s", "100/min", "5/60s", "1000/day", "10/s burst 50", "1/1.5s", "2/1m30s", "3/1ns", "1/2500us", "0/s", "10/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := limiters.ParseRate(s)
		if err != nil {
			if !errors.Is(err, limiters.ErrRateSyntax) {
				t.Fatalf("ParseRate(%q) = %v, not an ErrRateSyntax", s, err)
			}
			return
		}
		if r.N < 1 || r.N > limiters.MaxLimit || r.Per <= 0 || r.Burst < 0 || r.Burst > limiters.MaxLimit {
			t.Fatalf("ParseRate(%q) = %+v: out of range", s, r)
		}
		printed := r.String()
		back, err := limiters.ParseRate(printed)
		if err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %+v, printed %q, read back as %+v, %v", s, r, printed, back, err)
		}
		if again := back.String(); again != printed {
			t.Fatalf("%q printed again as %q", printed, again)
		}
	})
}
