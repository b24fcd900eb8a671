// Package redislimit keeps rate limits in Redis, so that a fleet of
// processes shares one limit per key. Every algorithm of ratelab is here,
// with the same semantics as in memory: on the same trace, at explicit
// times, a Redis limiter and an in-memory one give the same decisions.
//
// Each algorithm is one Lua script, run by its SHA-1 (EVALSHA) and sent
// whole (EVAL) only when the server does not have it: one round trip per
// decision, atomic on the server. A Limiter may hold several limits of one
// algorithm at once ("10/s and 1000/h"), all or nothing, in the same one
// round trip.
//
// Time is the server's clock (Redis TIME) by default, so a fleet agrees
// whatever the skew between its machines' clocks; AllowAt and PeekAt take
// an explicit time instead, which is how traces are replayed exactly.
//
// Keys are Prefix, the caller's key in braces (a Redis Cluster hash tag:
// the keys of one decision share a slot; braces and % in the key are
// escaped as %7B, %7D and %25, and the empty key is %), then the algorithm
// and the limit (N/W or C@T, W and T in nanoseconds):
//
//	ratelab:{alice}:gcra:10@200000000
//
// Every key expires once its quota is full again, plus a grace (never
// before: the sliding window counter keeps its previous window).
//
// A denial Redis made of a unit request is remembered in the process until
// the retry-after Redis gave, and the key's unit requests are denied again
// without a round trip (WithDenialCache, on by default): exact, since only
// consumption happens elsewhere, but for a Reset made by another process.
//
// Leases (WithLeases, off by default) trade exactness for round trips
// within a stated bound: a process takes several units of a key's quota
// in one decision and admits from them for at most the lease time.
//
// When Redis cannot answer within the timeout, a decision follows the
// failure mode (fail open by default, fail closed, or fall back to an
// in-memory share of the limit) and the error says so; nothing waits
// longer than the timeout, nothing panics; a circuit breaker
// (WithBreaker) stops asking a Redis that keeps failing.
//
// A request whose cost is known only after it is reserved (Reserve,
// decided at the process's clock as an explicit time) and settled at its
// actual cost (Settle, one round trip), as the in-memory limiters do and
// with the same decisions (see limiters.Settler and docs/settle.md).
//
// Numbers in Lua are doubles, exact for integers up to 2^53, and the
// scripts compute in nanoseconds relative to the decision's second: a
// window, or a bucket's time to refill from empty, may be at most 2^52ns
// (52 days), and a window at least a microsecond; times run from 1970 to
// 2106.
package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/memory"
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

// FailureMode is what a decision does when Redis cannot make it.
type FailureMode int

const (
	// FailOpen admits the request: an outage of Redis is not an outage of
	// the API. The Decision has Allowed true, Remaining 0.
	FailOpen FailureMode = iota
	// FailClosed denies the request, with RetryAfter the timeout: nothing
	// passes unmetered.
	FailClosed
	// Fallback decides the request with an in-memory limiter of the same
	// algorithm at the limit divided by the fleet's size (WithFallback):
	// while Redis is down each process enforces its share, so an outage
	// neither opens the gates nor refuses everyone. Peeks, and limiters
	// with several limits, fail closed.
	Fallback
)

func (m FailureMode) String() string {
	switch m {
	case FailClosed:
		return "fail closed"
	case Fallback:
		return "fall back to memory"
	}
	return "fail open"
}

// ErrUnavailable reports that Redis did not make a decision (it is down,
// slow, or answered something unexpected). The Decision returned with it
// follows the Limiter's FailureMode.
var ErrUnavailable = errors.New("redislimit: Redis did not decide")

// Options configure a Limiter. The zero value is the default.
type Options struct {
	// Prefix starts every key; empty means "ratelab:". It must not contain
	// braces, which would move the hash tag.
	Prefix string
	// Timeout bounds every call to Redis; zero means 250ms.
	Timeout time.Duration
	// FailureMode is what a decision does when Redis does not answer.
	FailureMode FailureMode
	// Grace is how long a key outlives the moment its quota is full
	// again; zero means one second. A decision at an explicit time keeps
	// its keys at least ten minutes past that moment, counted on the
	// server's clock, so a replay slower than its trace finds its state.
	Grace time.Duration
	// Batching, when set, gathers concurrent decisions into pipelines.
	Batching *Batching
	// Packing, when positive, keeps the keys of a single GCRA limit in
	// that many Redis hashes, a field a key, in place of a Redis key each
	// (see WithPacking).
	Packing int
	// DenialCache is how many of Redis's denials the Limiter remembers in
	// the process, to deny a key again without a round trip until Redis's
	// retry-after has passed (see WithDenialCache); zero means 4096,
	// negative none.
	DenialCache int
	// Lease, when positive, is the lease time τ of the approximate lease
	// mode (see WithLeases); zero means exact decisions, one round trip
	// each (or none, from the denial cache).
	Lease time.Duration
	// LeaseMost is the most units one lease takes; zero means a quarter
	// of the capacity, at least one.
	LeaseMost int
	// Fleet is the number of processes sharing the limit, for the
	// Fallback failure mode: each falls back to the limit divided by it.
	Fleet int
	// BreakerFailures, when positive, turns the circuit breaker on: after
	// that many decisions in a row that Redis did not make, decisions
	// follow the failure mode at once for BreakerCool (zero: one second),
	// then one goes to Redis to probe (see WithBreaker).
	BreakerFailures int
	BreakerCool     time.Duration
}

// An Option sets one of the Options.
type Option func(*Options)

// WithPrefix sets the key prefix.
func WithPrefix(p string) Option { return func(o *Options) { o.Prefix = p } }

// WithTimeout sets the bound on every call to Redis.
func WithTimeout(d time.Duration) Option { return func(o *Options) { o.Timeout = d } }

// WithFailureMode sets what a decision does when Redis does not answer.
func WithFailureMode(m FailureMode) Option { return func(o *Options) { o.FailureMode = m } }

// WithGrace sets how long keys outlive full quota.
func WithGrace(d time.Duration) Option { return func(o *Options) { o.Grace = d } }

// WithFallback sets the Fallback failure mode, for a fleet of fleet
// processes: while Redis does not decide, each process decides with an
// in-memory limiter of the same algorithm at the limit divided by fleet
// (rounded up; a bucket's rate divided too). Decisions made so still
// return the error, which wraps ErrUnavailable.
func WithFallback(fleet int) Option {
	return func(o *Options) { o.FailureMode, o.Fleet = Fallback, fleet }
}

