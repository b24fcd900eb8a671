// Package redislimit keeps rate limits in Redis, so that a fleet of
// processes shares one limit per key. Every algorithm of ratelab is here,
// with the in-memory semantics: on the same trace, at explicit times, a
// Redis limiter and package composite give the same decisions.
//
//	l, err := redislimit.New(client, limiters.GCRA, []limiters.Limit{limiters.PerSecond(10)})
//	d, err := l.Decide(ctx, limiters.Request{Key: "alice", N: 1})
//
// Each algorithm is one Lua script, run by its SHA-1 (EVALSHA) and sent
// whole (EVAL) only when the server lacks it: one round trip a decision,
// atomic on the server, for up to eight limits of one algorithm at once
// ("10/s and 1000/h"), all or nothing.
//
// Storage: a key's state under each limit is one Redis key, Prefix, the
// caller's key in braces (a Redis Cluster hash tag: the keys of one
// decision share a slot; braces and % are escaped as %7B, %7D and %25, the
// empty key is %), then the algorithm and the limit (N/W, or C@T for a
// bucket, W and T in nanoseconds):
//
//	ratelab:{alice}:gcra:10@100000000
//
// Every key expires once its quota is full again, plus a grace.
//
// Time is the server's clock (Redis TIME) by default, so a fleet agrees
// whatever the skew between its machines; a Request with At set decides at
// that time instead, which is how traces are replayed exactly. Reserve and
// Settle use the process's clock as an explicit time.
//
// Failure: every call is bounded by the timeout. When Redis does not
// answer (down, slow, a reply not understood, or the breaker open),
// Decide and Peek return an error wrapping ErrUnavailable and the failure
// mode's Decision: FailOpen admits, FailClosed denies for the timeout.
// With WithFallback the decision is instead an in-memory limiter's, at
// each limit's share of the fleet, and comes with a nil error; the error
// hook (WithErrorHook) hears of every failure either way. Reset,
// ResetAll, Walk and Settle return their errors.
//
// Trade-offs, each an option (numbers in docs/redis.md):
//   - the denial cache (on by default) denies a denied key again in the
//     process until Redis's retry-after, with no round trip; exact but for
//     a Reset made by another process;
//   - leases (GCRA and the token bucket, one limit) admit from units taken
//     ahead, a round trip for many requests, over the limit by at most
//     lease time × rate;
//   - batching gathers concurrent decisions into one round trip, at the
//     cost of a wait in a queue;
//   - packing (GCRA, one limit) keeps keys as fields of a few hashes, less
//     memory for a little more server work;
//   - the replicas' ack (WithReplicaAck) waits for a replica to hold each
//     decision's writes, so that a failover loses no admission, at the
//     cost of a replication round trip a decision and of failing while no
//     replica answers.
//
// Tiers in Redis: a *Limiter is a tiers.Group, so tiers.NewWith builds
// each tier and override on Redis, each under a prefix of its own (whose
// braces, if a name has any, must be escaped as keys' are):
//
//	tiers.NewWith(cfg, func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
//		return redislimit.New(client, a, limits, redislimit.WithPrefix("api:"+name+":"))
//	})
//
// Numbers in Lua are doubles, exact for integers up to 2^53: a window, or
// a bucket's time to refill from empty, may be at most 2^52ns (52 days),
// a window at least a microsecond, and times run from 1970 to 2106.
//
// A Limiter is safe for concurrent use; Close it when done.
package redislimit
