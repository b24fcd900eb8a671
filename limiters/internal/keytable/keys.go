package keytable

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Keys is the half of an in-memory limiter that is the same for every
// algorithm: peeking, resetting, walking, closing. An algorithm package
// embeds it and writes only its decision.
//
// The decision path (hash, denial cache, lock, find, decide, store, unlock)
// is written out in each algorithm package on purpose, though its frame is
// the same in all six: it is the hot path, and a shared version would reach
// the algorithm through a function value or a generic dictionary, an
// indirect call that cannot be inlined and costs more than the decision's
// own arithmetic.
type Keys[S any] struct {
	tab *Table[S]
	// peek reports, without consuming, what a request of cost n would get
	// from s (nil for a fresh key) at now.
	peek func(s *S, now int64, n int) limiters.Decision
	// allow decides n events for key at now, consuming them if
	// admitted: the algorithm's decision, returned by value (a pointer
	// through a function value would escape).
	allow func(key string, now int64, n int) limiters.Decision
	// settle gives back refund units and charges charge more at now to
	// the state p (nil: the key is not held), for a reservation decided
	// at at whose key was full again resetAfter later; it returns the
	// state after and whether to write it (the key is added if need be).
	settle func(p *S, at, resetAfter, now int64, refund, charge int) (S, bool)
}

// NewKeys returns the shared half of a limiter over tab, given how its
// algorithm peeks, decides and settles.
func NewKeys[S any](tab *Table[S], peek func(s *S, now int64, n int) limiters.Decision,
	allow func(key string, now int64, n int) limiters.Decision,
	settle func(p *S, at, resetAfter, now int64, refund, charge int) (S, bool)) Keys[S] {
	return Keys[S]{tab: tab, peek: peek, allow: allow, settle: settle}
}

// ReserveAt decides n events for key at t, as AllowAt does, and returns
// the reservation to settle.
func (k Keys[S]) ReserveAt(key string, t time.Time, n int) limiters.Reservation {
	return limiters.Reservation{Key: key, At: t, Cost: n, Decision: k.allow(key, t.UnixNano(), n)}
}

// Reserve decides n events for key now, as AllowN does, and returns the
// reservation to settle. The error is non-nil only for n < 1.
func (k Keys[S]) Reserve(ctx context.Context, key string, n int) (limiters.Reservation, error) {
	now := k.tab.Now()
	r := limiters.Reservation{Key: key, At: time.Unix(0, now), Cost: n, Decision: k.allow(key, now, n)}
	if n < 1 {
		return r, fmt.Errorf("%w, got %d", limiters.ErrInvalidCost, n)
	}
	return r, nil
}

// SettleAt settles r at its actual cost at t (see limiters.Settler) and
// returns the key's state after.
func (k Keys[S]) SettleAt(r limiters.Reservation, t time.Time, actual int) (limiters.Decision, error) {
	return k.settleAt(r, t.UnixNano(), actual)
}

// Settle settles r at its actual cost now (see limiters.Settler) and
// returns the key's state after.
func (k Keys[S]) Settle(ctx context.Context, r limiters.Reservation, actual int) (limiters.Decision, error) {
	return k.settleAt(r, k.tab.Now(), actual)
}

func (k Keys[S]) settleAt(r limiters.Reservation, now int64, actual int) (limiters.Decision, error) {
	refund, charge, err := limiters.Settlement(r, actual)
	if err != nil {
		return limiters.Decision{}, err
	}
	at, resetAfter := r.At.UnixNano(), int64(r.ResetAfter)
	h := k.tab.Hash(r.Key)
	sh := k.tab.LockHash(h)
	defer sh.Unlock()
	p := sh.Find(h, now)
	if s, write := k.settle(p, at, resetAfter, now, refund, charge); write {
		if p == nil {
			p = k.tab.Insert(sh, h, r.Key)
		}
		*p = s
	}
	// A refund may admit what a cached denial would refuse.
	sh.ForgetDenial(h)
	return k.peek(p, now, 1), nil
}

// PeekAtN reports what AllowAt(key, t, n) would decide, without consuming
// anything: whether n events would be admitted, their RetryAfter if not,
// and the quota as it stands.
func (k Keys[S]) PeekAtN(key string, t time.Time, n int) limiters.Decision {
	sh, h := k.tab.Lock(key)
	defer sh.Unlock()
	return k.peek(sh.Get(h), t.UnixNano(), n)
}

// PeekAt reports key's state at t without consuming: whether a unit request
// would be admitted, and the quota as it stands.
func (k Keys[S]) PeekAt(key string, t time.Time) limiters.Decision {
	return k.peekAt(key, t.UnixNano())
}

func (k Keys[S]) peekAt(key string, now int64) limiters.Decision {
	sh, h := k.tab.Lock(key)
	defer sh.Unlock()
	return k.peek(sh.Get(h), now, 1)
}

// Peek reports key's state now without consuming: whether a unit request
// would be admitted, and the quota as it stands. The error is always nil.
func (k Keys[S]) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	return k.peekAt(key, k.tab.Read()), nil
}

// Reset forgets key: its next request sees a full quota. The error is
// always nil.
func (k Keys[S]) Reset(ctx context.Context, key string) error {
	k.tab.Delete(key)
	return nil
}

// ResetAll forgets every key. The error is always nil.
func (k Keys[S]) ResetAll(ctx context.Context) error {
	k.tab.Clear()
	return nil
}

// Walk calls fn with every key held and what Peek reports for it now, until
// fn returns false. Keys are named by their hash ("#" and 16 hex digits)
// unless the limiter keeps key names (limiters.WithKeyNames). It returns
// ctx's error if ctx ends first.
func (k Keys[S]) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	return k.walk(ctx, k.tab.Read(), fn)
}

// WalkAt is Walk as of time t.
func (k Keys[S]) WalkAt(t time.Time, fn func(key string, d limiters.Decision) bool) {
	_ = k.walk(context.Background(), t.UnixNano(), fn)
}

func (k Keys[S]) walk(ctx context.Context, now int64, fn func(key string, d limiters.Decision) bool) error {
	return k.tab.Walk(ctx, func(s *S) limiters.Decision { return k.peek(s, now, 1) }, fn)
}

// Stats reports how many keys the limiter holds, the slots it has
// allocated for them, and how many it forgot early to keep a key cap.
func (k Keys[S]) Stats() limiters.Stats { return k.tab.Stats() }

// Sweep forgets now every key whose quota has been full again for at least
// Grace, as the background sweeper does every SweepInterval.
func (k Keys[S]) Sweep(t time.Time) { k.tab.Sweep(t.UnixNano()) }

// Close stops the limiter's background sweeper and waits for it to end.
// The limiter keeps answering; it only stops sweeping in the background.
func (k Keys[S]) Close() error { return k.tab.Close() }

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
