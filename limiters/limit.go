package limiters

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limit is a rate limit: N events per Per, and for the bucket algorithms a
// burst of up to Burst. It is what every constructor takes, what a
// configuration file writes ("10/s", "100/min burst 20"), and what a
// Decision reports it was made under.
//
// A window algorithm admits N per window of Per and has no burst. A bucket
// algorithm holds Burst (N when Burst is zero) and refills at N per Per: a
// unit every Per/N. Either way Quota is the most a fresh key spends at once
// and Window the time a spent quota takes to come back.
type Limit struct {
	// Name names the limit in decisions, headers and errors ("burst",
	// "daily"); empty means its rate as written (String).
	Name string
	// N is the number of events per Per; 1 to MaxLimit.
	N int
	// Per is the period; 1ns to MaxPeriod.
	Per time.Duration
	// Burst is a bucket's capacity; zero means N. A window algorithm takes
	// none.
	Burst int
}

// PerSecond returns a limit of n per second.
func PerSecond(n int) Limit { return Limit{N: n, Per: time.Second} }

// PerMinute returns a limit of n per minute.
func PerMinute(n int) Limit { return Limit{N: n, Per: time.Minute} }

// PerHour returns a limit of n per hour.
func PerHour(n int) Limit { return Limit{N: n, Per: time.Hour} }

// ErrInvalidParameter reports a limit, cost or option a limiter cannot
// take. Constructors wrap it with what was wrong.
var ErrInvalidParameter = errors.New("limiters: invalid parameter")

// ErrInvalidCost reports a request cost below 1.
var ErrInvalidCost = errors.New("limiters: cost must be at least 1")

const (
	// MaxLimit is the largest N, and the largest burst, a limiter takes.
	MaxLimit = math.MaxInt32
	// MaxPeriod is the longest window, and the longest time a bucket may
	// take to refill from empty, that a limiter takes: ten years. Within
	// it every time an in-memory limiter computes stays inside int64
	// nanoseconds for decision times from the year 1700 to 2240.
	MaxPeriod = 10 * 365 * 24 * time.Hour

	// maxRateError is how far rounding a bucket's interval to whole
	// nanoseconds may move its rate, relatively, before it is refused.
	maxRateError = 1e-4
)

// Quota is the most a fresh key may spend at once: Burst when set, else N.
func (l Limit) Quota() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.N
}

// Window is how long a spent quota takes to come back: Per, or for a
// burst Burst/N of Per, to the nanosecond. It is the w of the IETF
// RateLimit-Policy field.
func (l Limit) Window() time.Duration {
	if l.Burst == 0 || l.N < 1 {
		return l.Per
	}
	return time.Duration(math.Round(float64(l.Burst) / (float64(l.N) / l.Per.Seconds()) * 1e9))
}

// Interval is the time a bucket takes to refill one unit, Per/N, rounded to
// the nanosecond: a rate of 3 per second refills every 333333333ns. All
// bucket arithmetic is done in integer nanoseconds of it, which is what
// makes the three bucket algorithms agree exactly.
func (l Limit) Interval() time.Duration {
	switch {
	case l.N < 1:
		return 0
	case l.N == 1:
		return l.Per
	}
	return time.Duration(math.Round(1e9 / (float64(l.N) / l.Per.Seconds())))
}

// Validate reports whether algorithm a can enforce l: N and Per in range,
// no burst for a window algorithm, and for a bucket a refill interval that
// whole nanoseconds hold within 0.01% (any rate up to 100,000 per second
// is) and a refill from empty within MaxPeriod.
func (l Limit) Validate(a Algorithm) error {
	if _, err := ParseAlgorithm(string(a)); err != nil {
		return err
	}
	if l.N < 1 || l.N > MaxLimit {
		return fmt.Errorf("%w: %s must be between 1 and %d, got %d", ErrInvalidParameter, l.what(a), MaxLimit, l.N)
	}
	if l.Per <= 0 || l.Per > MaxPeriod {
		return fmt.Errorf("%w: %s must be between 1ns and 10 years (%v), got %v", ErrInvalidParameter, l.per(a), MaxPeriod, l.Per)
	}
	if !a.IsBucket() {
		if l.Burst != 0 {
			return fmt.Errorf("%w: %s has no burst: it takes N/W, as in %v", ErrInvalidParameter, a, Limit{N: l.N, Per: l.Per})
		}
		return nil
	}
	if l.Burst < 0 || l.Burst > MaxLimit {
		return fmt.Errorf("%w: burst must be between 1 and %d, got %d", ErrInvalidParameter, MaxLimit, l.Burst)
	}
	t := float64(l.Per) / float64(l.N)
	if l.N > 1 {
		t = 1e9 / (float64(l.N) / l.Per.Seconds())
	}
	if t < 1 {
		return fmt.Errorf("%w: %v refills faster than a unit a nanosecond", ErrInvalidParameter, l)
	}
	if rounded := math.Round(t); math.Abs(rounded-t)/t > maxRateError {
		lo, hi := 1e9/math.Ceil(t), 1e9/math.Floor(t)
		return fmt.Errorf("%w: %v cannot be kept exactly: its interval of %.4gns is rounded to whole nanoseconds, which would make it %v per second; the nearest rates that are exact are %v and %v per second", ErrInvalidParameter, l, t, 1e9/rounded, lo, hi)
	}
	if fill := float64(l.Interval()) * float64(l.Quota()); fill > float64(MaxPeriod) {
		return fmt.Errorf("%w: %v takes %.3g years to refill, more than the 10 years allowed", ErrInvalidParameter, l, fill/float64(365*24*time.Hour))
	}
	return nil
}

