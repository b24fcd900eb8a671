// Package composite enforces several limits on one key at once, all or
// nothing: "10 per second and 100 per minute and 1,000 per hour". A
// request is admitted only when every limit admits it, and then it
// consumes from every limit; a request that any limit denies consumes
// from none, so a client refused by its hourly limit does not also spend
// its per-second quota.
//
// Each limit is kept by an in-memory limiter of the chosen algorithm (any
// of the six). A decision holds one lock for its key (one of 256, by a hash
// of the key) across all its limits: it asks every limit but the last what
// it would decide without consuming (PeekAtN), lets the last decide, and
// only when all admit does it charge the others, so concurrent callers
// never see one limit consumed and another not, and a denial charges
// none even when a key is evicted or swept between the calls.
//
// The decision reports the most restrictive limit's quota (the least
// Remaining, and that limit's Limit; of equal Remaining, the smaller
// Limit), the longest RetryAfter (the time
// when every limit admits the request again) and the longest ResetAfter;
// DecideAt also says which limit denied and what each limit decided.
//
// A reservation (ReserveAt, Reserve) is decided all or nothing as any
// request is, and keeps each limit's decision (Reservation.Per): settling
// it (SettleAt, Settle) refunds or charges every limit, each as its
// algorithm's package says, under the key's lock, and reports the
// combined state after. A reservation allocates its Per, one Decision a
// limit; a plain decision allocates nothing.
//
// Memory: each limit holds the key, so a key costs the sum of its limits'
// (see each algorithm's package). A Limiter is safe for concurrent use;
// the zero value is not usable: call New, and Close when done.
package composite

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// Limit is one of a composite's limits.
type Limit struct {
	// Name names the limit in decisions and headers ("burst", "daily").
	// Empty means its rate as written ("100/min").
	Name string
	Rate limiters.Rate
}

// MaxLimits is the most limits one composite takes. (A decision keeps one
// Decision a limit on its stack; at 16 zeroing them cost more than a
// limit's own decision.)
const MaxLimits = 8

// Limiter enforces several limits on each key, all or nothing.
type Limiter struct {
	limits []Limit
	inner  []memory.Limiter
	clock  limiters.Clock
	// keyNames is whether the limits keep their keys, which Walk needs.
	keyNames bool
	seed     maphash.Seed
	locks    [256]struct {
		sync.Mutex
		_ [56]byte // one lock a cache line: neighbours do not contend
	}
}

var (
	_ limiters.AtLimiter  = (*Limiter)(nil)
	_ limiters.Peeker     = (*Limiter)(nil)
	_ limiters.Resetter   = (*Limiter)(nil)
	_ limiters.ResetAller = (*Limiter)(nil)
	_ limiters.Walker     = (*Limiter)(nil)
	_ limiters.AtSettler  = (*Limiter)(nil)
)

// New returns a limiter that enforces every one of limits, with algorithm
// a, on each key. A limit with a burst needs a bucket algorithm. The
// options apply to each limit's limiter; WithClock also sets the time
// AllowN decides at.
func New(a limiters.Algorithm, limits []Limit, opts ...limiters.Option) (*Limiter, error) {
	named, specs, err := check(a, limits)
	if err != nil {
		return nil, err
	}
	o, err := limiters.Apply(opts)
	if err != nil {
		return nil, fmt.Errorf("composite: %w", err)
	}
	l := &Limiter{limits: named, clock: o.Clock, keyNames: o.KeepKeyNames, seed: maphash.MakeSeed()}
	for i, spec := range specs {
		in, err := memory.New(spec, opts...)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("composite: limit %d (%s): %w", i+1, named[i].Name, err)
		}
		l.inner = append(l.inner, in)
	}
	return l, nil
}

// Check reports what New would refuse in limits for algorithm a, without
// making anything: their number, a name given twice, a limit a cannot
// enforce.
func Check(a limiters.Algorithm, limits []Limit) error {
	_, _, err := check(a, limits)
	return err
}

// Named returns a copy of limits with every empty name filled in, as New
// names them: the rate ("10/s").
func Named(limits []Limit) []Limit {
	out := make([]Limit, len(limits))
	for i, lim := range limits {
		if lim.Name == "" {
			lim.Name = lim.Rate.String()
		}
		out[i] = lim
	}
	return out
}

