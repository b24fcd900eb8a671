package limiters_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// spec is an algorithm and its limit as these tests draw them: N per W for
// a window algorithm, a capacity and a rate per second for a bucket (the
// other is ignored).
type spec struct {
	Algorithm limiters.Algorithm
	Window    window
	Bucket    bucket
}

type window struct {
	Limit  int
	Length time.Duration
}

type bucket struct {
	Capacity int
	Rate     float64
}

// Interval is the bucket's emission interval, 1/R to the nanosecond: what
// the limiter's Limit.Interval is.
func (b bucket) Interval() time.Duration { return time.Duration(math.Round(1e9 / b.Rate)) }

// limit returns s as the limiters.Limit a constructor takes.
func (s spec) limit() (limiters.Limit, error) {
	if s.Algorithm.IsBucket() {
		return limiters.Bucket(s.Bucket.Capacity, s.Bucket.Rate)
	}
	return limiters.Limit{N: s.Window.Limit, Per: s.Window.Length}, nil
}

func (s spec) String() string {
	if s.Algorithm.IsBucket() {
		return fmt.Sprintf("%s %d@%v/s", s.Algorithm, s.Bucket.Capacity, s.Bucket.Rate)
	}
	return fmt.Sprintf("%s %d/%v", s.Algorithm, s.Window.Limit, s.Window.Length)
}

// mem is an in-memory limiter of one limit, driven at explicit times.
type mem struct {
	*composite.Limiter
}

func newMemory(s spec, opts ...limiters.Option) (*mem, error) {
	lim, err := s.limit()
	if err != nil {
		return nil, err
	}
	l, err := composite.New(s.Algorithm, []limiters.Limit{lim}, opts...)
	if err != nil {
		return nil, err
	}
	return &mem{l}, nil
}

var bg = context.Background()

func (m *mem) AllowAt(key string, t time.Time, n int) limiters.Decision {
	d, _ := m.Decide(bg, limiters.Request{Key: key, N: n, At: t})
	return d
}

func (m *mem) PeekAt(key string, t time.Time) limiters.Decision { return m.PeekAtN(key, t, 1) }

func (m *mem) PeekAtN(key string, t time.Time, n int) limiters.Decision {
	d, _ := m.Peek(bg, limiters.Request{Key: key, N: n, At: t})
	return d
}

func (m *mem) ReserveAt(key string, t time.Time, n int) limiters.Reservation {
	r, _ := m.Reserve(bg, limiters.Request{Key: key, N: n, At: t})
	return r
}

func (m *mem) SettleAt(r limiters.Reservation, t time.Time, actual int) (limiters.Decision, error) {
	return m.Settle(bg, limiters.Settlement{Reservation: r, Actual: actual, At: t})
}

// state is what two limiters' decisions are compared by: all but the
// Policy, which is each limiter's own.
type state struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter time.Duration
	ResetAfter time.Duration
	Denied     limiters.Denials
}

func stateOf(d limiters.Decision) state {
	return state{d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Denied}
}

// same reports whether two limiters decided alike.
func same(a, b limiters.Decision) bool { return stateOf(a) == stateOf(b) }
