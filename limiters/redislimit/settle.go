package redislimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
	"github.com/ratelab/ratelab/limiters/internal/reservation"
)

// Reserve decides r as Decide does and returns the reservation to settle
// (limiters.Settler). A zero r.At is the process's clock, passed to Redis
// as an explicit time so that the settle knows when the reservation was
// decided: keep the fleet's clocks in step, as for any explicit time.
// Redis decides it exactly, with leases too (a lease is for Decide). A
// reservation Redis did not make (the decision followed the failure mode;
// the error says why) has nothing to settle; with a fallback, the
// fallback makes it, with a nil error, and Settle settles it there.
func (l *Limiter) Reserve(ctx context.Context, r limiters.Request) (limiters.Reservation, error) {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	f := reservation.Fields[limiters.Decision]{Owner: l, Key: r.Key, At: r.At.UnixNano(), Cost: r.N}
	var err error
	if r.N < 1 || outside(r.At) {
		f.Decision, err = l.malformed(ctx, r)
		f.Cost = 0
		return reservation.Make[limiters.Reservation](f), err
	}
	var each []limiters.Decision
	if k := len(l.quota); k > 1 {
		each = make([]limiters.Decision, k)
	}
	if err = l.decide(ctx, r, consume, each, &f.Decision); err != nil {
		if l.fallback != nil {
			return l.fallback.Reserve(ctx, r)
		}
		f.Decision, _ = l.unanswered(ctx, r, consume, err)
		f.Cost = 0
		return reservation.Make[limiters.Reservation](f), err
	}
	if each != nil {
		f.Resets = make([]time.Duration, len(each))
		for i, e := range each {
			f.Resets[i] = e.ResetAfter
		}
	}
	return reservation.Make[limiters.Reservation](f), nil
}

// Settle settles a reservation at its actual cost under every limit, in
// one round trip, each as the algorithm's package says (limiters.Settler),
// and returns the key's state after, as a Peek of one unit reports it. A
// zero s.At is the process's clock, as for Reserve. It is not retried: an
// error wrapping ErrUnavailable means the settle may or may not have been
// made. A reservation the fallback made is settled there.
func (l *Limiter) Settle(ctx context.Context, s limiters.Settlement) (limiters.Decision, error) {
	r := reservation.Get[limiters.Reservation, limiters.Decision](s.Reservation)
	if r.Owner != l && r.Owner != nil && l.fallback != nil {
		d, err := l.fallback.Settle(ctx, s)
		if err != nil {
			return d, fmt.Errorf("redislimit: the fallback: %w", err)
		}
		return d, nil
	}
	refund, charge, err := keytable.Settlement(r, l, s.Actual)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("redislimit: %w", err)
	}
	if s.At.IsZero() {
		s.At = time.Now()
	}
	if at := time.Unix(0, r.At); outside(at) || outside(s.At) {
		return limiters.Decision{}, fmt.Errorf("redislimit: %w: times %v and %v: want 1970 to 2106", limiters.ErrInvalidParameter, at, s.At)
	}
	c := newCall()
	l.settleCommand(c, r, refund, charge, s.At)
	var d limiters.Decision
	send := func() error {
		return l.run.script(ctx, "settle", c, l.scripts.settle, false, func(v any) error {
			if l.packed > 0 {
				return l.debt(v, 1, &d)
			}
			return l.integers(v, nil, &d)
		})
	}
	if l.denials != nil {
		// A refund may admit what a cached denial refuses, and a charge
		// changes when the key is full again: as for a Reset, the cache
		// of the key's set answers nothing and keeps nothing while the
		// settle runs, and forgets the key after (lincheck found a cached
		// denial from before a settle answered after another call had
		// seen the settle's effect).
		err = l.denials.reset(l.denials.hash(r.Key), send)
	} else {
		err = send()
	}
	if l.leases != nil {
		l.leases.settled(r.Key)
	}
	return d, err
}

// settleCommand builds in c the settle of r: EVALSHA sha k keys... refund
// charge seconds nanoseconds grace, r's seconds and nanoseconds, two
// numbers a limit, r's reset after under each limit, and packed, the
// field (see settle.lua and gcrapackedsettle.lua).
func (l *Limiter) settleCommand(c *call, r reservation.Fields[limiters.Decision], refund, charge int, now time.Time) {
	k := len(l.suffix)
	args := append(c.args[:0], "evalsha", l.scripts.settle.arg, k)
	for i, s := range l.suffix {
		c.keys[i].b = l.appendKey(c.keys[i].b[:0], r.Key, s)
		args = append(args, &c.keys[i])
	}
	ns := now.UnixNano()
	args = append(args, refund, charge, ns/1e9, ns%1e9, l.grace[1], r.At/1e9, r.At%1e9)
	args = append(args, l.params...)
	for i := range k {
		reset := r.Decision.ResetAfter
		if k > 1 {
			reset = r.Resets[i]
		}
		args = append(args, int64(reset))
	}
	if l.packed > 0 {
		c.field.b = append(c.field.b[:0], r.Key...)
		args = append(args, &c.field)
	}
	c.cmd = args
}