// check returns limits with their names filled in, and each one's spec.
func check(a limiters.Algorithm, limits []Limit) ([]Limit, []limiters.Spec, error) {
	if len(limits) == 0 || len(limits) > MaxLimits {
		return nil, nil, fmt.Errorf("composite: %w: want 1 to %d limits, got %d", limiters.ErrInvalidParameter, MaxLimits, len(limits))
	}
	named := Named(limits)
	specs := make([]limiters.Spec, len(limits))
	seen := map[string]int{}
	for i, lim := range named {
		if j, dup := seen[lim.Name]; dup {
			return nil, nil, fmt.Errorf("composite: %w: limits %d and %d are both named %q", limiters.ErrInvalidParameter, j+1, i+1, lim.Name)
		}
		seen[lim.Name] = i
		spec, err := lim.Rate.Spec(a)
		if err != nil {
			return nil, nil, fmt.Errorf("composite: limit %d (%s): %w", i+1, lim.Name, err)
		}
		specs[i] = spec
	}
	return named, specs, nil
}

// Limits returns the limits, named (a copy).
func (l *Limiter) Limits() []Limit { return append([]Limit(nil), l.limits...) }

// LimitName returns the name of limit i, as DecideAt numbers them.
func (l *Limiter) LimitName(i int) string { return l.limits[i].Name }

func (l *Limiter) lock(key string) *sync.Mutex {
	return &l.locks[maphash.String(l.seed, key)%uint64(len(l.locks))].Mutex
}

func (l *Limiter) now() time.Time {
	if l.clock != nil {
		return l.clock.Now()
	}
	return time.Now()
}

// AllowN reports whether n events for key may happen now under every
// limit, and consumes them from each if so. The error is non-nil only for
// n < 1.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	d := l.AllowAt(key, l.now(), n)
	if n < 1 {
		return d, fmt.Errorf("composite: %w, got %d", limiters.ErrInvalidCost, n)
	}
	return d, nil
}

// AllowAt reports whether n events for key may happen at t under every
// limit, and consumes them from each if so.
func (l *Limiter) AllowAt(key string, t time.Time, n int) limiters.Decision {
	d, _ := l.DecideAt(key, t, n, nil)
	return d
}

// DecideAt is AllowAt that also says which limit denied (its index in
// Limits: the one whose RetryAfter is the longest, the first of those; -1
// when the request was admitted, or its cost was below 1, which is denied
// with RetryAfter Never) and, when per has room for one Decision
// a limit, what each limit decided: for an admitted request, its quota
// after it; for a denied one, a denying limit's denial of it and a
// non-denying limit's state (Allowed, nothing consumed).
func (l *Limiter) DecideAt(key string, t time.Time, n int, per []limiters.Decision) (d limiters.Decision, denied int) {
	if n < 1 {
		d = l.PeekAt(key, t)
		d.Allowed, d.RetryAfter = false, limiters.Never
		return d, -1
	}
	if len(l.inner) == 1 { // one limit decides alone, under its own locks
		d = l.inner[0].AllowAt(key, t, n)
		if len(per) > 0 {
			per[0] = d
		}
		if !d.Allowed {
			return d, 0
		}
		return d, -1
	}
	var buf [MaxLimits]limiters.Decision
	if len(per) < len(l.inner) {
		per = buf[:len(l.inner)]
	}
	mu := l.lock(key)
	mu.Lock()
	// Every limit but the last says, without consuming, what it would
	// decide; if all would admit, the last decides for real, and only if
	// it admits are the others charged. A denial charges none.
	last := len(l.inner) - 1
	admit := true
	for i, in := range l.inner[:last] {
		per[i] = in.PeekAtN(key, t, n)
		admit = admit && per[i].Allowed
	}
	if admit {
		per[last] = l.inner[last].AllowAt(key, t, n)
		if admit = per[last].Allowed; admit {
			for i, in := range l.inner[:last] {
				per[i] = in.AllowAt(key, t, n)
			}
		}
	} else {
		per[last] = l.inner[last].PeekAtN(key, t, n)
	}
	mu.Unlock()
	return combine(per[:len(l.inner)], admit)
}

// ReserveAt decides n events for key at t under every limit, as AllowAt
// does, and returns the reservation to settle, with each limit's
// decision.
func (l *Limiter) ReserveAt(key string, t time.Time, n int) limiters.Reservation {
	per := make([]limiters.Decision, len(l.inner))
	d, _ := l.DecideAt(key, t, n, per)
	return limiters.Reservation{Key: key, At: t, Cost: n, Decision: d, Per: per}
}

