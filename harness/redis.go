package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/harness/peers"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// BackendRedis is the Backend of the subjects kept in Redis.
const BackendRedis = "redis"

// redisTimeout bounds every call the Redis subjects make: the limiters'
// timeout, the client's reads and writes, and its wait for a connection.
const redisTimeout = time.Second

// redisPool is the Redis client's connections: more than the real-time
// runs' most senders (64), so that none waits for one.
const redisPool = 128

// RedisName is the name of algorithm a's subject kept in Redis.
func RedisName(a limiters.Algorithm) string { return string(a) + " (redis)" }

// RedisRateName is the name of go-redis/redis_rate's subject.
const RedisRateName = "redis_rate"

// RedisBatchedName is the name of ratelab's GCRA on Redis with batching
// (redislimit.WithBatching): concurrent decisions share a script's run.
const RedisBatchedName = "gcra (redis batched)"

// RedisPackedName is the name of ratelab's GCRA on Redis with its keys
// packed into hashes (redislimit.WithPacking): memory for millions of
// users.
const RedisPackedName = "gcra (redis packed)"

// redisPackedHashes is how many hashes the packed subject spreads its
// users over: the lab's 50,000 Redis users make about 49 a hash (10,000,
// quick, about 10), in the 16 to 64 that keep a hash one compact list.
const redisPackedHashes = 1024

// RedisNames are the names of the subjects kept in Redis, in the order the
// lab runs them.
func RedisNames() []string {
	var out []string
	for _, a := range limiters.Algorithms() {
		out = append(out, RedisName(a))
	}
	return append(out, RedisBatchedName, RedisPackedName, RedisRateName)
}

// redisLab is the Redis server the lab's Redis subjects share: one client,
// a key prefix of this run's own (every key the run writes starts with it,
// or with redis_rate's "rate:" and it; letters, digits and colons, nothing
// a SCAN pattern reads otherwise), and the first error Redis gave, after
// which the lab runs none of them.
type redisLab struct {
	c      *redis.Client
	addr   string // host:port/db, for messages
	prefix string
	seq    atomic.Int64

	mu  sync.Mutex
	err error
}

// openRedis connects to the server at url and asks it for a PING, for a
// second at most. A server that does not answer is no error: skip says
// why, for the runs it keeps from happening.
func openRedis(ctx context.Context, url string) (r *redisLab, skip string, err error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", fmt.Errorf("harness: the Redis URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = redisPool
	opt.PoolTimeout, opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = redisTimeout, redisTimeout, redisTimeout, redisTimeout
	opt.MaxRetries = -1 // a decision retried is a decision made twice
	var nonce [8]byte
	rand.Read(nonce[:])
	r = &redisLab{c: redis.NewClient(opt), addr: fmt.Sprintf("%s/%d", opt.Addr, opt.DB), prefix: "ratelab:bench:" + hex.EncodeToString(nonce[:]) + ":"}
	pctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := r.c.Ping(pctx).Err(); err != nil {
		r.c.Close()
		why := err.Error()
		var op *net.OpError
		switch {
		case errors.As(err, &op):
			why = op.Err.Error()
		case errors.Is(err, context.DeadlineExceeded):
			why = fmt.Sprintf("no answer within %v", redisTimeout)
		}
		return nil, fmt.Sprintf("no Redis at %s: %s; point the lab at a server with --redis-url, or leave these rows out with --redis=false", opt.Addr, why), nil
	}
	return r, "", nil
}

// fail records err, the first error Redis gave.
func (r *redisLab) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// failed says why the Redis subjects no longer run, "" while Redis has
// given no error.
func (r *redisLab) failed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		return ""
	}
	return fmt.Sprintf("Redis at %s failed during the lab (%v); the Redis rows from there on were not run", r.addr, r.err)
}

// newPrefix returns a key prefix no other limiter of the run has.
func (r *redisLab) newPrefix() string {
	return r.prefix + strconv.FormatInt(r.seq.Add(1), 10) + ":"
}

