package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/harness/peers"
	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// redisTimeout bounds every call the Redis subjects make: the limiters'
// timeout, the client's reads and writes, and its wait for a connection.
const redisTimeout = time.Second

// redisPool is the Redis client's connections: more than the real-time
// runs' most senders (64), so that none waits for one.
const redisPool = 128

// redisName is the name of algorithm a's subject kept in Redis.
func redisName(a limiters.Algorithm) string { return string(a) + " (redis)" }

// redisRateName is the name of go-redis/redis_rate's subject.
const redisRateName = "redis_rate"

// redisBatchedName is the name of ratelab's GCRA on Redis with batching
// (redislimit.WithBatching): concurrent decisions share a script's run.
const redisBatchedName = "gcra (redis batched)"

// redisPackedName is the name of ratelab's GCRA on Redis with its keys
// packed into hashes (redislimit.WithPacking): memory for millions of
// users.
const redisPackedName = "gcra (redis packed)"

// redisPackedHashes is how many hashes the packed subject spreads its
// users over: the lab's 50,000 Redis users make about 49 a hash (10,000,
// quick, about 10), in the 16 to 64 that keep a hash one compact list.
const redisPackedHashes = 1024

// redisNames are the names of the subjects kept in Redis, in the order the
// lab runs them.
func redisNames() []string {
	var out []string
	for _, a := range limiters.Algorithms() {
		out = append(out, redisName(a))
	}
	return append(out, redisBatchedName, redisPackedName, redisRateName, redisFloorName, redisBatchedFloorName,
		redisFleetPlainName, redisFleetBatchedName, redisFleetCachedName, redisFleetLeaseName, redisFleetLeaseTBName)
}

// redisLab is the Redis server the lab's Redis subjects share: one client,
// a key prefix of this run's own (every key the run writes starts with it,
// or with redis_rate's "rate:" and it; letters, digits and colons, nothing
// a SCAN pattern reads otherwise), and the first error Redis gave, after
// which the lab runs none of them.
type redisLab struct {
	c      *redis.Client
	cfg    Config
	addr   string // host:port/db, for messages
	prefix string
	seq    atomic.Int64
	// unreached says why the server could not be reached, "" when it was.
	unreached string

	mu  sync.Mutex
	err error
}

// redisConfig says where the subjects kept in Redis are kept, and how the
// lab runs them: each decision of theirs is a round trip to the server,
// thousands a second where a limiter in memory makes millions, so they run
// on less (Defaults). Their simulated runs decide the first Users users
// (attackers, on the attacks) of each workload over its first Simulated;
// their unpaced real-time runs last RealTime, their paced ones LatencyTime
// at OfferedRate; their memory runs give the server Keys keys.
type redisConfig struct {
	// URL is the server (redis://host:port/db); empty leaves the subjects
	// kept in Redis out. A server that does not answer a PING within a
	// second is no error: their runs are skipped, saying why. Their keys
	// are under a prefix of the run's own, removed when done; nothing is
	// flushed.
	URL         string
	Users       int
	Simulated   time.Duration
	RealTime    time.Duration
	LatencyTime time.Duration
	OfferedRate float64
	Keys        int
}

// defaults sets r's zero fields for c. Redis makes about 15-25k decisions
// a second over loopback with many senders (its scripts take 10-20µs each
// of its one thread), 5-10k with one, and fills about 20k keys a second in
// pipelines: these keep the Redis rows to about a minute of the full lab
// and 20s of the quick one.
func (r redisConfig) defaults(c Config) redisConfig {
	q := c.Quick
	set(&r.Users, pick(q, 10, 6))
	set(&r.Simulated, pick(q, 10*time.Second, 4*time.Second))
	r.Simulated = min(max(r.Simulated, 2*c.Limit.Per), c.Simulated)
	set(&r.RealTime, pick(q, 60*time.Millisecond, 20*time.Millisecond))
	set(&r.LatencyTime, pick(q, 150*time.Millisecond, 40*time.Millisecond))
	set(&r.OfferedRate, 1000)
	set(&r.Keys, pick(q, 50_000, 5_000))
	return r
}

