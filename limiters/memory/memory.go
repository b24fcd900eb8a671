// Package memory builds an in-memory limiter of any algorithm from a
// limiters.Spec, for code that picks the algorithm at run time (the CLI, the
// lab, config files). Code that knows its algorithm imports that package
// directly.
package memory

import (
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/fixedwindow"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/leakybucket"
	"github.com/ratelab/ratelab/limiters/slidingcounter"
	"github.com/ratelab/ratelab/limiters/slidinglog"
	"github.com/ratelab/ratelab/limiters/tokenbucket"
)

// Limiter is what every in-memory limiter offers.
type Limiter interface {
	limiters.AtLimiter
	limiters.Peeker
	limiters.Resetter
	limiters.ResetAller
	limiters.Walker
	limiters.AtSettler
	// PeekAtN reports what AllowAt(key, t, n) would decide, without
	// consuming anything.
	PeekAtN(key string, t time.Time, n int) limiters.Decision
	// WalkAt is Walk as of time t.
	WalkAt(t time.Time, fn func(key string, d limiters.Decision) bool)
	// Stats reports what the limiter holds.
	Stats() limiters.Stats
	// Sweep forgets the keys whose quota has been full again, as of t, for
	// at least a second.
	Sweep(t time.Time)
	// Close stops the background sweeper.
	Close() error
}

var (
	_ Limiter = (*fixedwindow.Limiter)(nil)
	_ Limiter = (*slidinglog.Limiter)(nil)
	_ Limiter = (*slidingcounter.Limiter)(nil)
	_ Limiter = (*tokenbucket.Limiter)(nil)
	_ Limiter = (*leakybucket.Limiter)(nil)
	_ Limiter = (*gcra.Limiter)(nil)
)

// New returns an in-memory limiter as s specifies.
func New(s limiters.Spec, opts ...limiters.Option) (Limiter, error) {
	if _, err := limiters.ParseAlgorithm(string(s.Algorithm)); err != nil {
		return nil, err
	}
	switch s.Algorithm {
	case limiters.FixedWindow:
		return checked(fixedwindow.New(s.Window, opts...))
	case limiters.SlidingLog:
		return checked(slidinglog.New(s.Window, opts...))
	case limiters.SlidingCounter:
		return checked(slidingcounter.New(s.Window, opts...))
	case limiters.TokenBucket:
		return checked(tokenbucket.New(s.Bucket, opts...))
	case limiters.LeakyBucket:
		return checked(leakybucket.New(s.Bucket, opts...))
	default:
		return checked(gcra.New(s.Bucket, opts...))
	}
}

// checked returns a nil Limiter, not a typed nil, on error.
func checked[L Limiter](l L, err error) (Limiter, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
