package limiters

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidParameter reports a limit, window, capacity or rate a limiter
// cannot enforce. Constructors wrap it with what was wrong.
var ErrInvalidParameter = errors.New("limiters: invalid parameter")

// ErrInvalidCost reports a request cost below 1.
var ErrInvalidCost = errors.New("limiters: cost must be at least 1")

const (
	// MaxLimit is the largest limit or capacity a limiter accepts.
	MaxLimit = math.MaxInt32
	// MaxPeriod is the longest window, and the longest time a bucket may
	// take to refill from empty (C/R), that a limiter accepts: ten years.
	// With it, every timestamp a limiter computes (a window's end after
	// next, a bucket's time of full refill) stays inside int64 nanoseconds
	// for decision times from the year 1700 to 2240, the range the
	// in-memory limiters support.
	MaxPeriod = 10 * 365 * 24 * time.Hour

	// maxRateError is how far rounding the emission interval to whole
	// nanoseconds may move a rate, relatively, before it is refused.
	maxRateError = 1e-4
)

// Window is the parameter of the window algorithms (fixed window, sliding
// window log, sliding window counter): at most Limit events per Length.
type Window struct {
	// Limit is N, the events admitted per window; 1 to MaxLimit.
	Limit int
	// Length is W, the window; 1ns to MaxPeriod.
	Length time.Duration
}

// Validate reports whether w is a limit a window algorithm can enforce.
func (w Window) Validate() error {
	if w.Limit < 1 || w.Limit > MaxLimit {
		return fmt.Errorf("%w: limit must be between 1 and %d, got %d", ErrInvalidParameter, MaxLimit, w.Limit)
	}
	if w.Length <= 0 || w.Length > MaxPeriod {
		return fmt.Errorf("%w: window must be between 1ns and 10 years (%v), got %v", ErrInvalidParameter, MaxPeriod, w.Length)
	}
	return nil
}

// String formats w as "N/W", e.g. "100/1m0s".
func (w Window) String() string { return fmt.Sprintf("%d/%v", w.Limit, w.Length) }

// Bucket is the parameter of the bucket algorithms (token bucket, leaky
// bucket, GCRA): bursts of up to Capacity, refilled at Rate per second.
type Bucket struct {
	// Capacity is C, the largest burst; 1 to MaxLimit.
	Capacity int
	// Rate is R, in tokens per second; positive and finite. It is kept as
	// its emission interval 1/R rounded to the nanosecond (see Interval),
	// so a rate is refused when that rounding would change it by more than
	// 0.01%: any rate up to 100,000 per second is exact enough, and above
	// that rates whose interval is a whole number of nanoseconds (1e6,
	// 2.5e6, 1e7, ...) are.
	Rate float64
}

// Validate reports whether b is a limit a bucket algorithm can enforce.
func (b Bucket) Validate() error {
	if b.Capacity < 1 || b.Capacity > MaxLimit {
		return fmt.Errorf("%w: capacity must be between 1 and %d, got %d", ErrInvalidParameter, MaxLimit, b.Capacity)
	}
	if math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0) || b.Rate <= 0 {
		return fmt.Errorf("%w: rate must be a positive finite number of tokens per second, got %v", ErrInvalidParameter, b.Rate)
	}
	if b.Rate > 1e9 {
		return fmt.Errorf("%w: rate must be at most 1e9 tokens per second, got %v", ErrInvalidParameter, b.Rate)
	}
	t := 1e9 / b.Rate
	if rounded := math.Round(t); math.Abs(rounded-t)/t > maxRateError {
		lo, hi := 1e9/math.Ceil(t), 1e9/math.Floor(t)
		return fmt.Errorf("%w: rate %v per second cannot be kept exactly: its interval of %.4gns is rounded to whole nanoseconds, which would make it %v; the nearest rates that are exact are %v and %v", ErrInvalidParameter, b.Rate, t, 1e9/rounded, lo, hi)
	}
	if t*float64(b.Capacity) > float64(MaxPeriod) {
		return fmt.Errorf("%w: capacity %d at rate %v per second takes %.3g years to refill, more than the %v allowed", ErrInvalidParameter, b.Capacity, b.Rate, t*float64(b.Capacity)/float64(365*24*time.Hour), "10 years")
	}
	return nil
}

// Interval is the emission interval T = 1/R, rounded to the nanosecond: the
// time one token takes to refill. All bucket arithmetic is done in integer
// nanoseconds of it, which is what makes the three bucket algorithms agree
// exactly. A rate of 3 per second, say, becomes one token every 333333333ns.
func (b Bucket) Interval() time.Duration {
	return time.Duration(math.Round(1e9 / b.Rate))
}

// Window is the window a bucket is judged against when its accuracy is
// compared with the ideal: C events per C/R.
func (b Bucket) Window() Window {
	return Window{Limit: b.Capacity, Length: time.Duration(b.Capacity) * b.Interval()}
}

// String formats b as "C@R/s", e.g. "10@2/s".
func (b Bucket) String() string { return fmt.Sprintf("%d@%v/s", b.Capacity, b.Rate) }