// scan calls fn with each batch of the keys matching the SCAN pattern
// match.
func (r *redisLab) scan(ctx context.Context, match string, fn func([]string) error) error {
	var cursor uint64
	for {
		keys, next, err := r.c.Scan(ctx, cursor, match, 2000).Result()
		if err != nil {
			return fmt.Errorf("harness: Redis at %s: SCAN: %w", r.addr, err)
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// sweep removes every key matching the SCAN pattern match, even once ctx
// is cancelled (for a minute at most).
func (r *redisLab) sweep(ctx context.Context, match string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return r.scan(ctx, match, func(keys []string) error { return r.c.Unlink(ctx, keys...).Err() })
}

// close removes every key the run left (a limiter's own removal may have
// failed, or been cut short) and closes the client.
func (r *redisLab) close(ctx context.Context) error {
	defer r.c.Close()
	for _, p := range []string{r.prefix, peers.RedisRatePrefix + r.prefix} {
		if err := r.sweep(ctx, p+"*"); err != nil {
			return fmt.Errorf("harness: removing the lab's keys from Redis: %w", err)
		}
	}
	return nil
}

// subjects returns ratelab's six algorithms on Redis, GCRA again with
// batching and with packing, then go-redis's redis_rate. Each limiter a subject makes has a key prefix of its own and
// removes its keys when stopped; every decision Redis does not make is
// recorded (r.failed) as well as denied.
func (r *redisLab) subjects() []Subject {
	var out []Subject
	type variant struct {
		name string
		a    limiters.Algorithm
		opts []redislimit.Option
		// packed: what a user holds is a field of a hash, not a key.
		packed bool
	}
	var variants []variant
	for _, a := range limiters.Algorithms() {
		variants = append(variants, variant{RedisName(a), a, nil, false})
	}
	variants = append(variants,
		variant{RedisBatchedName, limiters.GCRA, []redislimit.Option{redislimit.WithBatching(redislimit.Batching{})}, false},
		variant{RedisPackedName, limiters.GCRA, []redislimit.Option{redislimit.WithPacking(redisPackedHashes)}, true})
	for _, v := range variants {
		a := v.a
		newWith := func(c redislimit.Client, w limiters.Window, opts []redislimit.Option) (*redislimit.Limiter, string, error) {
			prefix := r.newPrefix()
			l, err := redislimit.New(c, Spec(a, w), append([]redislimit.Option{redislimit.WithPrefix(prefix),
				redislimit.WithTimeout(redisTimeout), redislimit.WithFailureMode(redislimit.FailClosed)}, opts...)...)
			return l, prefix, err
		}
		newLimiter := func(c redislimit.Client, w limiters.Window) (*redislimit.Limiter, string, error) {
			return newWith(c, w, v.opts)
		}
		stopper := func(l *redislimit.Limiter) func() {
			return func() {
				l.Close() // a batching limiter's senders
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := l.ResetAll(ctx); err != nil {
					r.fail(err)
				}
			}
		}
		out = append(out, Subject{
			Name: v.name, Library: "ratelab", Algorithm: a, Backend: BackendRedis,
			NewAt: func(w limiters.Window) (AtDecider, func(), error) {
				l, _, err := newLimiter(r.c, w)
				if err != nil {
					return nil, nil, err
				}
				return redisAt{l, r}, stopper(l), nil
			},
			New: func(w limiters.Window) (limiters.Limiter, func(), error) {
				l, _, err := newLimiter(r.c, w)
				if err != nil {
					return nil, nil, err
				}
				return recorded{l, r}, stopper(l), nil
			},
			Weigh: func(ctx context.Context, w limiters.Window, keys int) (MemoryResult, error) {
				var opts []redislimit.Option
				if v.packed { // batching is left out: the weighing sends its own pipelines
					opts = v.opts
				}
				return r.weigh(ctx, keys, v.packed, func(c redislimit.Client) (func(string), string, error) {
					l, prefix, err := newWith(c, w, opts)
					if err != nil {
						return nil, "", err
					}
					// At an explicit time, so that the keys outlive the
					// measurement (ten minutes past full quota), a window's
					// end included.
					now := time.Now()
					return func(key string) { l.AllowAt(key, now, 1) }, prefix + "*", nil
				})
			},
		})
	}
	newRedisRate := func(c peers.RedisClient, w limiters.Window) (peers.Limiter, string, error) {
		prefix := r.newPrefix()
		l, err := peers.NewRedisRate(c, prefix, w)
		return l, peers.RedisRatePrefix + prefix + "*", err
	}
	out = append(out, Subject{
		Name: RedisRateName, Library: peers.RedisRateModule, Algorithm: limiters.GCRA, Backend: BackendRedis,
		New: func(w limiters.Window) (limiters.Limiter, func(), error) {
			l, match, err := newRedisRate(r.c, w)
			if err != nil {
				return nil, nil, err
			}
			return recorded{l, r}, func() {
				if err := r.sweep(context.Background(), match); err != nil {
					r.fail(err)
				}
			}, nil
		},
		Weigh: func(ctx context.Context, w limiters.Window, keys int) (MemoryResult, error) {
			return r.weigh(ctx, keys, false, func(c redislimit.Client) (func(string), string, error) {
				l, match, err := newRedisRate(c, w)
				if err != nil {
					return nil, "", err
				}
				return func(key string) { l.AllowN(context.Background(), key, 1) }, match, nil
			})
		},
	})
	return out
}

// recorded is a limiter on Redis whose errors are recorded.
type recorded struct {
	l limiters.Limiter
	r *redisLab
}

func (x recorded) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	d, err := x.l.AllowN(ctx, key, n)
	if err != nil && ctx.Err() == nil {
		x.r.fail(err)
	}
	return d, err
}

// redisAt is a limiter on Redis deciding at explicit times, its errors
// recorded.
type redisAt struct {
	l *redislimit.Limiter
	r *redisLab
}

func (x redisAt) AllowAt(key string, t time.Time, n int) limiters.Decision {
	d, _, err := x.l.DecideAt(context.Background(), key, t, n)
	if err != nil {
		x.r.fail(err)
	}
	return d
}

// weighBatch is how many decisions a pipeline of a memory run holds.
const weighBatch = 1000

// weigh measures the server's memory per key: newDecider returns, on a
// client, a function deciding one request for a key, and the SCAN pattern
// of the keys it writes. One decision on the lab's client loads the
// limiter's script; then a decision for each of keys keys, on a client
// that queues them in pipelines (a round trip each would take a minute at
// a million keys), grows the server's used_memory (INFO memory): that
// growth over the keys written, counted by SCAN, is the answer, each key's
// name included (and whatever else wrote to the server meanwhile); packed,
// over the fields of the hashes written. The keys are removed after.
func (r *redisLab) weigh(ctx context.Context, keys int, packed bool, newDecider func(c redislimit.Client) (func(string), string, error)) (MemoryResult, error) {
	warm, match, err := newDecider(r.c)
	if err != nil {
		return MemoryResult{}, err
	}
	warm("warm-up")
	q := &queue{Pipeliner: r.c.Pipeline()}
	decide, qmatch, err := newDecider(q)
	if err != nil {
		return MemoryResult{}, err
	}
	defer func() {
		for _, m := range []string{match, qmatch} {
			if err := r.sweep(ctx, m); err != nil {
				r.fail(err)
			}
		}
	}()
	memBefore, err := r.settled(ctx)
	if err != nil {
		return MemoryResult{}, err
	}
	for i := range keys {
		decide(workloads.UserKey(i))
		if q.Len() < weighBatch && i < keys-1 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return MemoryResult{}, err
		}
		ectx, cancel := context.WithTimeout(ctx, 10*redisTimeout)
		_, err := q.Exec(ectx)
		cancel()
		if err != nil {
			return MemoryResult{}, fmt.Errorf("harness: Redis at %s: %w", r.addr, err)
		}
	}
	memAfter, err := r.usage(ctx)
	if err != nil {
		return MemoryResult{}, err
	}
	held, err := r.count(ctx, qmatch, packed)
	if err != nil {
		return MemoryResult{}, err
	}
	if held != keys {
		what := "keys"
		if packed {
			what = "fields"
		}
		return MemoryResult{}, fmt.Errorf("harness: Redis at %s holds %d %s after a decision for each of %d users", r.addr, held, what, keys)
	}
	return MemoryResult{BytesPerUser: float64(memAfter-memBefore) / float64(held), Tracked: held}, nil
}

// count counts the keys matching the SCAN pattern match, or, fields, the
// fields of those keys (hashes).
func (r *redisLab) count(ctx context.Context, match string, fields bool) (int, error) {
	n := 0
	err := r.scan(ctx, match, func(keys []string) error {
		if !fields {
			n += len(keys)
			return nil
		}
		p := r.c.Pipeline()
		lens := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			lens[i] = p.HLen(ctx, k)
		}
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("harness: Redis at %s: %w", r.addr, err)
		}
		for _, l := range lens {
			n += int(l.Val())
		}
		return nil
	})
	return n, err
}

