package redislimit

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// FailureMode is what a decision does when Redis does not answer.
type FailureMode int

const (
	// FailOpen admits the request: an outage of Redis is not an outage of
	// the API. The Decision has Allowed true, Remaining 0.
	FailOpen FailureMode = iota
	// FailClosed denies the request, with RetryAfter the timeout: nothing
	// passes unmetered.
	FailClosed
	// Fallback decides the request with an in-memory limiter of the same
	// algorithm at each limit's share of the fleet (WithFallback).
	Fallback
)

// String names m as the package doc does: "fail open", "fail closed",
// "fall back to memory".
func (m FailureMode) String() string {
	switch m {
	case FailClosed:
		return "fail closed"
	case Fallback:
		return "fall back to memory"
	}
	return "fail open"
}

// Options configure a Limiter. The zero value is the default.
type Options struct {
	// Prefix starts every key; empty means "ratelab:". It must not contain
	// braces, which would move the hash tag.
	Prefix string
	// Timeout bounds every call to Redis; zero means 250ms.
	Timeout time.Duration
	// FailureMode is what a decision does when Redis does not answer;
	// zero means FailOpen.
	FailureMode FailureMode
	// Fleet is the number of processes sharing the limits, for the
	// Fallback failure mode: each falls back to its share. Zero otherwise.
	Fleet int
	// OnError, when set, is called with the error of every call Redis did
	// not answer, whatever the failure mode made of it; nil means none.
	// It runs on the caller's goroutine: keep it short.
	OnError func(error)
	// Grace is how long a key outlives the moment its quota is full
	// again; zero means one second. A decision at an explicit time keeps
	// its keys at least ten minutes past that moment, counted on the
	// server's clock, so a replay slower than its trace finds its state.
	Grace time.Duration
	// Batching, when set, gathers concurrent decisions into batches; nil
	// means each decision is sent alone.
	Batching *Batching
	// Packing, when positive, keeps the keys of a single GCRA limit in
	// that many Redis hashes, a field a key (see WithPacking); zero means
	// a Redis key each.
	Packing int
	// DenialCache is how many of Redis's denials the Limiter remembers in
	// the process (see WithDenialCache); zero means 4096, negative none.
	DenialCache int
	// Lease, when positive, is the lease time τ of the approximate lease
	// mode (see WithLeases); zero means exact decisions.
	Lease time.Duration
	// LeaseMost is the most units one lease takes; zero means a quarter
	// of the capacity, at least one.
	LeaseMost int
	// BreakerFailures, when positive, turns the circuit breaker on (see
	// WithBreaker); zero means no breaker. BreakerCool is how long it
	// stays open; zero means one second.
	BreakerFailures int
	BreakerCool     time.Duration
	// AckReplicas, when positive, is how many replicas must acknowledge
	// each decision's writes within AckTimeout (see WithReplicaAck); zero
	// means none are waited for.
	AckReplicas int
	AckTimeout  time.Duration
}

// An Option sets one of the Options.
type Option func(*Options)

// WithPrefix sets the key prefix (see Options.Prefix).
func WithPrefix(p string) Option { return func(o *Options) { o.Prefix = p } }

// WithTimeout sets the bound on every call to Redis (see Options.Timeout).
func WithTimeout(d time.Duration) Option { return func(o *Options) { o.Timeout = d } }

// WithFailureMode sets what a decision does when Redis does not answer:
// FailOpen or FailClosed (for Fallback, see WithFallback).
func WithFailureMode(m FailureMode) Option { return func(o *Options) { o.FailureMode = m } }

// WithGrace sets how long keys outlive full quota (see Options.Grace).
func WithGrace(d time.Duration) Option { return func(o *Options) { o.Grace = d } }

// WithErrorHook sets a function called with the error of every call Redis
// did not answer (see Options.OnError): where the failure mode or the
// fallback hides the error from the caller, the hook still hears of it.
func WithErrorHook(f func(error)) Option { return func(o *Options) { o.OnError = f } }

// WithFallback sets the Fallback failure mode, for a fleet of fleet
// processes: while Redis does not answer, each process decides with an
// in-memory limiter of the same algorithm at each limit's share, N and
// the burst divided by fleet and rounded up, so the rate is divided too.
// Such a decision is a real one: it comes with a nil error and a Policy
// that names the shares (the error goes to the error hook).
func WithFallback(fleet int) Option {
	return func(o *Options) { o.FailureMode, o.Fleet = Fallback, fleet }
}

// WithBreaker turns on the circuit breaker: after failures calls in a row
// that Redis did not answer (down, slow past the timeout, or an answer not
// understood), the Limiter stops asking: for cool (zero: one second)
// every call fails at once, its error wrapping ErrBreakerOpen and
// ErrUnavailable (a decision follows the failure mode), then one call
// goes to Redis as a probe while the others still fail fast; the probe's
// answer closes the breaker, its failure opens it for cool again. A call
// the caller gave up on counts neither way. So an outage costs the
// timeout failures times, then nothing, instead of the timeout on every
// request.
func WithBreaker(failures int, cool time.Duration) Option {
	return func(o *Options) { o.BreakerFailures, o.BreakerCool = failures, cool }
}

