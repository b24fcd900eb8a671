// Package limiters is the vocabulary every ratelab rate limiter speaks: a
// Limit says what is allowed, a Request asks, a Decision answers.
//
//	l, err := gcra.New(limiters.PerSecond(10))
//	d, err := l.Decide(ctx, limiters.Request{Key: "alice", N: 1})
//	if !d.Allowed { /* 429, Retry-After: d.RetryAfter */ }
//
// The algorithms live in one package each, in memory:
//
//	fixedwindow     at most N per window [kW, (k+1)W), windows aligned to the Unix epoch
//	slidinglog      at most N in any interval (t-W, t], exactly (the ideal)
//	slidingcounter  the weighted two-window estimate Cloudflare describes
//	tokenbucket     a burst of C, refilled at N per W
//	leakybucket     a meter of capacity C draining at N per W (and a shaping Wait)
//	gcra            the generic cell rate algorithm: one timestamp per key
//
// Token bucket, leaky bucket and GCRA with the same limit are one policy
// written three ways: on any trace whose times do not go backwards they
// give the same decisions. Package composite enforces several limits at
// once and picks the algorithm at run time; package tiers gives each user
// the limits of their tier; package redislimit keeps any of them in Redis
// for a fleet; package httplimit puts any of them in front of a handler.
//
// A denial is a Decision with Allowed false, never an error: an error means
// only that no decision was made (a backend failed, or the request was
// malformed), and the Decision that comes with it is the limiter's failure
// policy's. Every limiter decides at an explicit time (Request.At) as well
// as at its clock, which is what makes simulations, replays and tests
// exact.
package limiters

import (
	"context"
	"math"
	"time"
)

// Limiter decides whether requests may happen.
//
// Implementations are safe for concurrent use.
type Limiter interface {
	// Decide reports, in the Decision, whether r may happen, and consumes
	// its cost if so; a denied request consumes nothing. A non-nil error
	// means no decision was made (a backend failed, or r.N < 1): the
	// Decision is then what the limiter's failure policy answers (a
	// denial, for a limiter without one).
	Decide(ctx context.Context, r Request) (Decision, error)
	// AllowN is shorthand for Decide of n events for key at the limiter's
	// clock.
	AllowN(ctx context.Context, key string, n int) (Decision, error)
	// Close releases what the limiter runs (a sweeper, a batcher's
	// goroutines); every limiter is closed once done with. Decisions after
	// it are the limiter's to refuse.
	Close() error
}

// Request is one request to decide.
type Request struct {
	// Key is whose limit it counts against: a user, an API key, an
	// address.
	Key string
	// N is its cost, at least 1. A cost above the limit is denied, with
	// RetryAfter Never.
	N int
	// At is when it happens; zero means now, by the limiter's clock.
	//
	// Times need not increase, and a clock that steps back never mints
	// quota: the windows and the buckets decide a time earlier than one
	// they have seen for a key as that later time; GCRA decides it as
	// given, which is stricter. An in-memory limiter forgets a key once
	// its quota has been full for a second, judged by the newest time it
	// has seen, so times should step back by less than a second.
	At time.Time
}

// Decision is the outcome of one request.
type Decision struct {
	// Allowed reports whether the request was admitted (and consumed
	// quota).
	Allowed bool
	// Limit is the quota the decision was taken against (Limit.Quota):
	// of several limits, that of the one with the least room.
	Limit int
	// Remaining is how many unit requests would be admitted right after
	// this one, with nothing else happening. It is never negative and
	// never above Limit.
	Remaining int
	// RetryAfter is how long until this same request would be admitted,
	// with nothing else happening. It is zero when Allowed, and Never when
	// no wait admits the request (its cost is above the limit).
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full quota, with
	// nothing else happening. Zero means the key is at full quota now.
	ResetAfter time.Duration
	// Policy is what the request was decided under: the limiter's limits,
	// named, and the user's tier. It is nil from a limiter that does not
	// say. It is the limiter's own, shared by its decisions: do not change
	// it.
	Policy *Policy
	// Denied says which of the Policy's limits denied the request; none
	// when it was admitted.
	Denied Denials
}

// Never is the RetryAfter of a request that no amount of waiting admits:
// its cost exceeds the limit.
const Never time.Duration = math.MaxInt64

// Policy is what a limiter decides under.
type Policy struct {
	// Limits are the limits, each named, in the limiter's order: a
	// request is admitted only when every one admits it.
	Limits []Limit
	// Tier is the tier the limits are the user's by (package tiers); empty
	// otherwise, and for a user with limits of their own.
	Tier string
}

// NewPolicy returns the policy of limits, each named (see Limit.Named).
func NewPolicy(limits ...Limit) *Policy {
	p := &Policy{Limits: make([]Limit, len(limits))}
	for i, l := range limits {
		p.Limits[i] = l.Named()
	}
	return p
}

// Denials is the set of a Policy's limits that denied a request, by their
// index in Policy.Limits (at most 8), and the one the request waits for
// longest. The zero value is none.
type Denials uint16

// Deny returns s with the limit of index i (0 to 7) added; longest marks
// it as the one the request waits for longest.
func (s Denials) Deny(i int, longest bool) Denials {
	s |= 1 << i
	if longest {
		s = s&0xff | Denials(i+1)<<8
	}
	return s
}

// Has reports whether the limit of index i denied the request.
func (s Denials) Has(i int) bool { return i >= 0 && i < 8 && s&(1<<i) != 0 }

// Longest returns the index of the limit the request waits for longest,
// and false when none denied it.
func (s Denials) Longest() (int, bool) {
	if by := int(s >> 8); by > 0 {
		return by - 1, true
	}
	return 0, false
}

// DeniedBy returns the limit that denied the request (of several, the one
// it waits for longest), and false when none did or the limiter does not
// say.
func (d Decision) DeniedBy() (Limit, bool) {
	i, ok := d.Denied.Longest()
	if !ok || d.Policy == nil || i >= len(d.Policy.Limits) {
		return Limit{}, false
	}
	return d.Policy.Limits[i], true
}

// Tier returns the tier the request was decided in (package tiers), or "".
func (d Decision) Tier() string {
	if d.Policy == nil {
		return ""
	}
	return d.Policy.Tier
}

// Peeker reports a key's state without consuming any of its quota.
type Peeker interface {
	// Peek reports what Decide(ctx, r) would decide, consuming nothing:
	// whether r would be admitted, its RetryAfter if not, and the key's
	// quota as it stands (Remaining, ResetAfter).
	Peek(ctx context.Context, r Request) (Decision, error)
}

// Resetter forgets keys: their next requests see a full quota.
type Resetter interface {
	// Reset forgets key.
	Reset(ctx context.Context, key string) error
	// ResetAll forgets every key.
	ResetAll(ctx context.Context) error
}

// Walker reports the state of every key a limiter holds.
type Walker interface {
	// Walk calls fn with each key the limiter holds and what a Peek of one
	// unit reports for it now, until fn returns false. Keys whose quota is
	// full again may or may not be reported. Walk holds no lock while fn
	// runs, so fn may call the limiter.
	Walk(ctx context.Context, fn func(key string, d Decision) bool) error
}
