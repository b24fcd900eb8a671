package redislimit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
)

// The modes of a decision script: decide and consume, or peek. (Boxed
// once: a string converted to an interface at each call is an
// allocation.)
var consume, peek any = "a", "p"

// The times the scripts keep: Unix seconds in 32 bits.
var (
	minTime = time.Unix(0, 0)
	maxTime = time.Unix(math.MaxUint32, 0)
)

// Decide reports whether r may happen under every limit, and consumes its
// cost from each if so: one round trip, or none when the denial cache or
// a lease answers. A zero r.At is the server's clock. When Redis does not
// answer, the error wraps ErrUnavailable and the Decision is the failure
// mode's; with a fallback (WithFallback) the Decision is the fallback's
// and the error nil. The error is also non-nil for r.N < 1, and for an
// r.At outside 1970 to 2106.
func (l *Limiter) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return l.answer(ctx, r, consume)
}

// AllowN is shorthand for Decide of n events for key at the server's
// clock.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return l.answer(ctx, limiters.Request{Key: key, N: n}, consume)
}

// Peek reports what Decide(ctx, r) would decide, consuming nothing, in one
// round trip: Redis's word, not the denial cache's or a lease's. When Redis
// does not answer it falls back as Decide does.
func (l *Limiter) Peek(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return l.answer(ctx, r, peek)
}

// answer decides (mode consume) or peeks r, under the failure policy.
// (Decisions pass by pointer below it: a Decision copied from one frame
// to the next cost a cached denial a sixth of its time.)
func (l *Limiter) answer(ctx context.Context, r limiters.Request, mode any) (d limiters.Decision, err error) {
	if r.N < 1 || outside(r.At) {
		return l.malformed(ctx, r)
	}
	if l.leases != nil && mode == consume {
		err = l.lease(ctx, r, &d)
	} else {
		err = l.decide(ctx, r, mode, nil, &d)
	}
	if err != nil {
		return l.unanswered(ctx, r, mode, err)
	}
	return d, nil
}

// outside reports whether t is an explicit time the scripts cannot keep.
func outside(t time.Time) bool {
	return !t.IsZero() && (t.Before(minTime) || t.After(maxTime))
}

// malformed is the denial of a request of a cost below one, or at a time
// outside what the scripts keep, and the error that says so.
func (l *Limiter) malformed(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if outside(r.At) {
		d := limiters.Decision{Limit: l.open.Limit, RetryAfter: limiters.Never, Policy: l.policy}
		return d, fmt.Errorf("redislimit: %w: time %v is outside what the Redis backend keeps (1970 to 2106)", limiters.ErrInvalidParameter, r.At)
	}
	d, _ := l.answer(ctx, limiters.Request{Key: r.Key, N: 1, At: r.At}, peek)
	d.Allowed, d.RetryAfter, d.Denied = false, limiters.Never, 0
	return d, fmt.Errorf("redislimit: %w, got %d", limiters.ErrInvalidCost, r.N)
}

// decide has Redis decide (mode consume) or peek r, a well-formed
// request, through the denial cache, into d. When each is not nil, it
// gets each limit's own decision, as package composite makes them.
func (l *Limiter) decide(ctx context.Context, r limiters.Request, mode any, each []limiters.Decision, d *limiters.Decision) error {
	ds := l.denials
	if ds == nil || mode != consume {
		return l.send(ctx, r, mode, each, d)
	}
	h := ds.hash(r.Key)
	var now, clock int64
	var gen uint64
	cache := r.N == 1 && each == nil
	if cache {
		now, clock = ds.now(r.At)
		if ds.denied(d, h, now, clock) {
			d.Policy = l.policy
			return nil
		}
		gen = ds.gen(h)
	}
	err := l.send(ctx, r, mode, each, d)
	if err == nil {
		l.learn(h, gen, now, clock, cache, d)
	}
	return err
}

// send runs the decision script for r in mode and reads its reply into d.
func (l *Limiter) send(ctx context.Context, r limiters.Request, mode any, each []limiters.Decision, d *limiters.Decision) error {
	c := newCall()
	l.command(c, r, mode)
	what := "decide"
	if mode == peek {
		what = "peek"
	}
	c.ack = mode == consume
	return l.run.script(ctx, what, c, l.scripts.one, true, func(v any) error { return l.reply(v, r.N, each, d) })
}

// command builds in c the decision of r in mode: EVALSHA sha k keys...
// mode n seconds nanoseconds grace, two numbers a limit, and packed, the
// field.
func (l *Limiter) command(c *call, r limiters.Request, mode any) {
	k := len(l.suffix)
	args := c.args[:3+k+5]
	args[0], args[1], args[2] = "evalsha", l.scripts.one.arg, k
	for i, s := range l.suffix {
		c.keys[i].b = l.appendKey(c.keys[i].b[:0], r.Key, s)
		args[3+i] = &c.keys[i]
	}
	argv := args[3+k:]
	argv[0], argv[1] = mode, r.N
	if r.At.IsZero() {
		argv[2], argv[3], argv[4] = "", "", l.grace[0]
	} else {
		ns := r.At.UnixNano()
		argv[2], argv[3], argv[4] = ns/1e9, ns%1e9, l.grace[1]
	}
	args = append(args, l.params...)
	if l.packed > 0 { // the field: the key, as bytes from the call's buffer
		c.field.b = append(c.field.b[:0], r.Key...)
		args = append(args, &c.field)
	}
	c.cmd = args
}