// Reserve is ReserveAt now. The error is non-nil only for n < 1.
func (l *Limiter) Reserve(ctx context.Context, key string, n int) (limiters.Reservation, error) {
	r := l.ReserveAt(key, l.now(), n)
	if n < 1 {
		return r, fmt.Errorf("composite: %w, got %d", limiters.ErrInvalidCost, n)
	}
	return r, nil
}

// SettleAt settles r at its actual cost at t under every limit, and
// returns the key's state after, combined.
func (l *Limiter) SettleAt(r limiters.Reservation, t time.Time, actual int) (limiters.Decision, error) {
	if _, _, err := limiters.Settlement(r, actual); err != nil {
		return limiters.Decision{}, fmt.Errorf("composite: %w", err)
	}
	if len(r.Per) != len(l.inner) {
		return limiters.Decision{}, fmt.Errorf("composite: %w: a reservation of %d limits, for %d", limiters.ErrInvalidParameter, len(r.Per), len(l.inner))
	}
	var per [MaxLimits]limiters.Decision
	admit := true
	mu := l.lock(r.Key)
	mu.Lock()
	defer mu.Unlock()
	for i, in := range l.inner {
		each := limiters.Reservation{Key: r.Key, At: r.At, Cost: r.Cost, Decision: r.Per[i]}
		d, err := in.SettleAt(each, t, actual)
		if err != nil { // each limit admitted it: only a malformed Per says otherwise
			return limiters.Decision{}, fmt.Errorf("composite: limit %s: %w", l.limits[i].Name, err)
		}
		per[i] = d
		admit = admit && d.Allowed
	}
	d, _ := combine(per[:len(l.inner)], admit)
	return d, nil
}

// Settle is SettleAt now.
func (l *Limiter) Settle(ctx context.Context, r limiters.Reservation, actual int) (limiters.Decision, error) {
	return l.SettleAt(r, l.now(), actual)
}

// combine makes one decision of the limits' decisions.
func combine(per []limiters.Decision, admit bool) (d limiters.Decision, denied int) {
	d, denied = per[0], -1
	d.Allowed = admit
	for i, p := range per {
		if p.Remaining < d.Remaining || p.Remaining == d.Remaining && p.Limit < d.Limit {
			d.Remaining, d.Limit = p.Remaining, p.Limit
		}
		if !admit && !p.Allowed && (denied < 0 || p.RetryAfter > d.RetryAfter) {
			d.RetryAfter, denied = p.RetryAfter, i
		}
		d.ResetAfter = max(d.ResetAfter, p.ResetAfter)
	}
	if admit {
		d.RetryAfter = 0
	}
	return d, denied
}

// PeekAt reports key's state at t under every limit without consuming
// anything, combined as a decision is.
func (l *Limiter) PeekAt(key string, t time.Time) limiters.Decision {
	var per [MaxLimits]limiters.Decision
	admit := true
	mu := l.lock(key)
	mu.Lock()
	for i, in := range l.inner {
		per[i] = in.PeekAt(key, t)
		admit = admit && per[i].Allowed
	}
	mu.Unlock()
	d, _ := combine(per[:len(l.inner)], admit)
	return d
}

// Peek is PeekAt now.
func (l *Limiter) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	return l.PeekAt(key, l.now()), nil
}

// Reset forgets key under every limit.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	mu := l.lock(key)
	mu.Lock()
	defer mu.Unlock()
	for _, in := range l.inner {
		if err := in.Reset(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// ResetAll forgets every key under every limit.
func (l *Limiter) ResetAll(ctx context.Context) error {
	for i := range l.locks {
		l.locks[i].Lock()
	}
	defer func() {
		for i := range l.locks {
			l.locks[i].Unlock()
		}
	}()
	for _, in := range l.inner {
		if err := in.ResetAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Walk calls fn with each key any limit holds and what Peek reports for
// it, until fn returns false. It needs the limiter made WithKeyNames: the
// limits keep only hashes otherwise, and Walk says so.
func (l *Limiter) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	if !l.keyNames {
		return fmt.Errorf("composite: Walk needs the keys: make the limiter WithKeyNames")
	}
	now := l.now()
	seen := map[string]bool{}
	for _, in := range l.inner {
		var keys []string
		in.WalkAt(now, func(key string, _ limiters.Decision) bool {
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
			return true
		})
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !fn(k, l.PeekAt(k, now)) {
				return nil
			}
		}
	}
	return nil
}

// Close stops every limit's background sweeper.
func (l *Limiter) Close() error {
	for _, in := range l.inner {
		in.Close()
	}
	return nil
}