// settled is usage once the server's memory has stopped moving: after
// keys are removed (the last memory run's), Redis shrinks its tables in
// its next cron tick, a tenth of a second later; measured before that, the
// next run would not pay for growing them again. It waits two seconds at
// most.
func (r *redisLab) settled(ctx context.Context) (int64, error) {
	mem, err := r.usage(ctx)
	for range 20 {
		if err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
		was := mem
		if mem, err = r.usage(ctx); err == nil && mem == was {
			return mem, nil
		}
	}
	return mem, err
}

// usage returns the server's used_memory.
func (r *redisLab) usage(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	info, err := r.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("harness: Redis at %s: INFO memory: %w", r.addr, err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			if mem, err := strconv.ParseInt(v, 10, 64); err == nil && mem > 0 {
				return mem, nil
			}
		}
	}
	return 0, fmt.Errorf("harness: Redis at %s: INFO memory has no used_memory", r.addr)
}

// queue is a client that queues every script it is asked to run in a
// pipeline and answers errQueued: a memory run's limiters write their keys
// through it, at a pipeline's pace, and read no decision.
type queue struct{ redis.Pipeliner }

var errQueued = errors.New("harness: queued in a pipeline")

// Process queues a copy of cmd (redislimit reuses its arguments).
func (q *queue) Process(ctx context.Context, cmd redis.Cmder) error {
	args := append([]any(nil), cmd.Args()...)
	q.Pipeliner.Process(ctx, redis.NewCmd(context.Background(), args...))
	return errQueued
}