// WithBreaker turns on the circuit breaker: after failures decisions in a
// row that Redis did not make (down, slow past the timeout, or an answer
// not understood), the Limiter stops asking: for cool (zero: one second)
// every decision follows the failure mode at once, its error wrapping
// ErrBreakerOpen and ErrUnavailable, then one decision goes to Redis as a
// probe while the others still fail fast; the probe's answer closes the
// breaker, its failure opens it for cool again. A decision the caller
// gave up on counts neither way. So an outage costs the timeout failures
// times, then nothing, instead of the timeout on every request.
func WithBreaker(failures int, cool time.Duration) Option {
	return func(o *Options) { o.BreakerFailures, o.BreakerCool = failures, cool }
}

// WithDenialCache sets how many of Redis's denials of unit requests the
// Limiter remembers (about 64 bytes each; zero means 4096, negative none).
// While a key is denied, its unit requests are denied again in the process,
// with no round trip, until the retry-after Redis gave: under an attack or
// an overload, a hammered key costs Redis nothing more. It is exact, since
// only consumption happens elsewhere: nothing can give the key room before
// that time. Only a reset can, and Reset and ResetAll through this Limiter
// clear it; a Reset made by another process is not seen here, and this
// process may deny the key for up to the retry-after it cached (at most a
// window, or a bucket's refill). Requests of a cost above 1, peeks and
// DecideEach always go to Redis.
//
// Exact means at the server's clock, and at explicit times that do not go
// back: a denial cached at time t answers a request at an earlier time
// than an admission Redis made of the key at a later one (in another
// process, or in this one before its reply is read) as the key stood at
// t, where Redis decides a window's or a bucket's request at the later
// time it has seen, and may admit it (GCRA decides at the time given, and
// denies as the cache does, with a later retry-after).
//
// For GCRA and the token bucket with one limit, an admission that leaves
// the key empty (Remaining 0) is cached too, as the denial of the next
// unit until the time it fits: by the same argument Redis would deny
// every unit request until then, so a key asked past its limit costs a
// round trip an admission, not two.
func WithDenialCache(entries int) Option { return func(o *Options) { o.DenialCache = entries } }

// WithLeases turns on the approximate lease mode, for GCRA and the token
// bucket with one limit: a process takes up to most units of a key's
// quota from Redis in one round trip (a lease, zero most meaning a quarter
// of the capacity) and admits the key's requests from them itself, for at
// most the lease time tau; units it has not spent by then are dropped.
//
// The error is bounded: in any interval of length D, the fleet admits at
// most C + (D+tau)·R requests of a key, where the exact limiter admits at
// most C + D·R (C the capacity, R the rate): never more than tau·R over
// the exact limiter's bound, whatever the number of processes. A process
// denies more than the exact limiter would while units sit leased and
// unspent in another process, and while it waits for room for a whole
// lease. A quiet key takes leases of one unit (exact, one round trip a
// request); a busy one, leases sized to its demand in this process over
// tau. Reset and ResetAll through this Limiter drop its leases; a Reset
// through another process leaves this one's units to be spent (at most a
// lease). Peek, PeekAt and DecideEach go to Redis and do not see the
// units processes hold.
func WithLeases(tau time.Duration, most int) Option {
	return func(o *Options) { o.Lease, o.LeaseMost = tau, most }
}

// WithPacking keeps the keys of a single GCRA limit in hashes Redis
// hashes, each caller's key a field of the hash its hash (FNV-1a) picks,
// named Prefix{%bI}:gcra:C@T for hash I. A Redis key of its own costs
// Redis about 100 bytes whatever it holds (its entries in the keyspace
// and in the expiry table); a field of a small hash costs its name, its
// value and a few bytes. With about 16 to 64 keys a hash (Redis keeps a
// hash of at most 128 short fields as one compact list), a million keys
// take less than half the memory. The price is server work: a decision
// reads and writes a field, keeps the hash's expiry, and, for a new key,
// looks at two fields drawn at random to delete those whose quota has
// been full for the grace (a field does not expire on its own before
// Redis 7.4). On the server (callgrind, Redis 7.0, 32 keys a hash), a
// decision on a key already in its hash costs about 15% more instructions
// (89k against 77k), and one on a new key about 60% more (118k against
// 75k); a server that answers one decision a round trip spends most of
// its time on the round trip.
//
// Decisions are the same as without packing. A hash expires when its
// last field's quota is full again plus the grace. Packing does not
// combine with batching, and is for GCRA with one limit.
func WithPacking(hashes int) Option { return func(o *Options) { o.Packing = hashes } }

// MaxPacking is the most hashes WithPacking takes.
const MaxPacking = 1 << 24

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

var (
	minTime = time.Unix(0, 0)
	maxTime = time.Unix(math.MaxUint32, 0)
)

// Limiter decides in Redis. It is safe for concurrent use.
type Limiter struct {
	c      Client
	script *script
	settle *script           // the algorithm's settle (settle.lua)
	limits []composite.Limit // named
	quota  []int             // each limit's N or C, for failure decisions
	suffix []string          // each limit's key suffix
	params []any             // two ARGV a limit
	o      Options
	grace  [2]any // ARGV 5: for the server's clock, for explicit times (strings)

	// guard is whether calls run on a goroutine of their own, raced
	// against the timeout: the client does not honour context deadlines.
	guard bool
	// light is whether a call's deadline may be set without a timer: the
	// client honours deadlines and its pool gives up waiting for a
	// connection within the timeout.
	light bool
	sha   any // the script's SHA-1, boxed once

	// batch sends decisions in pipelines (WithBatching); nil otherwise.
	batch *batcher
	// packed is the number of hashes the keys are packed into
	// (WithPacking); zero when each has a Redis key of its own.
	packed uint64
	// interval is GCRA's emission interval in ns when the script replies
	// with the debt alone (gcra1.lua, gcrapacked.lua); zero otherwise.
	interval int64

	// denials remembers Redis's denials (WithDenialCache); nil for none.
	denials *denials
	// unit is the time a unit of quota takes to come back, in ns, for
	// GCRA and the token bucket with one limit (zero otherwise): an
	// admission that leaves such a key empty is a denial of the next unit
	// until then, and is cached as one; and leases wait for room by it.
	unit int64
	// leases holds the units this process leased (WithLeases); nil when
	// every decision is exact.
	leases *leases
	// breaker stops asking a failing Redis (WithBreaker); nil for none.
	breaker *breaker
	// fallback decides while Redis does not (WithFallback); nil for none.
	fallback memory.Limiter

	// evals counts the times the script had to be sent whole (NOSCRIPT),
	// and trips the round trips of decisions sent alone. (The denial
	// cache counts nothing: a counter written by every core on a hot key
	// cost more than the rest of its decision.)
	evals, trips atomic.Int64
}

