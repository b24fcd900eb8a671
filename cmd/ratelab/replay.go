package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/tiers"
	"github.com/ratelab/ratelab/workloads"
)

const replayUsage = `Usage:

	ratelab replay --algo ALGO --limit LIMIT [--backend B] [TRACE]
	ratelab replay --config FILE [--backend B] [TRACE]

Replay decides each request of a trace with one limiter and prints one JSON
object per request, in order:

	{"t":0.5,"key":"alice","n":1,"allowed":true,"limit":5,"remaining":3,"retry_after":0,"reset_after":1.5}

retry_after is how long, in seconds, until the same request would be
admitted (0 when allowed, null when never: its cost is above the limit);
reset_after is how long until the key is back to its full quota.

TRACE is a CSV file of t,key[,n[,actual[,took]]] lines, or standard input
when it is - or absent: t in seconds from the trace's start (fractions
allowed), key a user id, n a cost (default 1). Times must not decrease from
line to line. Blank lines and lines starting with # are skipped; a header
line naming the columns (t,key,n...) is allowed. Each key starts fresh the
first time it appears. A malformed line stops the replay with exit status 2
and names the line; the lines before it have been printed.

A request whose cost was known only once its response was done (an LLM
call's tokens, a download's bytes) gives it in the fourth column: n is then
the estimate it is decided at, and it is settled at its actual cost (a
refund, or a charge past the limit) took seconds later (the fifth column;
at once if absent), in time order with the lines after it; its line says
"actual".

The limit is written as a configuration file writes it: N/PERIOD, as in
--limit 100/min or --limit 5/60s, for the window algorithms
(fixed-window, sliding-log and sliding-counter: N per window); and for
the buckets (token-bucket, leaky-bucket and gcra) the rate with the burst
after it, --limit "5/s burst 10" (a burst of N when none is given).

--backend redis keeps the limits in the Redis server at --redis-url, as a
fleet would, and gives the same decisions as --backend memory. The trace's
times are passed to Redis (its clock is not used); the replay keeps its
keys under a prefix of its own and removes them when done. If Redis fails,
the replay stops with the error: it never prints a decision Redis did not
make.

With --config, the limits are the configuration file's (see the config
package: algorithm, tiers, users, overrides): each key is a user, decided
by all the limits of their tier at once, and each line also says the tier
("tier", absent for a user with limits of their own) and, for a denial,
which limit denied ("denied_by"). The file's backend (memory or redis) is
the replay's; --backend, if given, must agree with it.

Examples:

	printf '0,alice\n0,alice\n0,alice\n0.5,alice\n' |
		ratelab replay --algo token-bucket --limit "1/s burst 2"
	printf 't,key,n,actual,took\n0,alice,500,120,2\n1,alice,500,900,3\n5,alice,500,400\n' |
		ratelab replay --algo gcra --limit "10/s burst 1000"
	ratelab replay --config ratelab.yaml requests.csv

Flags:
`

func runReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var f replayFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	a, lim, err := f.check(fs)
	if err != nil {
		return badUsage(fs, fmt.Errorf("replay: %w", err))
	}
	trace := fs.Arg(0)
	if f.config != "" {
		return f.replayConfig(ctx, trace, stdin, stdout)
	}
	if f.backend == "redis" {
		return replayRedis(ctx, trace, stdin, stdout, f.redisURL, false, func(c *redis.Client, opts []redislimit.Option) (limiters.Limiter, func(context.Context) error, error) {
			l, err := redislimit.New(c, a, []limiters.Limit{lim}, opts...)
			if err != nil {
				return nil, nil, err
			}
			return l, l.ResetAll, nil
		})
	}
	l, err := composite.New(a, []limiters.Limit{lim}, limiters.WithSweepInterval(-1))
	if err != nil {
		return usageError{fmt.Errorf("replay: %w", err)}
	}
	defer l.Close()
	return replay(ctx, trace, stdin, stdout, l, false)
}

// replayFlags are replay's flags.
type replayFlags struct {
	algoLimit
	backend, redisURL string
	backendGiven      bool // --backend was given
}

func (f *replayFlags) define(fs *flag.FlagSet) {
	f.algoLimit.define(fs, "a configuration file of tiers and users, in place of --algo and --limit")
	fs.StringVar(&f.backend, "backend", "memory", "where limits are kept: memory or redis")
	fs.StringVar(&f.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "the Redis server for --backend redis, as redis://[user:password@]host:port/db")
}

// check checks the flags and arguments of fs together, and returns the
// algorithm and the limit they give (none with --config).
func (f *replayFlags) check(fs *flag.FlagSet) (limiters.Algorithm, limiters.Limit, error) {
	set := given(fs)
	f.backendGiven = set["backend"]
	switch {
	case fs.NArg() > 1:
		return "", limiters.Limit{}, fmt.Errorf("one trace at most, got %d", fs.NArg())
	case f.backend != "memory" && f.backend != "redis":
		return "", limiters.Limit{}, fmt.Errorf("--backend %q: want memory or redis", f.backend)
	case f.backend == "memory" && set["redis-url"] && f.config == "":
		return "", limiters.Limit{}, errors.New("--redis-url is for --backend redis")
	}
	return f.algoLimit.check(set)
}

