// Package limiters defines the contract every ratelab rate limiter keeps: the
// Limiter interface, the Decision it returns, the parameters it takes and the
// optional abilities (peek, reset, walk) a backend may add.
//
// The algorithms live in one package each, in memory:
//
//	fixedwindow     at most N per window [kW, (k+1)W), windows aligned to the Unix epoch
//	slidinglog      at most N in any interval (t-W, t], exactly (the ideal)
//	slidingcounter  the weighted two-window estimate Cloudflare describes
//	tokenbucket     capacity C, refilled at R tokens per second
//	leakybucket     a meter of capacity C draining at R per second (and a shaping Wait)
//	gcra            the generic cell rate algorithm: one timestamp per key
//
// Token bucket, leaky bucket and GCRA with the same C and R are one policy
// written three ways: on any trace whose times do not go backwards they give
// the same decisions.
//
// A denial is a Decision with Allowed == false, never an error: an error
// means only that the decision could not be made (a backend failed, or the
// call was malformed). Every in-memory limiter also decides at an explicit
// time (AllowAt), which is what makes simulations, replays and tests exact;
// AllowN is shorthand for "at the limiter's clock's now".
package limiters

import (
	"context"
	"math"
	"time"
)

// Limiter decides whether events for a key may happen now.
//
// Implementations are safe for concurrent use.
type Limiter interface {
	// AllowN reports, in the returned Decision, whether n events for key may
	// happen now, and consumes them if so. A denied request consumes nothing.
	// The error is non-nil only when no decision could be made; the Decision
	// then follows the implementation's documented failure mode.
	AllowN(ctx context.Context, key string, n int) (Decision, error)
}

// Decision is the outcome of one request.
type Decision struct {
	// Allowed reports whether the request was admitted (and consumed quota).
	Allowed bool
	// Limit is the quota the decision was taken against: N for the window
	// algorithms, the capacity C for the bucket algorithms.
	Limit int
	// Remaining is how many unit-cost requests would be admitted right after
	// this one, with nothing else happening. It is never negative and never
	// above Limit.
	Remaining int
	// RetryAfter is how long until this same request would be admitted, with
	// nothing else happening. It is zero when Allowed, and Never when the
	// request can never be admitted (its cost is above Limit).
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full quota, with
	// nothing else happening. Zero means the key is at full quota now.
	ResetAfter time.Duration
}

// Never is the RetryAfter of a request that no amount of waiting admits: its
// cost exceeds the limit.
const Never time.Duration = math.MaxInt64

// AtLimiter is a Limiter that can also decide at an explicit time. Every
// in-memory limiter is one.
//
// Times need not be increasing, and a clock that jumps backwards never mints
// quota: the windows and the buckets decide a time earlier than one they
// have seen for a key as that later time (the clock stood still); GCRA
// decides it as given, which is stricter.
//
// An in-memory limiter forgets a key once its quota has been full again for
// a second, judged by the newest time it has seen on any key (or by its own
// clock, once AllowN has been called). A decision more than a second behind
// that newest time may therefore find a key forgotten, and fresh. Times
// should step back by less than a second: concurrent callers of a real
// clock do, and a replay in time order does.
type AtLimiter interface {
	Limiter
	// AllowAt is AllowN at time t. A cost n < 1 is denied with RetryAfter
	// Never.
	AllowAt(key string, t time.Time, n int) Decision
	// PeekAt reports key's state at time t without consuming anything:
	// whether a unit request would be admitted (Allowed, and RetryAfter if
	// not), and the quota as it stands (Remaining, ResetAfter).
	PeekAt(key string, t time.Time) Decision
}

// Peeker reports a key's state without consuming any of its quota.
type Peeker interface {
	// Peek reports key's state now without consuming anything: whether a
	// unit request would be admitted (Allowed, and RetryAfter if not), and
	// the quota as it stands (Remaining, ResetAfter).
	Peek(ctx context.Context, key string) (Decision, error)
}

// Resetter forgets a key: its next request sees a full quota.
type Resetter interface {
	Reset(ctx context.Context, key string) error
}

// ResetAller forgets every key.
type ResetAller interface {
	ResetAll(ctx context.Context) error
}

// Walker reports the state of every key a limiter holds.
type Walker interface {
	// Walk calls fn with each key the limiter holds and what Peek reports
	// for it, until fn returns false. Keys whose quota is full again
	// may or may not be reported. Walk holds no lock while fn runs, so fn may
	// call the limiter.
	Walk(ctx context.Context, fn func(key string, d Decision) bool) error
}