// Counts are what a Limiter has sent to Redis. The decisions it made
// without a round trip (the denial cache's) are the caller's count less
// Sent.
type Counts struct {
	// RoundTrips are the calls to Redis that decided: one a decision
	// sent alone, one a batch (WithBatching), and one more each time the
	// script had to be sent whole.
	RoundTrips int64
	// Sent is how many decisions went to Redis, alone or in batches.
	Sent int64
}

// Counts returns what l has sent to Redis so far.
func (l *Limiter) Counts() Counts {
	c := Counts{RoundTrips: l.trips.Load() + l.evals.Load(), Sent: l.trips.Load()}
	if l.batch != nil {
		c.RoundTrips += l.batch.batches.Load()
		c.Sent += l.batch.decisions.Load()
	}
	return c
}

var (
	_ limiters.AtLimiter  = (*Limiter)(nil)
	_ limiters.Peeker     = (*Limiter)(nil)
	_ limiters.Resetter   = (*Limiter)(nil)
	_ limiters.ResetAller = (*Limiter)(nil)
	_ limiters.Walker     = (*Limiter)(nil)
	_ limiters.AtSettler  = (*Limiter)(nil)
)

// New returns a Limiter enforcing s on every key, in Redis through c.
func New(c Client, s limiters.Spec, opts ...Option) (*Limiter, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("redislimit: %w", err)
	}
	r := limiters.Rate{N: s.Window.Limit, Per: s.Window.Length}
	if s.Algorithm.IsBucket() {
		r = limiters.Rate{N: s.Bucket.Capacity, Per: time.Duration(s.Bucket.Capacity) * s.Bucket.Interval()}
	}
	return newLimiter(c, s.Algorithm, []composite.Limit{{Name: s.String(), Rate: r}}, []limiters.Spec{s}, opts)
}

// NewComposite returns a Limiter enforcing every one of limits on each
// key, all or nothing, with algorithm a (see package composite for the
// semantics, which this shares): one script, one round trip a decision.
func NewComposite(c Client, a limiters.Algorithm, limits []composite.Limit, opts ...Option) (*Limiter, error) {
	if err := composite.Check(a, limits); err != nil {
		return nil, fmt.Errorf("redislimit: %w", err)
	}
	specs := make([]limiters.Spec, len(limits))
	for i, lim := range limits {
		specs[i], _ = lim.Rate.Spec(a) // checked above
	}
	return newLimiter(c, a, composite.Named(limits), specs, opts)
}

// newLimiter returns a Limiter of limits (named), whose specs are specs.
func newLimiter(c Client, a limiters.Algorithm, limits []composite.Limit, specs []limiters.Spec, opts []Option) (*Limiter, error) {
	if c == nil {
		return nil, fmt.Errorf("redislimit: %w: no Redis client", limiters.ErrInvalidParameter)
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return nil, fmt.Errorf("redislimit: %w: prefix %q has a brace, which would move the keys' hash tag", limiters.ErrInvalidParameter, o.Prefix)
	case o.Timeout < 0 || o.Grace < 0:
		return nil, fmt.Errorf("redislimit: %w: timeout and grace must not be negative", limiters.ErrInvalidParameter)
	case o.FailureMode != FailOpen && o.FailureMode != FailClosed && o.FailureMode != Fallback:
		return nil, fmt.Errorf("redislimit: %w: unknown failure mode %d", limiters.ErrInvalidParameter, o.FailureMode)
	case o.FailureMode == Fallback && (o.Fleet < 1 || len(specs) != 1):
		return nil, fmt.Errorf("redislimit: %w: falling back to memory takes one limit and a fleet of at least one process, not %d limits and %d", limiters.ErrInvalidParameter, len(specs), o.Fleet)
	case o.BreakerFailures < 0 || o.BreakerCool < 0:
		return nil, fmt.Errorf("redislimit: %w: a breaker of %d failures and a cool-down of %v: want neither negative", limiters.ErrInvalidParameter, o.BreakerFailures, o.BreakerCool)
	case o.Packing < 0 || o.Packing > MaxPacking:
		return nil, fmt.Errorf("redislimit: %w: packing into %d hashes: want 1 to %d, or 0 for none", limiters.ErrInvalidParameter, o.Packing, MaxPacking)
	case o.Packing > 0 && (a != limiters.GCRA || len(specs) != 1):
		return nil, fmt.Errorf("redislimit: %w: packing is for GCRA with one limit, not %s with %d", limiters.ErrInvalidParameter, a, len(specs))
	case o.Packing > 0 && o.Batching != nil:
		return nil, fmt.Errorf("redislimit: %w: packing and batching do not combine", limiters.ErrInvalidParameter)
	case o.Lease < 0 || o.Lease > MaxPeriod || o.LeaseMost < 0:
		return nil, fmt.Errorf("redislimit: %w: lease time %v and largest lease %d: want a time up to %v and a size not negative", limiters.ErrInvalidParameter, o.Lease, o.LeaseMost, MaxPeriod)
	case o.Lease > 0 && (a != limiters.GCRA && a != limiters.TokenBucket || len(specs) != 1):
		return nil, fmt.Errorf("redislimit: %w: leases are for GCRA and the token bucket with one limit, not %s with %d", limiters.ErrInvalidParameter, a, len(specs))
	case o.Lease > 0 && (o.Batching != nil || o.Packing > 0):
		return nil, fmt.Errorf("redislimit: %w: leases do not combine with batching or packing", limiters.ErrInvalidParameter)
	case o.Lease > 0 && o.LeaseMost > specs[0].Bucket.Capacity:
		return nil, fmt.Errorf("redislimit: %w: a lease of %d units is more than the capacity, %d, and would never be granted", limiters.ErrInvalidParameter, o.LeaseMost, specs[0].Bucket.Capacity)
	}
	if o.Prefix == "" {
		o.Prefix = "ratelab:"
	}
	if o.Timeout == 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.Grace == 0 {
		o.Grace = time.Second
	}
	if o.DenialCache == 0 {
		o.DenialCache = 4096
	}
	if o.BreakerCool == 0 {
		o.BreakerCool = time.Second
	}
	honours, pool := deadlines(c)
	l := &Limiter{c: c, script: scripts[a], settle: settles[a], limits: limits, o: o, guard: !honours, light: honours && pool > 0 && pool <= o.Timeout}
	if s, ok := single[a]; ok && len(specs) == 1 {
		l.script, l.interval = s[0], int64(specs[0].Bucket.Interval())
	}
	if o.Packing > 0 {
		l.script, l.packed = packed, uint64(o.Packing)
	}
	l.sha = l.script.sha
	for i, s := range specs {
		if err := fits(s); err != nil {
			if len(specs) > 1 {
				return nil, fmt.Errorf("redislimit: limit %d (%s): %w", i+1, limits[i].Name, err)
			}
			return nil, fmt.Errorf("redislimit: %w", err)
		}
		quota, period, sep := s.Window.Limit, s.Window.Length, "/"
		if a.IsBucket() {
			quota, period, sep = s.Bucket.Capacity, s.Bucket.Interval(), "@"
		}
		l.suffix = append(l.suffix, fmt.Sprintf(":%s:%d%s%d", a, quota, sep, period))
		l.quota = append(l.quota, quota)
		l.params = append(l.params, strconv.Itoa(quota), strconv.FormatInt(int64(period), 10))
	}
	if (a == limiters.GCRA || a == limiters.TokenBucket) && len(specs) == 1 {
		l.unit = int64(specs[0].Bucket.Interval())
	}
	if o.DenialCache > 0 {
		l.denials = newDenials(o.DenialCache)
	}
	if o.BreakerFailures > 0 {
		l.breaker = newBreaker(o.BreakerFailures, o.BreakerCool)
	}
	if o.FailureMode == Fallback {
		f, err := memory.New(share(specs[0], o.Fleet))
		if err != nil {
			return nil, fmt.Errorf("redislimit: the fallback: %w", err)
		}
		l.fallback = f
	}
	if o.Lease > 0 {
		most := o.LeaseMost
		if most == 0 {
			most = max(1, l.quota[0]/4)
		}
		l.leases = newLeases(leaseEntries, o.Lease, int64(most), l.quota[0], l.unit)
	}
	l.grace[0] = strconv.FormatInt(max(o.Grace.Milliseconds(), 1), 10)
	l.grace[1] = strconv.FormatInt(max(o.Grace, explicitGrace).Milliseconds(), 10)
	if o.Batching != nil {
		b, err := newBatcher(l, a, *o.Batching)
		if err != nil {
			return nil, fmt.Errorf("redislimit: %w: %w", limiters.ErrInvalidParameter, err)
		}
		l.batch = b
	}
	return l, nil
}