// reply reads into d the decision script's reply to a request of cost n:
// the debt, for GCRA with one limit (see debt), else six integers (see
// integers). It fills each (nil, or room for every limit) with the
// limits' own decisions. (A Decision is written in place, not returned:
// see answer.)
func (l *Limiter) reply(v any, n int, each []limiters.Decision, d *limiters.Decision) error {
	if l.interval > 0 {
		err := l.debt(v, n, d)
		if each != nil {
			each[0] = *d
			each[0].Policy, each[0].Denied = nil, 0
		}
		return err
	}
	return l.integers(v, each, d)
}

// integers reads a reply of six integers in a string: allowed, the limit
// that denied (1-based; 0 when admitted), limit, remaining, retry after
// (ns; -1 for never) and reset after; for more than one limit, four more
// a limit: admits, remaining, retry after, reset after.
func (l *Limiter) integers(v any, each []limiters.Decision, d *limiters.Decision) error {
	str, ok := v.(string)
	k := len(l.suffix)
	want := 6
	if k > 1 {
		want += 4 * k
	}
	var x [6 + 4*composite.MaxLimits]int64
	for i := range want {
		if !ok {
			break
		}
		field, rest, more := strings.Cut(str, " ")
		var err error
		x[i], err = strconv.ParseInt(field, 10, 64)
		ok = err == nil && more == (i < want-1)
		str = rest
	}
	by := int(x[1]) - 1
	if !ok || !sane(x[0], x[2:6]) || (x[0] == 1) != (by == -1) || by < -1 || by >= k {
		*d = limiters.Decision{}
		return fmt.Errorf("the script replied %T %.120q, want %d integers", v, v, want)
	}
	*d = decision(x[0], int(x[2]), x[2:6])
	d.Policy = l.policy
	if k == 1 {
		if !d.Allowed {
			d.Denied = keytable.Denied
		}
		if each != nil {
			each[0] = *d
			each[0].Policy, each[0].Denied = nil, 0
		}
		return nil
	}
	for i := range k { // checked whether or not each wants them
		e := x[6+4*i : 10+4*i]
		if !sane(e[0], e) || d.Allowed && e[0] == 0 {
			// (The numbers one by one: the slice would move x to the heap.)
			*d = limiters.Decision{}
			return fmt.Errorf("the script replied %T %.120q: limit %d's decision %d %d %d %d is out of range", v, v, i+1, e[0], e[1], e[2], e[3])
		}
		if !d.Allowed && e[0] == 0 {
			d.Denied = d.Denied.Deny(i, i == by)
		}
		if each != nil {
			each[i] = decision(e[0], l.quota[i], e)
		}
	}
	if !d.Allowed && !d.Denied.Has(by) {
		*d = limiters.Decision{}
		return fmt.Errorf("the script replied %T %.120q: limit %d denied, but admits", v, v, by+1)
	}
	return nil
}

// debt reads the reply of GCRA with one limit (gcrasingle.lua,
// gcrapacked.lua): the debt, how far the theoretical arrival time is
// ahead of now after the decision, in ns, as an integer (alone) or a
// decimal string (in a batch); -debt-1 when the decision denies. The rest
// follows from the limit C and the emission interval T, as in the
// in-memory GCRA: CT - debt is the room left, and a denied n fits once
// the debt has fallen to CT - nT.
func (l *Limiter) debt(v any, n int, d *limiters.Decision) error {
	var x int64
	ok := false
	switch v := v.(type) {
	case int64:
		x, ok = v, true
	case string:
		var err error
		x, err = strconv.ParseInt(v, 10, 64)
		ok = err == nil
	}
	c, t := int64(l.quota[0]), l.interval
	ct := c * t
	allowed, debt := x >= 0, x
	if !allowed {
		debt = -x - 1
	}
	*d = limiters.Decision{Allowed: allowed, Limit: int(c), ResetAfter: time.Duration(debt), Policy: l.policy}
	if debt < ct {
		d.Remaining = int((ct - debt) / t)
	}
	if !allowed {
		d.Denied = keytable.Denied
		d.RetryAfter = limiters.Never
		if int64(n) <= c {
			d.RetryAfter = time.Duration(debt + int64(n)*t - ct)
			ok = ok && d.RetryAfter > 0 // it denies: n does not fit yet
		}
	}
	if !ok || allowed && debt > ct {
		*d = limiters.Decision{}
		return fmt.Errorf("the script replied %T %.120q, want a debt of at most %d ns", v, v, ct)
	}
	return nil
}

// sane reports whether allowed is 1 or 0 and the remaining and reset after
// of x (limit or admits, remaining, retry after, reset after) are not
// negative.
func sane(allowed int64, x []int64) bool {
	return (allowed == 0 || allowed == 1) && x[1] >= 0 && x[3] >= 0
}

// decision makes a Decision of quota limit of x: admits, remaining, retry
// after (-1: never) and reset after.
func decision(allowed int64, limit int, x []int64) limiters.Decision {
	d := limiters.Decision{
		Allowed:    allowed == 1,
		Limit:      limit,
		Remaining:  int(x[1]),
		RetryAfter: time.Duration(x[2]),
		ResetAfter: time.Duration(x[3]),
	}
	if x[2] < 0 {
		d.RetryAfter = limiters.Never
	}
	return d
}