// replayConfig replays the trace at path with the tiers of the
// configuration file, in memory or on Redis as the file says.
func (f *replayFlags) replayConfig(ctx context.Context, path string, stdin io.Reader, stdout io.Writer) error {
	c, err := config.Load(f.config)
	if err != nil {
		return usageError{fmt.Errorf("replay: %w", err)}
	}
	if f.backendGiven && f.backend != c.Backend {
		return usagef("replay: --backend %s, but %s says %s", f.backend, f.config, c.Backend)
	}
	if c.Backend == "redis" {
		return replayRedis(ctx, path, stdin, stdout, f.redisURL, true, func(cl *redis.Client, opts []redislimit.Option) (limiters.Limiter, func(context.Context) error, error) {
			return redisTiers(cl, c, f.config, opts)
		})
	}
	l, err := tiers.New(c.Tiers, limiters.WithSweepInterval(-1))
	if err != nil {
		return usageError{fmt.Errorf("replay: %s: %w", f.config, err)}
	}
	defer l.Close()
	return replay(ctx, path, stdin, stdout, l, true)
}

// redisTiers is the limiter of the tiers of c (read from file) on Redis
// through cl, each tier and override under a prefix of its own, as
// ratelab serve keeps them, and what removes their keys.
func redisTiers(cl *redis.Client, c *config.Config, file string, opts []redislimit.Option) (limiters.Limiter, func(context.Context) error, error) {
	var groups []*redislimit.Limiter
	l, err := tiers.NewWith(c.Tiers, func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ")
		prefix := redislimit.WithPrefix(replayPrefix(opts) + kind + ":" + braces.Replace(who) + ":")
		g, err := redislimit.New(cl, a, limits, append(slices.Clip(opts), prefix)...)
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
		return g, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	return l, func(ctx context.Context) error {
		l.Close()
		for _, g := range groups {
			if err := g.ResetAll(ctx); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// replayRedis replays the trace at path with the limiter newLimiter builds
// in the Redis server at url, with the options it is given (a key prefix
// of the replay's own, fail closed), and removes its keys when done (the
// function newLimiter returns); explain as for replay.
func replayRedis(ctx context.Context, path string, stdin io.Reader, stdout io.Writer, url string, explain bool,
	newLimiter func(*redis.Client, []redislimit.Option) (limiters.Limiter, func(context.Context) error, error)) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return usageError{fmt.Errorf("replay: --redis-url: %w", err)}
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	defer c.Close()
	var nonce [8]byte
	rand.Read(nonce[:])
	l, cleanup, err := newLimiter(c, []redislimit.Option{redislimit.WithPrefix("ratelab:replay:" + hex.EncodeToString(nonce[:]) + ":"),
		redislimit.WithFailureMode(redislimit.FailClosed), redislimit.WithTimeout(2 * time.Second)})
	if err != nil {
		return usageError{fmt.Errorf("replay: %w", err)}
	}
	redis.SetLogger(quietRedis{}) // failures are reported once, here, not by the pool too
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("replay: no answer from Redis at %s (--redis-url): %w", opt.Addr, err)
	}
	err = replay(ctx, path, stdin, stdout, l, explain)
	if rerr := cleanup(context.WithoutCancel(ctx)); rerr != nil && err == nil {
		err = fmt.Errorf("replay: removing the replay's keys from Redis: %w", rerr)
	}
	return err
}

// replayPrefix is the key prefix opts give (the last WithPrefix).
func replayPrefix(opts []redislimit.Option) string {
	var o redislimit.Options
	for _, opt := range opts {
		opt(&o)
	}
	return o.Prefix
}

// braces escapes what a Redis key prefix may not hold: braces, which would
// move the keys' hash tag.
var braces = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// replay decides the trace at path (standard input for "" or -) with l;
// explain names each line's tier and denying limit (a configuration's
// tiers).
func replay(ctx context.Context, path string, stdin io.Reader, stdout io.Writer, l limiters.Limiter, explain bool) error {
	in, name := stdin, "standard input"
	if path != "" && path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return usageError{fmt.Errorf("replay: %w", err)}
		}
		defer f.Close()
		in, name = f, path
	}
	err := harness.Replay(ctx, workloads.NewTraceReader(in), l, explain, stdout)
	var te *workloads.TraceError
	if errors.As(err, &te) {
		return usageError{fmt.Errorf("replay: %s: %w", name, err)}
	}
	if err != nil {
		return fmt.Errorf("replay: %s: %w", name, err)
	}
	return nil
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