// Close stops a batching Limiter's goroutines, once every decision queued
// is answered, and a fallback's sweeper; decisions after Close fail (and
// follow the failure mode). Close does not close the client.
func (l *Limiter) Close() error {
	if l.batch != nil {
		l.batch.close()
	}
	if l.fallback != nil {
		l.fallback.Close()
	}
	return nil
}

// fits reports whether s is within what the scripts compute exactly.
func fits(s limiters.Spec) error {
	if s.Algorithm.IsBucket() {
		if p := time.Duration(s.Bucket.Capacity) * s.Bucket.Interval(); p > MaxPeriod {
			return fmt.Errorf("%w: %v takes %v to refill from empty; on Redis at most %v (2^52ns)", limiters.ErrInvalidParameter, s, p, MaxPeriod)
		}
		return nil
	}
	w := s.Window
	switch {
	case w.Length > MaxPeriod:
		return fmt.Errorf("%w: window %v is longer than the %v (2^52ns) a Redis limiter takes", limiters.ErrInvalidParameter, w.Length, MaxPeriod)
	case w.Length < MinWindow:
		return fmt.Errorf("%w: window %v is shorter than the %v a Redis limiter takes", limiters.ErrInvalidParameter, w.Length, MinWindow)
	case s.Algorithm == limiters.SlidingLog && w.Limit > MaxLogLimit:
		return fmt.Errorf("%w: a sliding log on Redis rewrites its log on every admitted request, so its limit must be at most %d, got %d", limiters.ErrInvalidParameter, MaxLogLimit, w.Limit)
	}
	return nil
}

// Limits returns the limits, named, in DecideAt's order (a copy). A
// limiter made by New has one, named as its Spec, its rate N per W for a
// window and a capacity N refilled over W for a bucket.
func (l *Limiter) Limits() []composite.Limit { return slices.Clone(l.limits) }

// LimitName returns the name of the i-th limit (0-based), as DecideAt's
// denied index counts them.
func (l *Limiter) LimitName(i int) string { return l.limits[i].Name }

// AllowN reports whether n events for key may happen now, by the server's
// clock, and consumes them if so. A non-nil error means Redis did not
// decide (the Decision follows the failure mode) or n < 1.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	d, _, err := l.consume(ctx, key, time.Time{}, n)
	return d, err
}

// AllowAt reports whether n events for key may happen at time t, and
// consumes them if so. When Redis does not decide, the Decision follows
// the failure mode; DecideAt also returns the error.
func (l *Limiter) AllowAt(key string, t time.Time, n int) limiters.Decision {
	d, _, _ := l.consume(context.Background(), key, t, n)
	return d
}

// DecideAt is AllowAt with a context and the error, and it tells which
// limit denied (0-based; -1 when admitted or when Redis did not decide).
// A zero t means the server's clock.
func (l *Limiter) DecideAt(ctx context.Context, key string, t time.Time, n int) (limiters.Decision, int, error) {
	return l.consume(ctx, key, t, n)
}

// consume decides a request of cost n for key at t, from a lease if the
// Limiter takes them.
func (l *Limiter) consume(ctx context.Context, key string, t time.Time, n int) (d limiters.Decision, by int, err error) {
	if l.leases != nil && n >= 1 && (t.IsZero() || !t.Before(minTime) && !t.After(maxTime)) {
		d, by, err = l.lease(ctx, key, t, n)
	} else {
		d, by, err = l.decide(ctx, key, t, consume, n, nil)
	}
	if l.fallsBack(n, err) {
		d, by = l.fallBack(ctx, key, t, n)
	}
	return d, by, err
}

// fallsBack reports whether a decision of cost n that ended in err is
// the fallback's to make: Redis did not decide, and there is one.
func (l *Limiter) fallsBack(n int, err error) bool {
	return err != nil && l.fallback != nil && n >= 1 && errors.Is(err, ErrUnavailable)
}

// fallBack decides with the fallback limiter, while Redis does not.
func (l *Limiter) fallBack(ctx context.Context, key string, t time.Time, n int) (limiters.Decision, int) {
	var d limiters.Decision
	if t.IsZero() {
		d, _ = l.fallback.AllowN(ctx, key, n)
	} else {
		d = l.fallback.AllowAt(key, t, n)
	}
	return d, by(d)
}

// share is s for one process of a fleet of n: its limit or capacity
// divided by n, rounded up, and a bucket's rate divided by n.
func share(s limiters.Spec, n int) limiters.Spec {
	if s.Algorithm.IsBucket() {
		s.Bucket.Capacity = (s.Bucket.Capacity + n - 1) / n
		s.Bucket.Rate /= float64(n)
	} else {
		s.Window.Limit = (s.Window.Limit + n - 1) / n
	}
	return s
}