// what names N for algorithm a, as its doc does.
func (l Limit) what(a Algorithm) string {
	if a.IsBucket() {
		return "N (the rate's count)"
	}
	return "limit"
}

func (l Limit) per(a Algorithm) string {
	if a.IsBucket() {
		return "the rate's period"
	}
	return "window"
}

// Bucket returns the limit of a bucket of the given capacity refilled at
// rate units per second (fractions allowed): N per Per with the interval
// 1/rate rounded to the nanosecond, and Burst the capacity. It refuses a
// rate that is not positive and finite, above 1e9 per second, or whose
// interval whole nanoseconds do not hold within 0.01%.
func Bucket(capacity int, rate float64) (Limit, error) {
	switch {
	case capacity < 1 || capacity > MaxLimit:
		return Limit{}, fmt.Errorf("%w: capacity must be between 1 and %d, got %d", ErrInvalidParameter, MaxLimit, capacity)
	case math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0:
		return Limit{}, fmt.Errorf("%w: rate must be a positive finite number of tokens per second, got %v", ErrInvalidParameter, rate)
	case rate > 1e9:
		return Limit{}, fmt.Errorf("%w: rate must be at most 1e9 tokens per second, got %v", ErrInvalidParameter, rate)
	}
	t := 1e9 / rate
	rounded := math.Round(t)
	if math.Abs(rounded-t)/t > maxRateError {
		lo, hi := 1e9/math.Ceil(t), 1e9/math.Floor(t)
		return Limit{}, fmt.Errorf("%w: rate %v per second cannot be kept exactly: its interval of %.4gns is rounded to whole nanoseconds, which would make it %v; the nearest rates that are exact are %v and %v", ErrInvalidParameter, rate, t, 1e9/rounded, lo, hi)
	}
	if rate == math.Trunc(rate) && rate <= MaxLimit {
		return Limit{N: int(rate), Per: time.Second, Burst: capacity}, nil
	}
	return Limit{N: 1, Per: time.Duration(rounded), Burst: capacity}, nil
}

// ErrLimitSyntax reports a limit ParseLimit cannot read.
var ErrLimitSyntax = errors.New("limiters: not a rate")

// units are the units a limit's period may be written in, the name String
// prints first.
var units = []struct {
	d     time.Duration
	names []string
}{
	{24 * time.Hour, []string{"day", "days", "d"}},
	{time.Hour, []string{"h", "hr", "hour", "hours"}},
	{time.Minute, []string{"min", "m", "minute", "minutes"}},
	{time.Second, []string{"s", "sec", "second", "seconds"}},
	{time.Millisecond, []string{"ms"}},
}

// ParseLimit reads a limit as a person writes it: "10/s", "100/min",
// "5/60s", "1000/day", and for a bucket "10/s burst 50". The units are ms,
// s, min, h and day (also sec, second, m, minute, hr, hour, d, and
// plurals), alone ("/min") or after a whole count ("/60s"); any other
// period is a Go duration ("/1m30s", "/1.5s"). It checks the syntax and
// that every number is positive; whether an algorithm can enforce the
// limit is for Validate to say.
func ParseLimit(s string) (Limit, error) {
	fail := func(why string) (Limit, error) {
		return Limit{}, fmt.Errorf("%w: %q: %s (want N/PERIOD, as in 10/s, 100/min, 5/60s or 1000/day, with \" burst B\" for a bucket)", ErrLimitSyntax, s, why)
	}
	fields := strings.Fields(s)
	switch {
	case len(fields) == 0:
		return fail("it is empty")
	case len(fields) == 2 || len(fields) > 3:
		return fail("after the rate comes nothing, or burst and a number")
	case len(fields) == 3 && fields[1] != "burst":
		return fail(fmt.Sprintf("%q is not \"burst\"", fields[1]))
	}
	count, period, ok := strings.Cut(fields[0], "/")
	if !ok {
		return fail("no / between the count and the period")
	}
	var l Limit
	var err error
	if l.N, err = positive(count); err != nil {
		return fail("the count " + err.Error())
	}
	if l.Per, err = parsePeriod(period); err != nil {
		return fail("the period " + err.Error())
	}
	if len(fields) == 3 {
		if l.Burst, err = positive(fields[2]); err != nil {
			return fail("the burst " + err.Error())
		}
	}
	return l, nil
}

