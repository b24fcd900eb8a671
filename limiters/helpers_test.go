package limiters_test

import (
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// spec is an algorithm and the limit it keeps.
type spec struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
}

func (s spec) String() string { return fmt.Sprintf("%s %v", s.Algorithm, s.Limit) }

// newMemory returns an in-memory limiter of s: a composite of its one
// limit, as the lab makes them.
func newMemory(s spec, opts ...limiters.Option) (*composite.Limiter, error) {
	return composite.New(s.Algorithm, []limiters.Limit{s.Limit}, opts...)
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