// DecideEach is DecideAt that also says what each limit decided, in the
// same round trip: when per has room for one Decision a limit, it fills
// per[i] with limit i's own, as the in-memory composite.Limiter's
// DecideAt does: Allowed if that limit alone would admit the request, and
// its state after the decision (charged only if every limit admitted).
// When Redis did not decide, per is left as it was.
func (l *Limiter) DecideEach(ctx context.Context, key string, t time.Time, n int, per []limiters.Decision) (limiters.Decision, int, error) {
	if len(per) < len(l.limits) {
		per = nil
	}
	d, by, err := l.decide(ctx, key, t, consume, n, per)
	if l.fallsBack(n, err) {
		d, by = l.fallBack(ctx, key, t, n)
		if per != nil {
			per[0] = d
		}
	}
	return d, by, err
}

// Peek reports key's state now, by the server's clock, without consuming
// anything.
func (l *Limiter) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	d, _, err := l.decide(ctx, key, time.Time{}, peek, 1, nil)
	return d, err
}

// PeekAt reports key's state at time t without consuming anything.
func (l *Limiter) PeekAt(key string, t time.Time) limiters.Decision {
	d, _, _ := l.decide(context.Background(), key, t, peek, 1, nil)
	return d
}

// PeekAtN reports what AllowAt(key, t, n) would decide, without consuming
// anything.
func (l *Limiter) PeekAtN(key string, t time.Time, n int) limiters.Decision {
	d, _, _ := l.decide(context.Background(), key, t, peek, n, nil)
	return d
}

// The modes of a script: decide and consume, or peek. (Boxed once: a
// string converted to an interface at each call is an allocation.)
var consume, peek any = "a", "p"

// decide runs the script for key at t (zero: the server's clock) in mode
// consume or peek.
func (l *Limiter) decide(ctx context.Context, key string, t time.Time, mode any, n int, per []limiters.Decision) (limiters.Decision, int, error) {
	if n < 1 {
		d, _, err := l.decide(ctx, key, t, peek, 1, nil)
		d.Allowed, d.RetryAfter = false, limiters.Never
		if err == nil {
			err = fmt.Errorf("redislimit: %w, got %d", limiters.ErrInvalidCost, n)
		}
		return d, -1, err
	}
	explicit := !t.IsZero()
	if explicit && (t.Before(minTime) || t.After(maxTime)) {
		return l.failed(fmt.Errorf("time %v is outside what the Redis backend keeps (1970 to 2106)", t))
	}
	var h, gen uint64
	var now, clock int64
	cache := l.denials != nil && mode == consume && n == 1 && per == nil
	if l.denials != nil && mode == consume {
		h = l.denials.hash(key)
	}
	if cache {
		var d limiters.Decision
		now, clock = l.denials.now(t)
		if by, ok := l.denials.denied(&d, h, now, clock); ok {
			return d, by, nil
		}
		gen = l.denials.gen(h)
	}
	var probe bool
	if l.breaker != nil {
		ok, p := l.breaker.enter()
		if !ok {
			return l.failed(ErrBreakerOpen)
		}
		probe = p
	}
	// One slice holds the whole command: EVALSHA sha numkeys keys... argv...
	// Unless a call may outlive the decision (guard, or a batched call
	// given up on), the slice and the context come from a pool.
	c := calls.Get().(*call)
	k := len(l.suffix)
	args := c.args[:3+k+5]
	args[0], args[1], args[2] = "evalsha", l.sha, k
	for i, s := range l.suffix {
		c.keys[i].b = l.appendKey(c.keys[i].b[:0], key, s)
		args[3+i] = &c.keys[i]
	}
	argv := args[3+k:]
	argv[0], argv[1] = mode, n
	if explicit {
		ns := t.UnixNano()
		argv[2], argv[3], argv[4] = ns/1e9, ns%1e9, l.grace[1]
	} else {
		argv[2], argv[3], argv[4] = "", "", l.grace[0]
	}
	args = append(args, l.params...)
	if l.packed > 0 { // the field: the key, as bytes from the call's buffer
		c.field.b = append(c.field.b[:0], key...)
		args = append(args, &c.field)
	}

	var v any
	var err error
	reuse := !l.guard
	switch {
	case l.batch == nil:
		v, err = l.single(ctx, c, args)
	case ctx.Err() != nil: // the caller is gone: nothing to queue
		err = ctx.Err()
	default:
		var queued bool
		if queued, err = l.batch.enqueue(c.batched(args, l.o.Timeout)); queued {
			v, err, reuse = c.wait(ctx, l.guard, l.o.Timeout)
		} else if err == nil { // the queue is full: decide alone
			v, err = l.single(ctx, c, args)
		}
	}
	if reuse {
		clear(args)
		c.cmd = nil
		calls.Put(c)
	}
	if err != nil {
		if l.breaker != nil {
			end := failed
			if ctx.Err() != nil {
				end = withdrew
			}
			l.breaker.leave(probe, end)
		}
		return l.failed(err)
	}
	d, by, err := l.reply(v, n, per)
	if l.breaker != nil {
		end := decided
		if err != nil {
			end = failed
		}
		l.breaker.leave(probe, end)
	}
	switch {
	case err != nil || l.denials == nil || mode != consume:
	case d.Allowed:
		// On a clock that runs forward an admission comes after any
		// denial's retry-after, but explicit times may step back.
		g := l.denials.drop(h)
		if cache && d.Remaining == 0 && l.unit > 0 && g == gen+1 {
			// The key is empty: the next unit fits once its debt is down
			// to C-1 units, and until then Redis would deny every unit
			// request, as if it had denied one now.
			if wait := int64(d.ResetAfter) - int64(l.quota[0]-1)*l.unit; wait > 0 {
				l.denials.put(h, now, clock, limiters.Decision{Limit: d.Limit, RetryAfter: time.Duration(wait), ResetAfter: d.ResetAfter}, 0, g)
			}
		}
	case cache && by >= 0 && d.Limit == l.quota[by]:
		// Of several limits, the Decision names the one with the least
		// room, the smaller of equals: while denied that stays the
		// limit that denied only if it is already the one named.
		l.denials.put(h, now, clock, d, by, gen)
	}
	return d, by, err
}

