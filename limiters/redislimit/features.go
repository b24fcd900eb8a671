package redislimit

import (
	"fmt"

	"github.com/ratelab/ratelab/limiters"
)

// A feature is an optional part of a Limiter, chosen by its options.
type feature uint8

const (
	denialCache feature = 1 << iota // WithDenialCache (on by default)
	leasing                         // WithLeases
	packing                         // WithPacking
	batching                        // WithBatching
	fallingBack                     // WithFallback
	breaking                        // WithBreaker
	acking                          // WithReplicaAck
)

func (f feature) String() string {
	switch f {
	case denialCache:
		return "the denial cache"
	case leasing:
		return "leases"
	case packing:
		return "packing"
	case batching:
		return "batching"
	case fallingBack:
		return "the fallback"
	case acking:
		return "the replicas' ack"
	}
	return "the breaker"
}

// features returns the features o asks for.
func (o Options) features() feature {
	var f feature
	for _, on := range []struct {
		f  feature
		on bool
	}{
		{denialCache, o.DenialCache > 0}, {leasing, o.Lease > 0}, {packing, o.Packing > 0},
		{batching, o.Batching != nil}, {fallingBack, o.FailureMode == Fallback}, {breaking, o.BreakerFailures > 0},
		{acking, o.AckReplicas > 0},
	} {
		if on.on {
			f |= on.f
		}
	}
	return f
}

// A rule says what a feature does not combine with (not), or which
// limiters it is for (only, which what names; nil means any), and why.
type rule struct {
	f    feature
	not  feature
	only func(a limiters.Algorithm, limits int) bool
	what string
	why  string
}

// rules are every restriction on the features, the one place they are
// made: what is not here combines with anything, under any limits. The
// denial cache, the fallback and the breaker take any algorithm and any
// number of limits.
var rules = []rule{
	{f: packing, only: oneGCRA, what: "GCRA with one limit",
		why: "its state must be one timestamp a key, to fit in a hash field"},
	{f: leasing, only: oneBucket, what: "GCRA and the token bucket with one limit",
		why: "a lease is counted in units of the one limit, and waits for room by the time one unit takes to come back"},
	{f: packing, not: batching,
		why: "the batch script has no place for a key's hash field"},
	{f: leasing, not: batching,
		why: "a lease already spares a busy key its round trips, and would only wait in the batch queue"},
	{f: acking, not: batching,
		why: "a batch's pipeline would wait for the replicas' ack of its slowest decision"},
	{f: acking, not: leasing,
		why: "a lease admits from units held in the process, which no replica can acknowledge"},
	{f: leasing, not: packing,
		why: "packing is for many quiet keys, which leases decide one round trip a request anyway"},
}

// oneGCRA and oneBucket are what packing and leases are for.
func oneGCRA(a limiters.Algorithm, limits int) bool { return a == limiters.GCRA && limits == 1 }
func oneBucket(a limiters.Algorithm, limits int) bool {
	return (a == limiters.GCRA || a == limiters.TokenBucket) && limits == 1
}

// check reports the first rule that features f break for algorithm a
// with k limits.
func check(f feature, a limiters.Algorithm, k int) error {
	for _, r := range rules {
		switch {
		case f&r.f == 0:
		case r.only != nil && !r.only(a, k):
			return fmt.Errorf("redislimit: %w: %v is for %s, not %s with %d: %s", limiters.ErrInvalidParameter, r.f, r.what, a, k, r.why)
		case f&r.not != 0:
			return fmt.Errorf("redislimit: %w: %v does not combine with %v: %s", limiters.ErrInvalidParameter, r.f, f&r.not, r.why)
		}
	}
	return nil
}