// positive parses a positive whole number of at most MaxLimit.
func positive(s string) (int, error) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a whole number", s)
		}
	}
	n, err := strconv.Atoi(s)
	switch {
	case s == "":
		return 0, fmt.Errorf("is missing")
	case err != nil || n > MaxLimit:
		return 0, fmt.Errorf("%s is more than %d", s, MaxLimit)
	case n == 0:
		return 0, fmt.Errorf("is zero")
	}
	return n, nil
}

// parsePeriod reads a unit ("min"), a whole count of one ("60s", "2day"),
// or a Go duration ("1m30s").
func parsePeriod(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("is missing")
	}
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	if u, ok := unit(s[digits:]); ok {
		k := 1
		if digits > 0 {
			var err error
			if k, err = strconv.Atoi(s[:digits]); err != nil || k == 0 || time.Duration(k) > MaxPeriod/u {
				return 0, fmt.Errorf("%q is zero or too long (at most %dday)", s, MaxPeriod/(24*time.Hour))
			}
		}
		return time.Duration(k) * u, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d < 0:
		return 0, fmt.Errorf("%q is not a unit (ms, s, min, h, day) or a duration", s)
	case d == 0 || d > MaxPeriod:
		return 0, fmt.Errorf("%q is zero or too long (at most %dday)", s, MaxPeriod/(24*time.Hour))
	}
	return d, nil
}

// unit returns the duration of the unit named s.
func unit(s string) (time.Duration, bool) {
	for _, u := range units {
		for _, name := range u.names {
			if s == name {
				return u.d, true
			}
		}
	}
	return 0, false
}

// String formats l's rate the way ParseLimit reads it, the period in the
// largest unit that divides it: 5/60s prints as "5/min", 10/90s as
// "10/90s". The name is not printed.
func (l Limit) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(l.N))
	b.WriteByte('/')
	b.WriteString(period(l.Per))
	if l.Burst > 0 {
		b.WriteString(" burst ")
		b.WriteString(strconv.Itoa(l.Burst))
	}
	return b.String()
}

func period(d time.Duration) string {
	for _, u := range units {
		if d > 0 && d%u.d == 0 {
			if d == u.d {
				return u.names[0]
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.names[0]
		}
	}
	return d.String()
}

// Set reads s as ParseLimit does into l, keeping its Name: with String, it
// makes *Limit a flag.Value, so that a command takes a limit as
// flag.Var(&l, "limit", usage) and its users write it as a configuration
// file does.
func (l *Limit) Set(s string) error {
	v, err := ParseLimit(s)
	if err != nil {
		return err
	}
	v.Name = l.Name
	*l = v
	return nil
}

// Named returns l with its Name set: l's own, else its rate (String).
func (l Limit) Named() Limit {
	if l.Name == "" {
		l.Name = l.String()
	}
	return l
}

// Algorithm names a rate-limiting algorithm, as the CLI and configuration
// files spell it.
type Algorithm string

// The six algorithms.
const (
	FixedWindow    Algorithm = "fixed-window"
	SlidingLog     Algorithm = "sliding-log"
	SlidingCounter Algorithm = "sliding-counter"
	TokenBucket    Algorithm = "token-bucket"
	LeakyBucket    Algorithm = "leaky-bucket"
	GCRA           Algorithm = "gcra"
)

// Algorithms lists every algorithm: the window algorithms, then the bucket
// algorithms.
func Algorithms() []Algorithm {
	return []Algorithm{FixedWindow, SlidingLog, SlidingCounter, TokenBucket, LeakyBucket, GCRA}
}

// ParseAlgorithm returns the algorithm named s.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range Algorithms() {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, 0, 6)
	for _, a := range Algorithms() {
		names = append(names, string(a))
	}
	return "", fmt.Errorf("%w: unknown algorithm %q (want one of %s)", ErrInvalidParameter, s, strings.Join(names, ", "))
}

// IsBucket reports whether a is a bucket algorithm (token bucket, leaky
// bucket, GCRA), which takes a burst, rather than a window algorithm.
func (a Algorithm) IsBucket() bool {
	return a == TokenBucket || a == LeakyBucket || a == GCRA
}
