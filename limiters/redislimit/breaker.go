package redislimit

import (
	"errors"
	"sync/atomic"
	"time"
)

// ErrBreakerOpen is in the error of a call the circuit breaker refused
// without asking Redis (WithBreaker): Redis failed that many times in a
// row, and the breaker waits out its cool-down before it asks again.
var ErrBreakerOpen = errors.New("redislimit: the circuit breaker is open")

// breaker is a circuit breaker: closed, it lets every call through and
// counts the failures in a row; at threshold it opens, and every call
// fails at once, without a round trip, for cool; then it lets one call
// through (half-open, a probe) while the others still fail fast: the
// probe's success closes it, its failure opens it again.
type breaker struct {
	threshold int64
	cool      int64 // ns
	clock
	failures  atomic.Int64
	openUntil atomic.Int64 // on clock; 0 when closed
	probing   atomic.Bool
	opened    atomic.Int64 // times it opened, for tests
}

func newBreaker(threshold int, cool time.Duration) *breaker {
	return &breaker{threshold: int64(threshold), cool: int64(cool), clock: newClock()}
}

// enter reports whether a call may go to Redis, and whether it is the
// probe of a half-open breaker.
func (b *breaker) enter() (ok, probe bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if b.since() < until {
		return false, false
	}
	if b.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// The ends of a call, for leave.
const (
	decided  = iota // Redis decided
	failed          // Redis did not: down, slow, or an answer not understood
	withdrew        // the caller gave up first: it says nothing of Redis
)

// leave records how a call that went to Redis ended.
func (b *breaker) leave(probe bool, end int) {
	if probe {
		defer b.probing.Store(false)
	}
	switch end {
	case withdrew:
		return
	case decided:
		b.failures.Store(0)
		if b.openUntil.Load() != 0 {
			b.openUntil.Store(0)
		}
		return
	}
	if n := b.failures.Add(1); probe || n >= b.threshold {
		if b.openUntil.Load() == 0 || probe {
			b.opened.Add(1)
		}
		b.openUntil.Store(max(b.since()+b.cool, 1))
	}
}

// open reports whether b is open (calls fail fast); false for no breaker.
func (b *breaker) open() bool { return b != nil && b.openUntil.Load() != 0 }
