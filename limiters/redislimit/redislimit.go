package redislimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// Client is what a Limiter needs of a go-redis client. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient (single
// server, Cluster or Sentinel) all are one.
type Client interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
	HKeys(ctx context.Context, key string) *redis.StringSliceCmd
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	Pipeline() redis.Pipeliner
}

const (
	// MaxPeriod is the longest window, and the longest time a bucket may
	// take to refill from empty, a Redis limiter takes: 2^52ns, about 52
	// days. Within it every time a script computes is an exact integer
	// number of nanoseconds in a double.
	MaxPeriod = time.Duration(1 << 52)
	// MinWindow is the shortest window a Redis limiter takes.
	MinWindow = time.Microsecond
	// MaxLogLimit is the largest limit of a sliding log on Redis: its log
	// is rewritten on every admitted request (16 bytes a request in the
	// window), so a larger one would be slow.
	MaxLogLimit = 1 << 16
	// explicitGrace is the least time to live past full quota of a key
	// last decided at an explicit time.
	explicitGrace = 10 * time.Minute
)

// Limiter keeps limits in Redis. It is safe for concurrent use; the zero
// value is not usable: call New, and Close when done.
type Limiter struct {
	run     *runner
	scripts scripts // the decision's, the batch's and the settle's
	policy  *limiters.Policy
	quota   []int    // each limit's Quota
	suffix  []string // each limit's key suffix
	params  []any    // two ARGV a limit: N and W, or C and T
	o       Options
	grace   [2]any // the grace ARGV (ms): at the server's clock, at explicit times

	// packed is the number of hashes the keys are packed into
	// (WithPacking); zero when each has a Redis key of its own.
	packed uint64
	// interval is GCRA's emission interval in ns when the decision script
	// replies with the debt alone (one limit, gcrasingle.lua and
	// gcrapacked.lua); zero otherwise.
	interval int64
	// unit is the time a unit of quota takes to come back, in ns, for
	// GCRA and the token bucket with one limit (zero otherwise): an
	// admission that leaves such a key empty is cached as a denial, and
	// leases wait for room by it.
	unit int64

	denials  *denials           // WithDenialCache; nil for none
	leases   *leases            // WithLeases; nil when every decision is exact
	fallback *composite.Limiter // WithFallback; nil for none
	// open and closed are the decisions of the failure modes.
	open, closed limiters.Decision
}

var (
	_ limiters.Settler  = (*Limiter)(nil)
	_ limiters.Peeker   = (*Limiter)(nil)
	_ limiters.Resetter = (*Limiter)(nil)
	_ limiters.Walker   = (*Limiter)(nil)
)

