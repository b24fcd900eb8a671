package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

const serveUsage = `Usage:

	ratelab serve --algo ALGO --limit N --window W [flags]
	ratelab serve --algo ALGO --capacity C --rate R [flags]
	ratelab serve --config FILE [flags]

Serve runs an HTTP server that rate-limits every request (any method, any
path) with one limiter, by the X-API-Key header by default, and answers a
served request with 200 and the decision as JSON:

	{"key":"alice","n":1,"allowed":true,"limit":10,"remaining":9,"retry_after":0,"reset_after":0.1}

with the rate-limit header fields (X-RateLimit-*, RateLimit-Policy,
RateLimit). A denied request gets 429, Retry-After and a problem body; a
request without a key, 400. Times are in seconds; "tier" is the key's tier
under --config; "n" the request's cost (--cost-header).

The limits are --algo and its limit, as for ratelab replay, or the tiers of
a configuration file (--config): then each key is a user, and SIGHUP reads
the file again, keeping the quotas of the tiers that did not change; an
invalid file is reported (with its line) and the configuration in force
stays. Each reload prints one line to standard error.

The server listens on --addr, loopback by default, and prints the address
it listens on (with --addr 127.0.0.1:0, a free port). SIGINT or SIGTERM
stops it gracefully: no new connections, the requests in flight finished
(within 5s), then the limiter and the Redis client closed. --metrics-addr
serves Prometheus metrics on a listener of their own: ratelab_decisions_total
(by result and tier), ratelab_decision_errors_total (by kind),
ratelab_fallback_decisions_total, ratelab_decision_duration_seconds and,
on Redis, ratelab_redis_breaker_open.

--backend redis keeps the limits in the Redis server at --redis-url, under
--redis-prefix, so that several servers share them; the server stops at
once if Redis does not answer. A URL with master_name names Sentinels
(redis://SENTINEL:26379?master_name=NAME&addr=SENTINEL2:26379): the server
decides on the master they name, and follows them when they promote a
replica. While Redis is down, --fail open serves requests unmetered,
--fail closed refuses them with 503, and --fail fallback decides them in
memory at the limit divided by --fleet, the number of servers sharing
it. After 5 decisions in a row that Redis did not make, a circuit breaker
stops asking it for a second, then probes: an outage costs 5 timeouts,
not one a request.

Examples:

	ratelab serve --algo gcra --capacity 10 --rate 5
	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/
	ratelab serve --config ratelab.yaml --key ip --trusted-proxies 10.0.0.0/8

Flags:
`

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on, host:port (port 0: a free one)")
	algo := fs.String("algo", "", "the algorithm: fixed-window, sliding-log, sliding-counter, token-bucket, leaky-bucket or gcra")
	limit := fs.Int("limit", 0, "N, requests per window (window algorithms)")
	window := fs.Duration("window", 0, "W, the window: 500ms, 60s, 1m, 1h (window algorithms)")
	capacity := fs.Int("capacity", 0, "C, the largest burst (bucket algorithms)")
	rate := fs.Float64("rate", 0, "R, tokens per second, fractions allowed (bucket algorithms)")
	configFile := fs.String("config", "", "a configuration file of tiers and users, in place of --algo and its limit; reloaded on SIGHUP")
	backend := fs.String("backend", "memory", "where limits are kept: memory or redis (with --config: the file's)")
	redisURL := fs.String("redis-url", "redis://127.0.0.1:6379/0", "the Redis server for --backend redis, as redis://[user:password@]host:port/db")
	redisPrefix := fs.String("redis-prefix", "ratelab:serve:", "the prefix of every Redis key")
	fail := fs.String("fail", "open", "when Redis does not decide: open (serve unmetered), closed (refuse, 503) or fallback (decide in memory at the limit / --fleet)")
	fleet := fs.Int("fleet", 1, "the number of servers sharing the limits, for --fail fallback")
	key := fs.String("key", "header", "what requests are limited by: header (--key-header) or ip (the client's address)")
	keyHeader := fs.String("key-header", "X-API-Key", "the header holding the key, for --key header")
	proxies := fs.String("trusted-proxies", "", "comma-separated CIDRs or addresses of proxies whose X-Forwarded-For is believed, for --key ip")
	costHeader := fs.String("cost-header", "", "a header holding a request's cost, a positive integer (absent: 1)")
	settleHeader := fs.String("settle-header", "", "settle each served request at the actual cost its response reports in this header (or trailer): the cost it was decided at (--cost-header, else 1) is an estimate")
	echoCost := fs.String("echo-cost", "", "the actual cost the echo reports in --settle-header: a number, or random (0 to twice the estimate); a request's ?actual=N reports N")
	headers := fs.String("headers", "all", "the rate-limit header fields sent: all, legacy (X-RateLimit-*), draft (RateLimit-Policy, RateLimit) or none")
	shadow := fs.Bool("shadow", false, "shadow mode: decide and send the headers, but deny nothing")
	maxKeys := fs.Int("max-keys", 1_000_000, "the most keys the limits keep in memory (0: no cap); past it, a new key makes the limiter forget the key closest to a full quota, whose next request starts fresh")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at /metrics on this address, host:port, apart from the limited one (empty: none)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	set := given(fs)
	bad := func(err error) error { return badUsage(fs, err) }
	if fs.NArg() > 0 {
		return bad(fmt.Errorf("serve: no arguments, got %q", fs.Arg(0)))
	}

	if *echoCost != "" && *settleHeader == "" {
		return bad(errors.New("serve: --echo-cost is the cost the echo reports in --settle-header: give both"))
	}
	if *maxKeys < 0 {
		return bad(fmt.Errorf("serve: --max-keys %d: want 0 (no cap) or more", *maxKeys))
	}
	cfg := server.Config{
		File: *configFile, RedisPrefix: *redisPrefix, CostHeader: *costHeader, SettleHeader: *settleHeader, EchoCost: *echoCost, Shadow: *shadow,
		MaxKeys: *maxKeys, Log: log.New(stderr, "ratelab serve: ", 0),
	}
	if *configFile != "" {
		for _, f := range []string{"algo", "limit", "window", "capacity", "rate"} {
			if set[f] {
				return bad(fmt.Errorf("serve: --config gives the algorithm and the limits; --%s is not for it", f))
			}
		}
		if set["backend"] {
			cfg.Backend = *backend
		}
	} else {
		a, lim, err := limitFlags("serve", *algo, set, *limit, *window, *capacity, *rate)
		if err != nil {
			return bad(err)
		}
		cfg.Algorithm, cfg.Limit, cfg.Backend = a, lim, *backend
		if *backend == "memory" {
			for _, f := range []string{"redis-url", "redis-prefix", "fail", "fleet"} {
				if set[f] {
					return bad(fmt.Errorf("serve: --%s is for --backend redis", f))
				}
			}
		}
	}
	switch *backend {
	case "memory", "redis":
	default:
		return bad(fmt.Errorf("serve: --backend %q: want memory or redis", *backend))
	}
	switch *fail {
	case "open":
	case "closed":
		cfg.FailClosed = true
	case "fallback":
		if *fleet < 1 {
			return bad(fmt.Errorf("serve: --fleet %d: want at least 1", *fleet))
		}
		cfg.Fallback = *fleet
	default:
		return bad(fmt.Errorf("serve: --fail %q: want open, closed or fallback", *fail))
	}
	if *backend == "redis" || *configFile != "" {
		// go-redis writes its own lines for each failed dial; the limiter
		// reports Redis's failures through its errors (and the breaker),
		// so they are dropped.
		redis.SetLogger(quietRedis{})
	}
	switch *key {
	case "header":
		cfg.KeyHeader = *keyHeader
		if set["trusted-proxies"] {
			return bad(errors.New("serve: --trusted-proxies is for --key ip"))
		}
	case "ip":
		cfg.ClientIP = true
		if set["key-header"] {
			return bad(errors.New("serve: --key-header is for --key header"))
		}
		if *proxies != "" {
			cfg.TrustedProxies = strings.Split(*proxies, ",")
		}
	default:
		return bad(fmt.Errorf("serve: --key %q: want header or ip", *key))
	}
	h, ok := map[string]httplimit.Headers{"all": httplimit.AllHeaders, "legacy": httplimit.LegacyHeaders, "draft": httplimit.DraftHeaders, "none": httplimit.NoHeaders}[*headers]
	if !ok {
		return bad(fmt.Errorf("serve: --headers %q: want all, legacy, draft or none", *headers))
	}
	cfg.Headers = h
	if err := redisURLs(&cfg, *redisURL); err != nil {
		return bad(err)
	}

	s, err := server.New(cfg)
	switch {
	case errors.Is(err, server.ErrNoRedis):
		return fmt.Errorf("serve: %w (--redis-url)", err)
	case errors.As(err, new(*config.Error)): // the file's mistake, not the flags'
		return usageError{fmt.Errorf("serve: %w", err)}
	case err != nil: // a flag's value the server refused
		return bad(fmt.Errorf("serve: %w", err))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		s.Close()
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(stdout, "ratelab serve: listening on http://%s\n", ln.Addr())
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			ln.Close()
			s.Close()
			return fmt.Errorf("serve: --metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.Metrics())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go ms.Serve(mln)
		defer ms.Close()
		fmt.Fprintf(stdout, "ratelab serve: metrics on http://%s/metrics\n", mln.Addr())
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := s.Run(ctx, ln, hup); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// redisURLs sets cfg's Redis from --redis-url: a server, or with
// master_name the Sentinels watching one.
func redisURLs(cfg *server.Config, url string) error {
	if strings.Contains(url, "master_name=") {
		opt, err := redis.ParseFailoverURL(url)
		if err != nil {
			return fmt.Errorf("serve: --redis-url (Sentinels): %w", err)
		}
		cfg.Sentinel = opt
		return nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("serve: --redis-url: %w", err)
	}
	cfg.Redis = opt
	return nil
}
