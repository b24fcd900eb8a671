package keytable

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/reservation"
)

// Denied is the Denials of a limiter of one limit that denied: its one
// limit, the longest to wait for (limiters.Denials(0).Deny(0, true), a
// constant so that a decision does not load it).
const Denied limiters.Denials = 1 | 1<<8

// Keys is the half of an in-memory limiter that is the same for every
// algorithm: reserving, settling, peeking, resetting, walking, closing.
// An algorithm package keeps one and forwards its methods to it
// (forward.go, generated), and writes only its decision.
//
// The decision path (hash, denial cache, lock, find, decide, store, unlock)
// is written out in each algorithm package on purpose, though its frame is
// the same in all six: it is the hot path, and a shared version would reach
// the algorithm through a function value or a generic dictionary, an
// indirect call that cannot be inlined and costs more than the decision's
// own arithmetic.
type Keys[S any] struct {
	tab *Table[S]
	// owner is the limiter: the reservations it makes are its own.
	owner any
	// name prefixes errors: the algorithm's package.
	name string
	// peek reports, without consuming, what a request of cost n would get
	// from s (nil for a fresh key) at now.
	peek func(s *S, now int64, n int) limiters.Decision
	// allow decides n events for key at now, consuming them if admitted:
	// the algorithm's decision.
	allow func(key string, now int64, n int) limiters.Decision
	// settle gives back refund units and charges charge more at now to
	// the state p (nil: the key is not held), for a reservation decided
	// at at whose key was full again resetAfter later; it returns the
	// state after and whether to write it (the key is added if need be).
	settle func(p *S, at, resetAfter, now int64, refund, charge int) (S, bool)
}

// NewKeys returns the shared half of the limiter owner (its package called
// name) over tab, given how its algorithm peeks, decides and settles.
func NewKeys[S any](owner any, name string, tab *Table[S], peek func(s *S, now int64, n int) limiters.Decision,
	allow func(key string, now int64, n int) limiters.Decision,
	settle func(p *S, at, resetAfter, now int64, refund, charge int) (S, bool)) Keys[S] {
	return Keys[S]{tab: tab, owner: owner, name: name, peek: peek, allow: allow, settle: settle}
}

// At returns the time of a decision of r in Unix nanoseconds: r.At, or
// the table's clock.
func (k *Keys[S]) At(r limiters.Request) int64 {
	if r.At.IsZero() {
		return k.tab.Now()
	}
	return r.At.UnixNano()
}

// CostError is the error of a decision of cost n: nil for n >= 1.
func (k *Keys[S]) CostError(n int) error {
	if n >= 1 {
		return nil
	}
	return fmt.Errorf("%s: %w, got %d", k.name, limiters.ErrInvalidCost, n)
}

// Reserve decides r as Decide does and returns the reservation to settle.
// The error is non-nil only for r.N < 1.
func (k *Keys[S]) Reserve(ctx context.Context, r limiters.Request) (limiters.Reservation, error) {
	now := k.At(r)
	f := reservation.Fields[limiters.Decision]{Owner: k.owner, Key: r.Key, At: now, Cost: r.N, Decision: k.allow(r.Key, now, r.N)}
	err := k.CostError(r.N)
	if err != nil {
		f.Cost = 0
	}
	return reservation.Make[limiters.Reservation](f), err
}

// Settle settles a reservation at its actual cost (see limiters.Settler)
// and returns the key's state after.
func (k *Keys[S]) Settle(ctx context.Context, s limiters.Settlement) (limiters.Decision, error) {
	r := reservation.Get[limiters.Reservation, limiters.Decision](s.Reservation)
	refund, charge, err := Settlement(r, k.owner, s.Actual)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("%s: %w", k.name, err)
	}
	now := k.At(limiters.Request{At: s.At})
	h := k.tab.Hash(r.Key)
	sh := k.tab.LockHash(h)
	defer sh.Unlock()
	p := sh.Find(h, now)
	if st, write := k.settle(p, r.At, int64(r.Decision.ResetAfter), now, refund, charge); write {
		if p == nil {
			p = k.tab.Insert(sh, h, r.Key)
		}
		*p = st
	}
	// A refund may admit what a cached denial would refuse.
	sh.ForgetDenial(h)
	return k.peek(p, now, 1), nil
}