// New returns a Limiter that enforces every one of limits (at most
// composite.MaxLimits, named apart) on each key with algorithm a, all or
// nothing, in Redis through c: one script, one round trip a decision.
// Beyond what limiters.Limit.Validate checks, a window must be MinWindow
// to MaxPeriod, a bucket must refill from empty within MaxPeriod, and a
// sliding log's N must be at most MaxLogLimit.
func New(c Client, a limiters.Algorithm, limits []limiters.Limit, opts ...Option) (*Limiter, error) {
	if c == nil {
		return nil, fmt.Errorf("redislimit: %w: no Redis client", limiters.ErrInvalidParameter)
	}
	if err := checkLimits(a, limits); err != nil {
		return nil, err
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	o, err := o.defaults()
	if err != nil {
		return nil, err
	}
	if err := check(o.features(), a, len(limits)); err != nil {
		return nil, err
	}
	if err := checkAck(c, o); err != nil {
		return nil, fmt.Errorf("redislimit: %w: %w", limiters.ErrInvalidParameter, err)
	}
	l := &Limiter{run: newRunner(c, o), policy: limiters.NewPolicy(limits...), o: o, scripts: general[a]}
	for _, lim := range l.policy.Limits {
		l.quota = append(l.quota, lim.Quota())
		l.suffix = append(l.suffix, suffix(a, lim))
		period := lim.Per
		if a.IsBucket() {
			period = lim.Interval()
		}
		l.params = append(l.params, strconv.Itoa(lim.Quota()), strconv.FormatInt(int64(period), 10))
	}
	if err := l.parts(a); err != nil {
		return nil, err
	}
	return l, nil
}

// parts sets up what l's options ask for, and the failure decisions.
func (l *Limiter) parts(a limiters.Algorithm) error {
	o, one := l.o, len(l.quota) == 1
	l.grace[0] = strconv.FormatInt(max(o.Grace.Milliseconds(), 1), 10)
	l.grace[1] = strconv.FormatInt(max(o.Grace, explicitGrace).Milliseconds(), 10)
	if one && (a == limiters.GCRA || a == limiters.TokenBucket) {
		l.unit = int64(l.policy.Limits[0].Interval())
	}
	if one && a == limiters.GCRA {
		l.scripts, l.interval = gcraOne, l.unit
	}
	if o.Packing > 0 {
		l.scripts, l.packed = gcraPack, uint64(o.Packing)
	}
	if o.DenialCache > 0 {
		l.denials = newDenials(o.DenialCache)
	}
	if o.Lease > 0 {
		if o.LeaseMost > l.quota[0] {
			return fmt.Errorf("redislimit: %w: a lease of %d units is more than the capacity, %d, and would never be granted", limiters.ErrInvalidParameter, o.LeaseMost, l.quota[0])
		}
		most := o.LeaseMost
		if most == 0 {
			most = max(1, l.quota[0]/4)
		}
		l.leases = newLeases(leaseEntries, o.Lease, int64(most), l.quota[0], l.unit, l.policy)
	}
	if o.FailureMode == Fallback {
		f, err := newFallback(a, l.policy.Limits, o.Fleet)
		if err != nil {
			return err
		}
		l.fallback = f
	}
	least := 0
	for i, q := range l.quota {
		if q < l.quota[least] {
			least = i
		}
	}
	l.open = limiters.Decision{Allowed: true, Limit: l.quota[least], Policy: l.policy}
	l.closed = limiters.Decision{Limit: l.quota[least], RetryAfter: o.Timeout, Policy: l.policy, Denied: limiters.Denials(0).Deny(least, true)}
	if o.Batching != nil {
		fixed := append([]any{l.grace[0], l.grace[1]}, l.params...)
		l.run.batch = newBatcher(l.run, l.scripts, len(l.quota), fixed, *o.Batching)
	}
	return nil
}

// checkLimits reports what New refuses in limits for algorithm a: their
// number, a name given twice, a limit a cannot enforce, or one beyond
// what the scripts compute exactly.
func checkLimits(a limiters.Algorithm, limits []limiters.Limit) error {
	if _, err := limiters.ParseAlgorithm(string(a)); err != nil {
		return fmt.Errorf("redislimit: %w", err)
	}
	if len(limits) == 0 || len(limits) > composite.MaxLimits {
		return fmt.Errorf("redislimit: %w: want 1 to %d limits, got %d", limiters.ErrInvalidParameter, composite.MaxLimits, len(limits))
	}
	seen := map[string]int{}
	for i, lim := range limits {
		lim = lim.Named()
		if j, dup := seen[lim.Name]; dup {
			return fmt.Errorf("redislimit: %w: limits %d and %d are both named %q", limiters.ErrInvalidParameter, j+1, i+1, lim.Name)
		}
		seen[lim.Name] = i
		err := lim.Validate(a)
		if err == nil {
			err = fits(a, lim)
		}
		switch {
		case err != nil && len(limits) > 1:
			return fmt.Errorf("redislimit: limit %d (%s): %w", i+1, lim.Name, err)
		case err != nil:
			return fmt.Errorf("redislimit: %w", err)
		}
	}
	return nil
}

// fits reports whether lim, valid for a, is within what the scripts
// compute exactly.
func fits(a limiters.Algorithm, lim limiters.Limit) error {
	if a.IsBucket() {
		if fill := float64(lim.Quota()) * float64(lim.Interval()); fill > float64(MaxPeriod) {
			return fmt.Errorf("%w: %v takes %v to refill from empty; on Redis at most %v (2^52ns)", limiters.ErrInvalidParameter, lim, time.Duration(math.Min(fill, math.MaxInt64)), MaxPeriod)
		}
		return nil
	}
	switch {
	case lim.Per > MaxPeriod:
		return fmt.Errorf("%w: window %v is longer than the %v (2^52ns) a Redis limiter takes", limiters.ErrInvalidParameter, lim.Per, MaxPeriod)
	case lim.Per < MinWindow:
		return fmt.Errorf("%w: window %v is shorter than the %v a Redis limiter takes", limiters.ErrInvalidParameter, lim.Per, MinWindow)
	case a == limiters.SlidingLog && lim.N > MaxLogLimit:
		return fmt.Errorf("%w: a sliding log on Redis rewrites its log on every admitted request, so its limit must be at most %d, got %d", limiters.ErrInvalidParameter, MaxLogLimit, lim.N)
	}
	return nil
}

// Limits returns the limits, named, in their order (a copy).
func (l *Limiter) Limits() []limiters.Limit { return slices.Clone(l.policy.Limits) }

// Counts returns what l has sent to Redis so far.
func (l *Limiter) Counts() Counts { return l.run.counts() }

// BreakerOpen reports whether the circuit breaker (WithBreaker) is open:
// calls are failing fast. It is false without a breaker.
func (l *Limiter) BreakerOpen() bool { return l.run.breaker.open() }

// Close stops a batching Limiter's goroutines, once every decision queued
// is answered, and a fallback's sweeper; decisions after Close fail (and
// follow the failure mode). Close does not close the client.
func (l *Limiter) Close() error {
	if l.run.batch != nil {
		l.run.batch.close()
	}
	if l.fallback != nil {
		l.fallback.Close()
	}
	return nil
}