// flags declares the Redis rows' settings on fs (the server is the
// command's --redis-url).
func (r *redisConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&r.Users, "redis-users", r.Users, "the first users of each workload the Redis rows are measured on, for accuracy (default 10, quick 6)")
	fs.DurationVar(&r.Simulated, "redis-simulated", r.Simulated, "the simulated time of each workload the Redis rows are measured over, from its start (default 10s, quick 4s)")
	fs.DurationVar(&r.RealTime, "redis-realtime", r.RealTime, "how long each unpaced real-time run of a Redis row lasts (default 60ms, quick 20ms)")
	fs.DurationVar(&r.LatencyTime, "redis-latency-time", r.LatencyTime, "how long each paced run of a Redis row lasts (default 150ms, quick 40ms)")
	fs.Float64Var(&r.OfferedRate, "redis-rate", r.OfferedRate, "the rate of the paced runs of a Redis row, per second (default 1000)")
	fs.IntVar(&r.Keys, "redis-keys", r.Keys, "the keys the memory runs give the Redis server (default 50000, quick 5000)")
}

func (r redisConfig) validate(c Config) error {
	if r.URL == "" {
		for _, n := range c.Limiters {
			if slices.Contains(redisNames(), n) {
				return fmt.Errorf("harness: %s is kept in Redis, and the lab has no Redis server to run it on", n)
			}
		}
		return nil
	}
	if _, err := redis.ParseURL(r.URL); err != nil {
		return fmt.Errorf("harness: the Redis URL: %w", err)
	}
	if r.Users < 1 || r.Keys < 1 || r.Simulated < 2*c.Limit.Per || r.RealTime <= 0 {
		return fmt.Errorf("harness: Redis: users and keys must be positive, and the simulated span (%v) at least two windows", r.Simulated)
	}
	return (realTimeRun{Goroutines: c.LatencyGoroutines, Rate: r.OfferedRate, Duration: r.LatencyTime}).Validate()
}