// EvalSha queues the script (redis_rate runs its scripts so).
func (q *queue) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	q.Pipeliner.EvalSha(ctx, sha, keys, args...)
	return redis.NewCmdResult(nil, errQueued)
}

// openRedis opens the lab's Redis, when c names one and asks for a subject
// kept there.
func (c Config) openRedis(ctx context.Context) (*redisLab, string, error) {
	if c.RedisURL == "" || !slices.ContainsFunc(RedisNames(), func(n string) bool { return redisNamed(c.Limiters, n) }) {
		return nil, "", nil
	}
	return openRedis(ctx, c.RedisURL)
}

// redisRealTimeRuns are the real-time runs of a subject kept in Redis: the
// lab's, shorter, and paced at a rate a round trip a decision keeps up
// with.
func (c Config) redisRealTimeRuns() []RealTime {
	var out []RealTime
	for _, g := range c.Goroutines {
		out = append(out, RealTime{Goroutines: g, Duration: c.RedisRealTime})
	}
	return append(out, RealTime{Goroutines: c.LatencyGoroutines, Rate: c.RedisOfferedRate, Duration: c.RedisLatencyTime})
}

// redisRealTimeNote says how the real-time run rt of a subject kept in
// Redis differs from the others in its table.
func (c Config) redisRealTimeNote(rt RealTime) string {
	if rt.Rate > 0 {
		return fmt.Sprintf("Rows kept in Redis are paced at %.0f a second for %v: each decision is a round trip to the server, and at %.0f a second the run would measure a queue.",
			c.RedisOfferedRate, c.RedisLatencyTime, c.OfferedRate)
	}
	return fmt.Sprintf("Rows kept in Redis run for %v each, a round trip to the server a decision: too few decisions to take most keys past their limits, so most are admitted.", c.RedisRealTime)
}

// redisMaxSample is the most requests a sample of a workload decided on
// Redis may have: about fifteen seconds of the lab's time.
const redisMaxSample = 300_000