// appendKey appends the Redis key that holds key's state under the limit
// whose key suffix is suffix: Prefix{tag}suffix, the tag the key escaped
// or, packed, "%b" and the number of the hash its field is in.
func (l *Limiter) appendKey(b []byte, key, suffix string) []byte {
	b = append(append(b, l.o.Prefix...), '{')
	if l.packed > 0 {
		b = strconv.AppendUint(append(b, "%b"...), hashOf(key, l.packed), 10)
	} else {
		b = append(b, escape(key)...)
	}
	return append(append(b, '}'), suffix...)
}

// single runs args on its own, bounded by the timeout.
func (l *Limiter) single(ctx context.Context, c *call, args []any) (v any, err error) {
	l.trips.Add(1)
	if l.light {
		c.ctx = deadlineCtx{ctx, time.Now().Add(l.o.Timeout)}
		v, err = l.run(&c.ctx, c, args)
		c.ctx = deadlineCtx{}
	} else {
		ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		v, err = l.run(ctx, c, args)
		cancel()
	}
	return v, err
}

// call is what one decision's command needs: its arguments (EVALSHA, the
// SHA, the key count, at most MaxLimits keys, five ARGV and two a limit)
// and its context; batched, its deadline and the way its answer comes
// back.
type call struct {
	args  [3 + 3*composite.MaxLimits + 5]any
	keys  [composite.MaxLimits]keyArg
	field keyArg // the key, packed (WithPacking)
	ctx   deadlineCtx
	cmd1  redis.Cmd // the command, alone

	cmd      []any     // the command, in args
	deadline time.Time // when the caller stops waiting
	v        any       // the answer: the script's reply,
	err      error     // or why there is none
	done     chan struct{}
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// keyArg is a key built in a call's own buffer, which go-redis writes as
// bytes (keyArg is an encoding.BinaryMarshaler): a string would cost an
// allocation, and its boxing another.
type keyArg struct{ b []byte }

func (k *keyArg) MarshalBinary() ([]byte, error) { return k.b, nil }

// String is the key, for Cluster and Ring, which hash it.
func (k *keyArg) String() string { return string(k.b) }

// batched readies c to be queued with command cmd.
func (c *call) batched(cmd []any, timeout time.Duration) *call {
	c.cmd, c.deadline = cmd, time.Now().Add(timeout)
	return c
}

// answer gives c its answer (on the sender's goroutine).
func (c *call) answer(v any, err error) {
	c.v, c.err = v, err
	c.done <- struct{}{}
}

// wait waits for c's answer, or for ctx to end. Where the client honours
// deadlines, the sender answers every call by its deadline, and no timer
// is needed; where it does not (guard), the wait has a timer of its own.
// reuse is false when the wait gave up: the sender still holds c.
func (c *call) wait(ctx context.Context, guard bool, timeout time.Duration) (v any, err error, reuse bool) {
	var expired <-chan time.Time
	if guard {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-c.done:
		v, err = c.v, c.err
		c.v, c.err = nil, nil
		return v, err, true
	case <-ctx.Done():
		return nil, ctx.Err(), false
	case <-expired:
		return nil, context.DeadlineExceeded, false
	}
}

// deadlines reports whether c gives up when a context's deadline passes,
// and how long its pool waits for a free connection. A go-redis client
// honours deadlines only with ContextTimeoutEnabled; without it a call
// waits for the client's own dial, read and write timeouts (seconds, by
// default) whatever the context says.
func deadlines(c Client) (honours bool, pool time.Duration) {
	switch c := c.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	case interface{ Options() *redis.ClusterOptions }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	case interface{ Options() *redis.RingOptions }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	}
	return false, 0
}

// deadlineCtx is a context with a deadline and no timer: enough for a
// client that sets its connections' deadlines from the context's and
// whose pool waits no longer than the deadline (see Limiter.light). It
// costs one allocation where context.WithTimeout costs four.
type deadlineCtx struct {
	context.Context
	d time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.d) {
		return d, true
	}
	return c.d, true
}

// run runs the limiter's script by SHA, and whole if the server does not
// have it; with a client that ignores deadlines, through guarded.
func (l *Limiter) run(ctx context.Context, c *call, args []any) (any, error) {
	if !l.guard {
		return l.eval(ctx, c, args)
	}
	return l.guarded(ctx, c, args)
}