// openRedis opens the lab's Redis, when c names one and asks for a subject
// kept there: it connects to the server and asks it for a PING, for a
// second at most. A server that does not answer is no error: its subjects
// are unavailable, saying why.
func openRedis(ctx context.Context, c Config) (opened, error) {
	if c.Redis.URL == "" || !slices.ContainsFunc(redisNames(), func(n string) bool { return named(c.Limiters, n) }) {
		return nil, nil
	}
	opt, err := redis.ParseURL(c.Redis.URL)
	if err != nil {
		return nil, fmt.Errorf("harness: the Redis URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = redisPool
	opt.PoolTimeout, opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = redisTimeout, redisTimeout, redisTimeout, redisTimeout
	opt.MaxRetries = -1 // a decision retried is a decision made twice
	var nonce [8]byte
	rand.Read(nonce[:])
	r := &redisLab{c: redis.NewClient(opt), cfg: c, addr: fmt.Sprintf("%s/%d", opt.Addr, opt.DB), prefix: "ratelab:bench:" + hex.EncodeToString(nonce[:]) + ":"}
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
		r.c, r.unreached = nil, fmt.Sprintf("no Redis at %s: %s; point the lab at a server with --redis-url, or leave these rows out with --redis=false", opt.Addr, why)
	}
	return r, nil
}

// describe records in settings how the lab ran the Redis subjects: the
// server (never a password), the prefix of the run's keys, and the Redis
// rows' settings.
func (r *redisLab) describe(settings map[string]string) {
	if r.unreached != "" {
		return
	}
	c := r.cfg.Redis
	fs := flag.NewFlagSet("redis", flag.ContinueOnError)
	c.flags(fs)
	fs.VisitAll(func(f *flag.Flag) { settings[f.Name] = f.Value.String() })
	settings["redis-addr"], settings["redis-prefix"] = r.addr, r.prefix
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
	if r.c == nil {
		return nil
	}
	defer r.c.Close()
	for _, p := range []string{r.prefix, peers.RedisRatePrefix + r.prefix} {
		if err := r.sweep(ctx, p+"*"); err != nil {
			return fmt.Errorf("harness: removing the lab's keys from Redis: %w", err)
		}
	}
	return nil
}

// subjects returns the subjects the lab's configuration names of
// ratelab's six algorithms on Redis, GCRA again with batching and with
// packing, and go-redis's redis_rate: unavailable, saying why, when the
// server did not answer. Each limiter a subject makes has a key prefix of
// its own and removes its keys when stopped; every decision Redis does not
// make is recorded (r.failed) as well as denied.
func (r *redisLab) subjects() []Subject {
	var out []Subject
	for _, a := range limiters.Algorithms() {
		out = append(out, r.ratelab(redisName(a), a, nil, false))
	}
	out = append(out,
		r.ratelab(redisBatchedName, limiters.GCRA, []redislimit.Option{redislimit.WithBatching(redislimit.Batching{})}, false),
		r.ratelab(redisPackedName, limiters.GCRA, []redislimit.Option{redislimit.WithPacking(redisPackedHashes)}, true),
		r.redisRate())
	out = append(out, r.floors()...)
	out = append(out, r.fleets()...)
	out = slices.DeleteFunc(out, func(s Subject) bool { return !named(r.cfg.Limiters, s.Name) })
	for i := range out {
		if out[i].Name == redisName(limiters.GCRA) {
			out[i].Outage = r.outage(limiters.GCRA)
		}
		out[i].Backend = results.BackendRedis
		out[i].Remote = r.remote()
		if r.unreached != "" {
			out[i] = Subject{Name: out[i].Name, Library: out[i].Library, Algorithm: out[i].Algorithm, Backend: results.BackendRedis, Floor: out[i].Floor,
				Remote: &remote{Server: "Redis", Unavailable: r.unreached}}
		}
	}
	return out
}

// remote is how a subject kept in Redis takes part in the lab.
func (r *redisLab) remote() *remote {
	c := r.cfg
	var rts []realTimeRun
	for _, g := range c.Goroutines {
		rts = append(rts, realTimeRun{Goroutines: g, Duration: c.Redis.RealTime})
	}
	rts = append(rts, realTimeRun{Goroutines: c.LatencyGoroutines, Rate: c.Redis.OfferedRate, Duration: c.Redis.LatencyTime})
	return &remote{Server: "Redis", Failed: r.failed, Sample: r.sample, Senders: 16, RealTime: rts, Note: r.realTimeNote}
}

// ratelab is ratelab's algorithm a on Redis with opts, named name; packed
// says what a user holds is a field of a hash, not a key.
func (r *redisLab) ratelab(name string, a limiters.Algorithm, opts []redislimit.Option, packed bool) Subject {
	newWith := func(c redislimit.Client, w limiters.Limit, opts []redislimit.Option) (*redislimit.Limiter, string, error) {
		prefix := r.newPrefix()
		l, err := redislimit.New(c, a, []limiters.Limit{w}, append([]redislimit.Option{redislimit.WithPrefix(prefix),
			redislimit.WithTimeout(redisTimeout), redislimit.WithFailureMode(redislimit.FailClosed)}, opts...)...)
		return l, prefix, err
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
	return Subject{
		Name: name, Library: "ratelab", Algorithm: a,
		NewAt: func(w limiters.Limit) (limiters.Limiter, func(), error) {
			l, _, err := newWith(r.c, w, opts)
			if err != nil {
				return nil, nil, err
			}
			return recorded{l, r}, stopper(l), nil
		},
		New: func(w limiters.Limit) (limiters.Limiter, func(), error) {
			l, _, err := newWith(r.c, w, opts)
			if err != nil {
				return nil, nil, err
			}
			return recorded{l, r}, stopper(l), nil
		},
		Weigh: func(ctx context.Context, w limiters.Limit) (memoryResult, error) {
			var weighOpts []redislimit.Option
			if packed { // batching is left out: the weighing sends its own pipelines
				weighOpts = opts
			}
			return r.weigh(ctx, packed, func(c redislimit.Client) (func(string), string, error) {
				l, prefix, err := newWith(c, w, weighOpts)
				if err != nil {
					return nil, "", err
				}
				// At an explicit time, so that the keys outlive the
				// measurement (ten minutes past full quota), a window's
				// end included.
				now := time.Now()
				return func(key string) { l.Decide(context.Background(), limiters.Request{Key: key, N: 1, At: now}) }, prefix + "*", nil
			})
		},
	}
}

// outage is the server of ratelab serve deciding a on the lab's Redis,
// under a prefix of its own, for the outage mode. Only GCRA's subject has
// it: what a failure mode does is the same for every algorithm, and the
// runs take seconds each.
func (r *redisLab) outage(a limiters.Algorithm) func(w limiters.Limit) (server.Config, func(), error) {
	return func(w limiters.Limit) (server.Config, func(), error) {
		opt, err := redis.ParseURL(r.cfg.Redis.URL)
		if err != nil {
			return server.Config{}, nil, fmt.Errorf("harness: the Redis URL: %w", err)
		}
		prefix := r.newPrefix()
		return server.Config{Algorithm: a, Limit: w, Backend: "redis", Redis: opt, RedisPrefix: prefix}, func() {
			if err := r.sweep(context.Background(), prefix+"*"); err != nil {
				r.fail(err)
			}
		}, nil
	}
}

// redisRate is go-redis/redis_rate, a GCRA on Redis.
func (r *redisLab) redisRate() Subject {
	newRedisRate := func(c peers.RedisClient, w limiters.Limit) (limiters.Limiter, string, error) {
		prefix := r.newPrefix()
		l, err := peers.NewRedisRate(c, prefix, w)
		return l, peers.RedisRatePrefix + prefix + "*", err
	}
	return Subject{
		Name: redisRateName, Library: peers.RedisRateModule, Algorithm: limiters.GCRA,
		New: func(w limiters.Limit) (limiters.Limiter, func(), error) {
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
		Weigh: func(ctx context.Context, w limiters.Limit) (memoryResult, error) {
			return r.weigh(ctx, false, func(c redislimit.Client) (func(string), string, error) {
				l, match, err := newRedisRate(c, w)
				if err != nil {
					return nil, "", err
				}
				return func(key string) { l.AllowN(context.Background(), key, 1) }, match, nil
			})
		},
	}
}

// recorded is a limiter on Redis whose errors are recorded.
type recorded struct {
	l limiters.Limiter
	r *redisLab
}

func (x recorded) Decide(ctx context.Context, req limiters.Request) (limiters.Decision, error) {
	d, err := x.l.Decide(ctx, req)
	if err != nil && ctx.Err() == nil {
		x.r.fail(err)
	}
	return d, err
}

// Close closes the limiter recorded.
func (x recorded) Close() error { return x.l.Close() }

func (x recorded) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return x.Decide(ctx, limiters.Request{Key: key, N: n})
}

// realTimeNote says how the real-time run rt of a subject kept in Redis
// differs from the others in its table.
func (r *redisLab) realTimeNote(rt realTimeRun) string {
	c := r.cfg
	if rt.Rate > 0 {
		once := ""
		if c.Quick {
			once = " The quick lab paces them once, not repeated."
		}
		return fmt.Sprintf("Rows kept in Redis are paced at %.0f a second for %v: each decision is a round trip to the server, and at %.0f a second the run would measure a queue.%s",
			c.Redis.OfferedRate, c.Redis.LatencyTime, c.OfferedRate, once)
	}
	return fmt.Sprintf("Rows kept in Redis run for %v each, a round trip to the server a decision: too few decisions to take most keys past their limits, so most are admitted.", c.Redis.RealTime)
}

// redisMaxSample is the most requests a sample of a workload decided on
// Redis may have: about fifteen seconds of the lab's time.
const redisMaxSample = 300_000

// sample returns the part of w the Redis subjects decide in simulated
// time, the first Redis.Users users over its first Redis.Simulated, and
// the note their rows carry; or why they decide none of it.
func (r *redisLab) sample(w *workloads.Workload) (*workloads.Workload, string, string) {
	c := r.cfg
	if w.Name == "many-users" {
		return nil, "", fmt.Sprintf("accuracy on Redis not measured on many-users: its point is its population (%d users), and a sample of a few would be another workload; Redis at scale is the memory run's", w.Params.Users)
	}
	sw := sample(w, c.Redis.Users, c.Redis.Simulated)
	switch n := len(sw.Arrivals); {
	case n == 0:
		return nil, "", fmt.Sprintf("the sample decided on Redis (the first %d users over the first %v) has no requests", c.Redis.Users, c.Redis.Simulated)
	case n > redisMaxSample:
		return nil, "", fmt.Sprintf("the sample decided on Redis (the first %d users over the first %v) has %d requests, more than the %d the lab sends Redis", c.Redis.Users, c.Redis.Simulated, n, redisMaxSample)
	}
	return sw, fmt.Sprintf("Rows kept in Redis decide a sample of each workload, its first %d users (attackers, on the boundary attack) over its first %v, a round trip to the server a request; "+
		"their allocations per decision are over 500 requests.", c.Redis.Users, c.Redis.Simulated), ""
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