// accuracy measures s, kept in Redis, on a sample of w (Config.RedisUsers
// and RedisSimulated): against the ideal, and request for request against
// the same algorithm in memory. The sample's keys are shared out among
// senders (simulateByKey), so that the round trips overlap.
func (r *redisLab) accuracy(c Config, s Subject, w *workloads.Workload) (results.Run, error) {
	switch {
	case s.NewAt == nil:
		return results.Run{SkippedBecause: "accuracy not measured: it reads the server's clock and takes no explicit time, and a replay in real time, a round trip a request, would not fit the lab's time"}, nil
	case w.Name == "many-users":
		return results.Run{SkippedBecause: fmt.Sprintf("accuracy on Redis not measured on many-users: its point is its population (%d users), and a sample of a few would be another workload; Redis at scale is the memory run's", w.Params.Users)}, nil
	}
	sw := sample(w, c.RedisUsers, c.RedisSimulated)
	switch n := len(sw.Arrivals); {
	case n == 0:
		return results.Run{SkippedBecause: fmt.Sprintf("the sample decided on Redis (the first %d users over the first %v) has no requests", c.RedisUsers, c.RedisSimulated)}, nil
	case n > redisMaxSample:
		return results.Run{SkippedBecause: fmt.Sprintf("the sample decided on Redis (the first %d users over the first %v) has %d requests, more than the %d the lab sends Redis", c.RedisUsers, c.RedisSimulated, n, redisMaxSample)}, nil
	}
	ideal, err := Ideal(sw, c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	twin, err := memory.New(Spec(s.Algorithm, c.Limit), limiters.WithSweepInterval(-1))
	if err != nil {
		return results.Run{}, err
	}
	defer twin.Close()
	d, stop, err := s.NewAt(c.Limit)
	if err != nil {
		return results.Run{}, err
	}
	defer stop()
	allowed := simulateByKey(sw, d, min(sw.Params.Users, 16))
	if why := r.failed(); why != "" {
		return results.Run{SkippedBecause: why}, nil
	}
	differs := int64(0)
	for i, ok := range Simulate(sw, twin) {
		if ok != allowed[i] {
			differs++
		}
	}
	acc := Compare(sw, allowed, ideal, c.Limit)
	allocs := steadyAllocsAt(after(sw, 500, c.Limit.Length), d, c.Limit.Length)
	return results.Run{Mode: ModeSimulated, Decisions: int64(len(allowed)), Accuracy: &acc, AllocsPerDecision: &allocs, DiffersFromMemory: &differs,
		Note: fmt.Sprintf("Rows kept in Redis decide a sample of each workload, its first %d users (attackers, on the boundary attack) over its first %v, a round trip to the server a request; "+
			"their allocations per decision are over 500 requests.", c.RedisUsers, c.RedisSimulated)}, nil
}

// sample returns the requests w's first users users made in its first
// span, as a workload of its own.
func sample(w *workloads.Workload, users int, span time.Duration) *workloads.Workload {
	p := w.Params
	p.Users = min(users, p.Users)
	if p.Duration == 0 || span < p.Duration {
		p.Duration = span
	}
	out := &workloads.Workload{Name: w.Name, Params: p}
	for _, a := range w.Arrivals {
		if a.T >= span {
			break
		}
		if int(a.User) < users {
			out.Arrivals = append(out.Arrivals, a)
		}
	}
	return out
}

// after returns w's first n requests moved past its end by whole windows
// of length, so that a limiter that has decided w meets them as it met w's
// (the keys made, time going on).
func after(w *workloads.Workload, n int, length time.Duration) *workloads.Workload {
	out := &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: slices.Clone(w.Arrivals[:min(n, len(w.Arrivals))])}
	if len(w.Arrivals) == 0 {
		return out
	}
	shift := ((w.Arrivals[len(w.Arrivals)-1].T+length)/length + 1) * length
	for i := range out.Arrivals {
		out.Arrivals[i].T += shift
	}
	return out
}

// simulateByKey is Simulate with w's users shared out among workers
// goroutines, each deciding its users' requests in order: the same
// decisions from a limiter whose keys do not share state, sooner when
// each decision waits on a server.
func simulateByKey(w *workloads.Workload, d AtDecider, workers int) []bool {
	allowed := make([]bool, len(w.Arrivals))
	keys := keysOf(w)
	var wg sync.WaitGroup
	for g := range max(workers, 1) {
		wg.Go(func() {
			for i, a := range w.Arrivals {
				if int(a.User)%workers == g {
					allowed[i] = d.AllowAt(keys[a.User], time.Unix(0, int64(a.T)), int(a.N)).Allowed
				}
			}
		})
	}
	wg.Wait()
	return allowed
}
