package limiters

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a limit as a person writes it: "10/s", "100/min", "5/60s",
// "1000/day", and, for the bucket algorithms, "10/s burst 50". It is N
// events per Per; Burst, when set, is a bucket's capacity, which is
// otherwise N (a full period's worth at once).
//
// The units are ms, s, min, h and day (also sec, second, m, minute, hr,
// hour, d, and plurals), alone ("/min") or after a whole count ("/60s");
// any other period is written as a Go duration ("/1m30s", "/1.5s").
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// rateUnits are the units a rate's period may be written in, the name
// String prints first.
var rateUnits = []struct {
	d     time.Duration
	names []string
}{
	{24 * time.Hour, []string{"day", "days", "d"}},
	{time.Hour, []string{"h", "hr", "hour", "hours"}},
	{time.Minute, []string{"min", "m", "minute", "minutes"}},
	{time.Second, []string{"s", "sec", "second", "seconds"}},
	{time.Millisecond, []string{"ms"}},
}

// ErrRateSyntax reports a rate string ParseRate cannot read.
var ErrRateSyntax = errors.New("limiters: not a rate")

// ParseRate reads a rate written as "N/PERIOD" or "N/PERIOD burst B" (see
// Rate). It checks the syntax and that every number is positive; whether
// an algorithm can enforce the rate is for Spec to say.
func ParseRate(s string) (Rate, error) {
	fail := func(why string) (Rate, error) {
		return Rate{}, fmt.Errorf("%w: %q: %s (want N/PERIOD, as in 10/s, 100/min, 5/60s or 1000/day, with \" burst B\" for a bucket)", ErrRateSyntax, s, why)
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
	var r Rate
	var err error
	if r.N, err = positive(count); err != nil {
		return fail("the count " + err.Error())
	}
	if r.Per, err = parsePeriod(period); err != nil {
		return fail("the period " + err.Error())
	}
	if len(fields) == 3 {
		if r.Burst, err = positive(fields[2]); err != nil {
			return fail("the burst " + err.Error())
		}
	}
	return r, nil
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
	for _, u := range rateUnits {
		for _, name := range u.names {
			if s == name {
				return u.d, true
			}
		}
	}
	return 0, false
}

// String formats r the way ParseRate reads it, the period in the largest
// unit that divides it: 5/60s prints as "5/min", 10/90s as "10/90s".
func (r Rate) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(r.N))
	b.WriteByte('/')
	b.WriteString(period(r.Per))
	if r.Burst > 0 {
		b.WriteString(" burst ")
		b.WriteString(strconv.Itoa(r.Burst))
	}
	return b.String()
}

func period(d time.Duration) string {
	for _, u := range rateUnits {
		if d > 0 && d%u.d == 0 {
			if d == u.d {
				return u.names[0]
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.names[0]
		}
	}
	return d.String()
}

// Window returns r as a window algorithm's limit: N per Per.
func (r Rate) Window() Window { return Window{Limit: r.N, Length: r.Per} }

// Bucket returns r as a bucket algorithm's limit: refilled at N per Per,
// holding Burst, or N when r has no burst.
func (r Rate) Bucket() Bucket {
	c := r.Burst
	if c == 0 {
		c = r.N
	}
	return Bucket{Capacity: c, Rate: float64(r.N) / r.Per.Seconds()}
}

// Spec returns r as the parameters of algorithm a, validated. A burst is
// refused for a window algorithm, which has none.
func (r Rate) Spec(a Algorithm) (Spec, error) {
	if _, err := ParseAlgorithm(string(a)); err != nil {
		return Spec{}, err
	}
	s := Spec{Algorithm: a}
	if a.IsBucket() {
		s.Bucket = r.Bucket()
	} else {
		if r.Burst > 0 {
			return Spec{}, fmt.Errorf("%w: %s has no burst: it takes N/W, as in %v", ErrInvalidParameter, a, Rate{N: r.N, Per: r.Per})
		}
		s.Window = r.Window()
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("%v for %s: %w", r, a, err)
	}
	return s, nil
}
