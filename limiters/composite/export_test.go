package composite

import (
	"context"

	"github.com/ratelab/ratelab/limiters"
)

// DecideEach is Decide that also fills each, one Decision a limit, with
// what each limit decided (see decide): the tests check every limit.
func DecideEach(l *Limiter, r limiters.Request, each []limiters.Decision) (limiters.Decision, error) {
	if len(l.inner) == 1 {
		d, err := l.inner[0].Decide(context.Background(), r)
		each[0] = d
		return d, err
	}
	return l.decide(context.Background(), r, each)
}

// Inner returns the limiter that keeps limit i.
func Inner(l *Limiter, i int) limiters.Peeker { return l.inner[i] }