// WithDenialCache sets how many of Redis's denials of unit requests the
// Limiter remembers (about 64 bytes each; zero means 4096, negative none).
// While a key is denied, its unit requests are denied again in the
// process, with no round trip, until the retry-after Redis gave. It is
// exact, since only consumption happens elsewhere: nothing can give the
// key room before that time but a reset or a settle, and Reset, ResetAll
// and Settle through this Limiter clear the key; a Reset made by another
// process is not seen here, and this process may deny the key for up to
// the retry-after it cached (at most a window, or a bucket's refill).
// Requests of a cost above 1 and peeks always go to Redis; under several
// limits, a denial is cached only when one limit denies.
//
// Exact means at the server's clock, and at explicit times that do not go
// back: a denial cached at time t answers a request at an earlier time
// than an admission Redis made of the key at a later one as the key stood
// at t, where Redis decides a window's or a bucket's request at the later
// time it has seen, and may admit it.
//
// For GCRA and the token bucket with one limit, an admission that leaves
// the key empty (Remaining 0) is cached too, as the denial of the next
// unit until the time it fits: a key asked past its limit costs a round
// trip an admission, not two.
func WithDenialCache(entries int) Option { return func(o *Options) { o.DenialCache = entries } }

// WithLeases turns on the approximate lease mode, for GCRA and the token
// bucket with one limit: a process takes up to most units of a key's
// quota from Redis in one round trip (a lease; zero most means a quarter
// of the capacity) and admits the key's requests from them itself, for at
// most the lease time tau; units it has not spent by then are dropped.
//
// The error is bounded: in any interval of length D, the fleet admits at
// most C + (D+tau)·R requests of a key, where the exact limiter admits at
// most C + D·R (C the capacity, R the rate). A process denies more than
// the exact limiter would while units sit leased and unspent in another
// process. A quiet key takes leases of one unit (exact, one round trip a
// request). Reset and ResetAll through this Limiter drop its leases.
// Peeks and reservations (Reserve) are decided by Redis exactly, and do
// not see the units processes hold.
func WithLeases(tau time.Duration, most int) Option {
	return func(o *Options) { o.Lease, o.LeaseMost = tau, most }
}

// WithPacking keeps the keys of a single GCRA limit in hashes Redis
// hashes, each caller's key a field of the hash its hash (FNV-1a) picks,
// named Prefix{%bI}:gcra:C@T for hash I: a field costs Redis its name, its
// value and a few bytes, where a key of its own costs about 100 bytes.
// Aim for 16 to 64 keys a hash. Decisions and settles are the same as
// without packing; a decision costs the server a little more work. A
// hash expires when its last field's quota is full again plus the grace;
// a new key deletes the stale fields among two drawn at random.
func WithPacking(hashes int) Option { return func(o *Options) { o.Packing = hashes } }

// MaxPacking is the most hashes WithPacking takes.
const MaxPacking = 1 << 24

// defaults returns o with every zero value that stands for a default
// replaced by it, and checks what each option takes alone (the
// combinations are features' to check).
func (o Options) defaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("redislimit: %w: %s", limiters.ErrInvalidParameter, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return bad("prefix %q has a brace, which would move the keys' hash tag", o.Prefix)
	case o.Timeout < 0 || o.Grace < 0:
		return bad("timeout %v and grace %v: want neither negative", o.Timeout, o.Grace)
	case o.FailureMode != FailOpen && o.FailureMode != FailClosed && o.FailureMode != Fallback:
		return bad("unknown failure mode %d", o.FailureMode)
	case o.FailureMode == Fallback && o.Fleet < 1:
		return bad("falling back to memory takes a fleet of at least one process, not %d", o.Fleet)
	case o.BreakerFailures < 0 || o.BreakerCool < 0:
		return bad("a breaker of %d failures and a cool-down of %v: want neither negative", o.BreakerFailures, o.BreakerCool)
	case o.Packing < 0 || o.Packing > MaxPacking:
		return bad("packing into %d hashes: want 1 to %d, or 0 for none", o.Packing, MaxPacking)
	case o.Lease < 0 || o.Lease > MaxPeriod || o.LeaseMost < 0:
		return bad("lease time %v and largest lease %d: want a time up to %v and a size not negative", o.Lease, o.LeaseMost, MaxPeriod)
	case o.Batching != nil && (o.Batching.Pipelines < 0 || o.Batching.MaxBatch < 0):
		return bad("batching: pipelines and batch size must not be negative, got %d and %d", o.Batching.Pipelines, o.Batching.MaxBatch)
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
	return o, nil
}