// Settlement checks that the reservation r may be settled by owner at
// actual and returns what settling it takes: a refund of the units r holds
// beyond actual, or a charge of the units actual needs beyond r's.
func Settlement(r reservation.Fields[limiters.Decision], owner any, actual int) (refund, charge int, err error) {
	switch {
	case actual < 0:
		return 0, 0, fmt.Errorf("%w: an actual cost of %d, want 0 or more", limiters.ErrInvalidParameter, actual)
	case !r.Decision.Allowed || r.Cost < 1:
		return 0, 0, fmt.Errorf("%w: the reservation was denied", limiters.ErrNotReserved)
	case r.Owner != owner:
		return 0, 0, fmt.Errorf("%w: the reservation is another limiter's", limiters.ErrNotReserved)
	}
	if actual < r.Cost {
		return r.Cost - actual, 0, nil
	}
	return 0, actual - r.Cost, nil
}

// Peek reports what Decide(ctx, r) would decide, without consuming
// anything. The error is non-nil only for r.N < 1 (the Decision then
// denies, with RetryAfter Never).
func (k *Keys[S]) Peek(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	now := r.At.UnixNano()
	if r.At.IsZero() {
		now = k.tab.Read()
	}
	sh, h := k.tab.Lock(r.Key)
	defer sh.Unlock()
	return k.peek(sh.Get(h), now, r.N), k.CostError(r.N)
}

// Reset forgets key: its next request sees a full quota. The error is
// always nil.
func (k *Keys[S]) Reset(ctx context.Context, key string) error {
	k.tab.Delete(key)
	return nil
}

// ResetAll forgets every key. The error is always nil.
func (k *Keys[S]) ResetAll(ctx context.Context) error {
	k.tab.Clear()
	return nil
}

// Walk calls fn with every key held and what a Peek of one unit reports
// for it now, until fn returns false. Keys are named by their hash ("#"
// and 16 hex digits) unless the limiter keeps key names
// (limiters.WithKeyNames). It returns ctx's error if ctx ends first.
func (k *Keys[S]) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	now := k.tab.Read()
	return k.tab.Walk(ctx, func(s *S) limiters.Decision { return k.peek(s, now, 1) }, fn)
}

// Stats reports how many keys the limiter holds, the slots it has
// allocated for them, and how many it forgot early to keep a key cap.
func (k *Keys[S]) Stats() limiters.Stats { return k.tab.Stats() }

// Sweep forgets now every key whose quota has been full again, as of t,
// for at least a second, as the background sweeper does every
// SweepInterval.
func (k *Keys[S]) Sweep(t time.Time) { k.tab.Sweep(t.UnixNano()) }

// Close stops the limiter's background sweeper and waits for it to end.
// The limiter keeps answering; it only stops sweeping in the background.
func (k *Keys[S]) Close() error { return k.tab.Close() }

// Apply returns the Options that opts set on top of the defaults, checked.
func Apply(opts []limiters.Option) (limiters.Options, error) {
	var o limiters.Options
	for _, opt := range opts {
		opt(&o)
	}
	if o.MaxKeys < 0 {
		return o, fmt.Errorf("%w: max keys must not be negative, got %d", limiters.ErrInvalidParameter, o.MaxKeys)
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = limiters.DefaultSweepInterval
	}
	return o, nil
}

// MaxDebt is the most a key's debt may reach: in nanoseconds, 2^52 (52
// days), or in units of a count. Charges past it are cut to it. It is
// the Redis backend's bound too (its scripts count in doubles, exact to
// 2^53), so that a settle decides alike in memory and on Redis.
const MaxDebt = 1 << 52

// Units returns n units of unit nanoseconds each, at most MaxDebt.
func Units(n int, unit int64) int64 {
	if n <= 0 {
		return 0
	}
	if int64(n) > MaxDebt/unit {
		return MaxDebt
	}
	return int64(n) * unit
}
