package redislimit

import (
	"context"

	"github.com/ratelab/ratelab/limiters"
)

// What the external tests see of the inside: nothing a user needs.

// DecideEach is Decide at r.At, past the leases and the failure policy,
// that also returns each limit's own decision (Policy and Denied unset),
// as the script reports them: what package composite's each decision is.
func DecideEach(ctx context.Context, l *Limiter, r limiters.Request) (limiters.Decision, []limiters.Decision, error) {
	each := make([]limiters.Decision, len(l.quota))
	var d limiters.Decision
	err := l.decide(ctx, r, consume, each, &d)
	return d, each, err
}

// Scripted reports whether l's batches are runs of the batch script, not
// pipelines.
func Scripted(l *Limiter) bool { return l.run.batch != nil && l.run.batch.many != nil }

// BreakerOpened returns how many times l's breaker opened.
func BreakerOpened(l *Limiter) int64 { return l.run.breaker.opened.Load() }

// ErrClosed is why a batching Limiter closed decides nothing.
var ErrClosed = errClosed
