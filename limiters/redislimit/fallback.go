package redislimit

import (
	"context"
	"fmt"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// unanswered is the decision of r (mode consume or peek) when Redis did
// not answer, err saying why (the runner told the error hook): the
// fallback's, a real decision, with a nil error; else the failure mode's,
// with err.
func (l *Limiter) unanswered(ctx context.Context, r limiters.Request, mode any, err error) (limiters.Decision, error) {
	switch {
	case l.fallback != nil && mode == consume:
		return l.fallback.Decide(ctx, r)
	case l.fallback != nil:
		return l.fallback.Peek(ctx, r)
	case l.o.FailureMode == FailOpen:
		return l.open, err
	}
	return l.closed, err
}

// newFallback returns the in-memory limiter that decides while Redis does
// not: algorithm a at each of limits' share of a fleet of fleet.
func newFallback(a limiters.Algorithm, limits []limiters.Limit, fleet int) (*composite.Limiter, error) {
	shares := make([]limiters.Limit, len(limits))
	for i, lim := range limits {
		shares[i] = share(lim, fleet)
		if err := shares[i].Validate(a); err != nil {
			return nil, fmt.Errorf("redislimit: the fallback's share of %s, %v: %w", lim.Name, shares[i], err)
		}
	}
	f, err := composite.New(a, shares, limiters.WithSweepInterval(limiters.DefaultSweepInterval))
	if err != nil {
		return nil, fmt.Errorf("redislimit: the fallback: %w", err)
	}
	return f, nil
}

// share is one process's share of lim, a named limit, in a fleet of n:
// N and the burst divided by n, rounded up, over the same period (so the
// rate is divided too), under lim's name.
func share(lim limiters.Limit, n int) limiters.Limit {
	return limiters.Limit{Name: lim.Name, N: (lim.N + n - 1) / n, Per: lim.Per, Burst: (lim.Burst + n - 1) / n}
}