// guarded runs eval on a goroutine of its own and stops waiting at ctx's
// deadline (see bounded). The results come back on a channel, never
// through variables the goroutine might still write after the deadline.
func (l *Limiter) guarded(ctx context.Context, c *call, args []any) (any, error) {
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := l.eval(ctx, c, args)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// eval runs args (EVALSHA sha ...), and again as EVAL with the script's
// source if the server does not have the script.
func (l *Limiter) eval(ctx context.Context, c *call, args []any) (any, error) {
	c.cmd1 = *redis.NewCmd(ctx, args...) // in the call: no allocation
	cmd := &c.cmd1
	cmd.SetFirstKeyPos(3)
	err := l.c.Process(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		l.evals.Add(1)
		again := append([]any{"eval", l.script.src}, args[2:]...)
		cmd = redis.NewCmd(ctx, again...)
		cmd.SetFirstKeyPos(3)
		err = l.c.Process(ctx, cmd)
	}
	v := cmd.Val()
	c.cmd1 = redis.Cmd{}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// reply reads the script's reply to a decision of cost n: six integers
// in a string, allowed, denied, limit, remaining, retry after and reset
// after, then, for more than one limit, four a limit: admits, remaining,
// retry after, reset after. It fills per (nil, or room for every limit)
// with the limits'. GCRA's one-limit scripts reply with the debt alone
// (see debt).
func (l *Limiter) reply(v any, n int, per []limiters.Decision) (limiters.Decision, int, error) {
	if l.interval > 0 {
		d, denied, err := l.debt(v, n)
		if per != nil {
			per[0] = d
		}
		return d, denied, err
	}
	return l.integers(v, per)
}

// integers reads a reply of six integers, and four more a limit for more
// than one limit (see reply): every script's but GCRA's one-limit ones.
func (l *Limiter) integers(v any, per []limiters.Decision) (limiters.Decision, int, error) {
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
	if !ok || !sane(x[0], x[2:6]) || x[1] < 0 || x[1] > int64(k) {
		return l.failed(fmt.Errorf("the script replied %T %.120q, want %d integers", v, v, want))
	}
	d := decision(x[0], int(x[2]), x[2:6])
	if k == 1 {
		if per != nil {
			per[0] = d
		}
		return d, int(x[1]) - 1, nil
	}
	for i := range k { // checked whether or not per wants them
		e := x[6+4*i : 10+4*i]
		if !sane(e[0], e) {
			// (The numbers one by one: the slice would move x to the heap.)
			return l.failed(fmt.Errorf("the script replied %T %.120q: limit %d's decision %d %d %d %d is out of range", v, v, i+1, e[0], e[1], e[2], e[3]))
		}
		if per != nil {
			per[i] = decision(e[0], l.quota[i], e)
		}
	}
	return d, int(x[1]) - 1, nil
}

// debt reads the reply of GCRA with one limit (gcra1.lua, gcrapacked.lua):
// the debt, how far the theoretical arrival time is ahead of now after
// the decision, in ns, as an integer (alone) or a decimal string (in a
// batch); -debt-1 when the decision denies. The rest follows from the
// limit C and the emission interval T, as in the in-memory GCRA: CT - debt
// is the room left, and a denied n fits once the debt has fallen to
// CT - nT.
func (l *Limiter) debt(v any, n int) (limiters.Decision, int, error) {
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
	d := limiters.Decision{Allowed: allowed, Limit: int(c), ResetAfter: time.Duration(debt)}
	if debt < ct {
		d.Remaining = int((ct - debt) / t)
	}
	if !allowed {
		d.RetryAfter = limiters.Never
		if int64(n) <= c {
			d.RetryAfter = time.Duration(debt + int64(n)*t - ct)
			ok = ok && d.RetryAfter > 0 // it denies: n does not fit yet
		}
	}
	if !ok || allowed && debt > ct {
		return l.failed(fmt.Errorf("the script replied %T %.120q, want a debt of at most %d ns", v, v, ct))
	}
	if allowed {
		return d, -1, nil
	}
	return d, 0, nil
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

// failed returns the decision of the failure mode, and err wrapped.
func (l *Limiter) failed(err error) (limiters.Decision, int, error) {
	limit := l.quota[0]
	for _, q := range l.quota[1:] {
		limit = min(limit, q)
	}
	d := limiters.Decision{Allowed: true, Limit: limit}
	if l.o.FailureMode != FailOpen { // Fallback: closed, unless consume falls back
		d.Allowed, d.RetryAfter = false, l.o.Timeout
	}
	return d, -1, fmt.Errorf("%w (%v): %w", ErrUnavailable, l.o.FailureMode, err)
}

// Reset forgets key: its next request sees a full quota.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	keys := make([]string, len(l.suffix))
	for i, s := range l.suffix {
		keys[i] = string(l.appendKey(nil, key, s))
	}
	del := func(ctx context.Context) error { return l.c.Del(ctx, keys...).Err() }
	if l.packed > 0 { // the key's field, not the hash the others share
		del = func(ctx context.Context) error { return l.c.HDel(ctx, keys[0], key).Err() }
	}
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	run := func() error { return bounded(ctx, l.guard, del) }
	var err error
	if l.denials != nil {
		err = l.denials.reset(l.denials.hash(key), run)
	} else {
		err = run()
	}
	if l.leases != nil {
		l.leases.forget(key)
	}
	if err != nil {
		return fmt.Errorf("%w: Reset: %w", ErrUnavailable, err)
	}
	return nil
}

// ResetAll forgets every key this limiter holds (the keys with its prefix,
// algorithm and limits), on every server of a cluster.
func (l *Limiter) ResetAll(ctx context.Context) error {
	if l.leases != nil {
		defer l.leases.clear()
	}
	if l.denials != nil {
		return l.denials.resetAll(func() error { return l.resetAll(ctx) })
	}
	return l.resetAll(ctx)
}

func (l *Limiter) resetAll(ctx context.Context) error {
	return l.scan(ctx, func(ctx context.Context, c scanner, keys []string) error {
		ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		defer cancel()
		// One DEL a key, pipelined: a server of a Cluster holds many
		// slots, and one DEL of keys in several is refused (CROSSSLOT).
		del := func(ctx context.Context) error {
			p := c.Pipeline()
			for _, k := range keys {
				p.Del(ctx, k)
			}
			_, err := p.Exec(ctx)
			return err
		}
		if err := bounded(ctx, l.guard, del); err != nil {
			return fmt.Errorf("%w: ResetAll: %w", ErrUnavailable, err)
		}
		return nil
	})
}

// Walk calls fn with each key the limiter holds and its state now, by the
// server's clock, until fn returns false. Keys are found with SCAN, so a
// key may be reported twice while keys are added, or not at all once its
// quota is full again and it expired.
func (l *Limiter) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	return l.walk(ctx, time.Time{}, fn)
}

// WalkAt is Walk with every key's state at time t.
func (l *Limiter) WalkAt(t time.Time, fn func(key string, d limiters.Decision) bool) {
	_ = l.walk(context.Background(), t, fn)
}

var errStop = errors.New("stop")

func (l *Limiter) walk(ctx context.Context, t time.Time, fn func(key string, d limiters.Decision) bool) error {
	seen := map[string]bool{}
	err := l.scan(ctx, func(ctx context.Context, c scanner, keys []string) error {
		if l.packed > 0 {
			var err error
			if keys, err = l.fields(ctx, c, keys); err != nil {
				return err
			}
		}
		for _, k := range keys {
			key, ok := k, true
			if l.packed == 0 {
				key, ok = l.userKey(k)
			}
			if !ok || seen[key] {
				continue
			}
			seen[key] = true
			d, _, err := l.decide(ctx, key, t, peek, 1, nil)
			if err != nil {
				return err
			}
			if !fn(key, d) {
				return errStop
			}
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// fields returns the callers' keys packed in hashes, the limiter's.
func (l *Limiter) fields(ctx context.Context, c scanner, hashes []string) ([]string, error) {
	var keys []string
	for _, h := range hashes {
		if !strings.HasPrefix(h, l.o.Prefix+"{%b") {
			continue
		}
		var fields []string
		cctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		err := bounded(cctx, l.guard, func(ctx context.Context) (err error) {
			fields, err = c.HKeys(ctx, h).Result()
			return err
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: HKEYS: %w", ErrUnavailable, err)
		}
		keys = append(keys, fields...)
	}
	return keys, nil
}

// hashOf picks the hash of n that key is packed in: FNV-1a, the same in
// every process of a fleet.
func hashOf(key string, n uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h % n
}

// userKey returns the caller's key of one of the limiter's Redis keys.
func (l *Limiter) userKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, l.o.Prefix+"{")
	if !ok {
		return "", false
	}
	for _, s := range l.suffix {
		if key, ok := strings.CutSuffix(rest, "}"+s); ok {
			return unescape(key)
		}
	}
	return "", false
}

// The caller's key is the hash tag, between braces, so it must hold no
// brace and must not be empty (Redis Cluster hashes all of "x{}y"): escape
// writes {, } and % as %7B, %7D and %25, and the empty key as %.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func escape(key string) string {
	switch {
	case key == "":
		return "%"
	case !strings.ContainsAny(key, "{}%"):
		return key
	}
	return escaper.Replace(key)
}

var unescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

func unescape(tag string) (string, bool) {
	switch {
	case tag == "%":
		return "", true
	case strings.ContainsAny(tag, "{}"):
		return "", false
	}
	return unescaper.Replace(tag), true
}

// scanner is what scan needs of a client, or of one server of a cluster.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	HKeys(ctx context.Context, key string) *redis.StringSliceCmd
	Pipeline() redis.Pipeliner
}

// scan calls fn with each batch of the limiter's keys, from every master
// of a cluster.
func (l *Limiter) scan(ctx context.Context, fn func(context.Context, scanner, []string) error) error {
	one := func(ctx context.Context, c scanner) error {
		for _, s := range l.suffix {
			match := glob(l.o.Prefix) + "{*}" + glob(s)
			var cursor uint64
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				var keys []string
				var next uint64
				cctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
				err := bounded(cctx, l.guard, func(ctx context.Context) (err error) {
					keys, next, err = c.Scan(ctx, cursor, match, 512).Result()
					return err
				})
				cancel()
				if err != nil {
					return fmt.Errorf("%w: SCAN: %w", ErrUnavailable, err)
				}
				if len(keys) > 0 {
					if err := fn(ctx, c, keys); err != nil {
						return err
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	}
	if cc, ok := l.c.(interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return one(ctx, c) })
	}
	return one(ctx, l.c)
}

// bounded runs f. When guard is set (the client does not honour context
// deadlines) f runs on a goroutine of its own and bounded stops waiting
// for it when ctx is done; the goroutine ends when the client's own
// timeouts end the call. (Configure the client with ContextTimeoutEnabled
// to save the goroutine: about a microsecond a decision.)
func bounded(ctx context.Context, guard bool, f func(context.Context) error) error {
	if !guard {
		return f(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// glob escapes s for a SCAN MATCH pattern.
func glob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Reserve decides n events for key now, as AllowN does, and returns the
// reservation to settle (limiters.Settler). Now is the process's clock,
// passed to Redis as an explicit time, so that the settle knows exactly
// when the reservation was decided: keep the fleet's clocks in step, as
// for any explicit time. A reservation Redis did not make (the decision
// followed the failure mode; the error says why) has a Cost of zero:
// there is nothing to settle. Settling is not for limiters that lease
// (WithLeases) or pack their keys (WithPacking): Reserve says so.
func (l *Limiter) Reserve(ctx context.Context, key string, n int) (limiters.Reservation, error) {
	return l.reserve(ctx, key, time.Now(), n)
}

// ReserveAt is Reserve at time t.
func (l *Limiter) ReserveAt(key string, t time.Time, n int) limiters.Reservation {
	r, _ := l.reserve(context.Background(), key, t, n)
	return r
}

func (l *Limiter) reserve(ctx context.Context, key string, t time.Time, n int) (limiters.Reservation, error) {
	r := limiters.Reservation{Key: key, At: t, Cost: n}
	if err := l.settles(); err != nil {
		r.Cost, r.RetryAfter = 0, limiters.Never
		return r, err
	}
	var per []limiters.Decision
	if len(l.suffix) > 1 {
		per = make([]limiters.Decision, len(l.suffix))
	}
	var err error
	r.Decision, _, err = l.decide(ctx, key, t, consume, n, per)
	switch {
	case err != nil:
		r.Cost = 0
	case per != nil:
		r.Per = per
	}
	return r, err
}

// settles reports why l cannot settle, if it cannot.
func (l *Limiter) settles() error {
	switch {
	case l.leases != nil:
		return fmt.Errorf("redislimit: %w: a leasing limiter (WithLeases) admits from units leased ahead, and has nothing exact to settle", limiters.ErrInvalidParameter)
	case l.packed > 0:
		return fmt.Errorf("redislimit: %w: settling keys packed in hashes (WithPacking) is not supported", limiters.ErrInvalidParameter)
	}
	return nil
}

// Settle settles r at its actual cost now, in one round trip, under every
// limit, each as the algorithm's package says (limiters.Settler), and
// returns the key's state after. Now is the process's clock, as for
// Reserve. It is not retried: an error (ErrUnavailable) means the settle
// may or may not have been made.
func (l *Limiter) Settle(ctx context.Context, r limiters.Reservation, actual int) (limiters.Decision, error) {
	return l.settleAt(ctx, r, time.Now(), actual)
}

// SettleAt is Settle at time t.
func (l *Limiter) SettleAt(r limiters.Reservation, t time.Time, actual int) (limiters.Decision, error) {
	return l.settleAt(context.Background(), r, t, actual)
}

func (l *Limiter) settleAt(ctx context.Context, r limiters.Reservation, t time.Time, actual int) (limiters.Decision, error) {
	refund, charge, err := limiters.Settlement(r, actual)
	if err == nil {
		err = l.settles()
	}
	k := len(l.suffix)
	switch {
	case err != nil:
	case k > 1 && len(r.Per) != k:
		err = fmt.Errorf("redislimit: %w: a reservation of %d limits, for %d", limiters.ErrInvalidParameter, len(r.Per), k)
	case r.At.Before(minTime) || r.At.After(maxTime) || t.Before(minTime) || t.After(maxTime):
		err = fmt.Errorf("redislimit: %w: times %v and %v: want 1970 to 2106", limiters.ErrInvalidParameter, r.At, t)
	}
	if err != nil {
		return limiters.Decision{}, err
	}
	args := make([]any, 0, 3+k+7+3*k)
	args = append(args, "evalsha", l.settle.sha, k)
	for _, s := range l.suffix {
		args = append(args, string(l.appendKey(nil, r.Key, s)))
	}
	ns, at := t.UnixNano(), r.At.UnixNano()
	args = append(args, refund, charge, ns/1e9, ns%1e9, l.grace[1], at/1e9, at%1e9)
	args = append(args, l.params...)
	for i := range k {
		reset := r.ResetAfter
		if k > 1 {
			reset = r.Per[i].ResetAfter
		}
		args = append(args, int64(reset))
	}
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	l.trips.Add(1)
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	send := func() error {
		err := l.c.Process(ctx, cmd)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			l.evals.Add(1)
			cmd = redis.NewCmd(ctx, append([]any{"eval", l.settle.src}, args[2:]...)...)
			cmd.SetFirstKeyPos(3)
			err = l.c.Process(ctx, cmd)
		}
		return err
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
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("%w: a settle: %w", ErrUnavailable, err)
	}
	d, _, err := l.integers(cmd.Val(), nil)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("redislimit: a settle: %w", err)
	}
	return d, nil
}
