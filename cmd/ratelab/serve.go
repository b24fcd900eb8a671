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

	ratelab serve --algo ALGO --limit LIMIT [flags]
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

	ratelab serve --algo gcra --limit "5/s burst 10"
	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/
	ratelab serve --config ratelab.yaml --key ip --trusted-proxies 10.0.0.0/8

Flags:
`

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	cfg, err := f.serverConfig(fs)
	if err != nil {
		return badUsage(fs, fmt.Errorf("serve: %w", err))
	}
	cfg.Log = log.New(stderr, "ratelab serve: ", 0)
	if cfg.Backend == "redis" || cfg.File != "" {
		// go-redis writes its own lines for each failed dial; the limiter
		// reports Redis's failures through its errors (and the breaker),
		// so they are dropped.
		redis.SetLogger(quietRedis{})
	}
	s, err := server.New(cfg)
	switch {
	case errors.Is(err, server.ErrNoRedis):
		return fmt.Errorf("serve: %w (--redis-url)", err)
	case errors.As(err, new(*config.Error)): // the file's mistake, not the flags'
		return usageError{fmt.Errorf("serve: %w", err)}
	case err != nil: // a flag's value the server refused
		return badUsage(fs, fmt.Errorf("serve: %w", err))
	}
	return serve(ctx, s, f.addr, f.metricsAddr, stdout)
}

// serveFlags are serve's flags.
type serveFlags struct {
	algoLimit
	addr, backend, redisURL, redisPrefix, fail, key, keyHeader, proxies string
	costHeader, settleHeader, echoCost, headers, metricsAddr            string
	fleet, maxKeys                                                      int
	shadow                                                              bool
}

func (f *serveFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "the address to listen on, host:port (port 0: a free one)")
	f.algoLimit.define(fs, "a configuration file of tiers and users, in place of --algo and --limit; reloaded on SIGHUP")
	fs.StringVar(&f.backend, "backend", "memory", "where limits are kept: memory or redis (with --config: the file's)")
	fs.StringVar(&f.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "the Redis server for --backend redis, as redis://[user:password@]host:port/db")
	fs.StringVar(&f.redisPrefix, "redis-prefix", "ratelab:serve:", "the prefix of every Redis key")
	fs.StringVar(&f.fail, "fail", "open", "when Redis does not decide: open (serve unmetered), closed (refuse, 503) or fallback (decide in memory at the limit / --fleet)")
	fs.IntVar(&f.fleet, "fleet", 1, "the number of servers sharing the limits, for --fail fallback")
	fs.StringVar(&f.key, "key", "header", "what requests are limited by: header (--key-header) or ip (the client's address)")
	fs.StringVar(&f.keyHeader, "key-header", "X-API-Key", "the header holding the key, for --key header")
	fs.StringVar(&f.proxies, "trusted-proxies", "", "comma-separated CIDRs or addresses of proxies whose X-Forwarded-For is believed, for --key ip")
	fs.StringVar(&f.costHeader, "cost-header", "", "a header holding a request's cost, a positive integer (absent: 1)")
	fs.StringVar(&f.settleHeader, "settle-header", "", "settle each served request at the actual cost its response reports in this header (or trailer): the cost it was decided at (--cost-header, else 1) is an estimate")
	fs.StringVar(&f.echoCost, "echo-cost", "", "the actual cost the echo reports in --settle-header: a number, or random (0 to twice the estimate); a request's ?actual=N reports N")
	fs.StringVar(&f.headers, "headers", "all", "the rate-limit header fields sent: all, legacy (X-RateLimit-*), draft (RateLimit-Policy, RateLimit) or none")
	fs.BoolVar(&f.shadow, "shadow", false, "shadow mode: decide and send the headers, but deny nothing")
	fs.IntVar(&f.maxKeys, "max-keys", 1_000_000, "the most keys the limits keep in memory (0: no cap); past it, a new key makes the limiter forget the key closest to a full quota, whose next request starts fresh")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at /metrics on this address, host:port, apart from the limited one (empty: none)")
}

// serverConfig is the server configuration the flags of fs give, checked
// together.
func (f *serveFlags) serverConfig(fs *flag.FlagSet) (server.Config, error) {
	set := given(fs)
	cfg := server.Config{File: f.config, RedisPrefix: f.redisPrefix, CostHeader: f.costHeader, SettleHeader: f.settleHeader,
		EchoCost: f.echoCost, Shadow: f.shadow, MaxKeys: f.maxKeys}
	var err error
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("no arguments, got %q", fs.Arg(0))
	case f.echoCost != "" && f.settleHeader == "":
		return cfg, errors.New("--echo-cost is the cost the echo reports in --settle-header: give both")
	case f.maxKeys < 0:
		return cfg, fmt.Errorf("--max-keys %d: want 0 (no cap) or more", f.maxKeys)
	case f.backend != "memory" && f.backend != "redis":
		return cfg, fmt.Errorf("--backend %q: want memory or redis", f.backend)
	}
	if cfg.Algorithm, cfg.Limit, err = f.check(set); err != nil {
		return cfg, err
	}
	if f.config == "" || set["backend"] {
		cfg.Backend = f.backend
	}
	if f.config == "" && f.backend == "memory" {
		for _, name := range []string{"redis-url", "redis-prefix", "fail", "fleet"} {
			if set[name] {
				return cfg, fmt.Errorf("--%s is for --backend redis", name)
			}
		}
	}
	for _, check := range []func(*server.Config, map[string]bool) error{f.failure, f.keys, f.fields} {
		if err := check(&cfg, set); err != nil {
			return cfg, err
		}
	}
	return cfg, redisURLs(&cfg, f.redisURL)
}

// failure sets what cfg does when Redis does not decide, from --fail and
// --fleet.
func (f *serveFlags) failure(cfg *server.Config, _ map[string]bool) error {
	switch f.fail {
	case "open":
	case "closed":
		cfg.FailClosed = true
	case "fallback":
		if f.fleet < 1 {
			return fmt.Errorf("--fleet %d: want at least 1", f.fleet)
		}
		cfg.Fallback = f.fleet
	default:
		return fmt.Errorf("--fail %q: want open, closed or fallback", f.fail)
	}
	return nil
}

// keys sets what cfg limits requests by, from --key, --key-header and
// --trusted-proxies.
func (f *serveFlags) keys(cfg *server.Config, set map[string]bool) error {
	switch f.key {
	case "header":
		cfg.KeyHeader = f.keyHeader
		if set["trusted-proxies"] {
			return errors.New("--trusted-proxies is for --key ip")
		}
	case "ip":
		cfg.ClientIP = true
		if set["key-header"] {
			return errors.New("--key-header is for --key header")
		}
		if f.proxies != "" {
			cfg.TrustedProxies = strings.Split(f.proxies, ",")
		}
	default:
		return fmt.Errorf("--key %q: want header or ip", f.key)
	}
	return nil
}

// fields sets the header fields cfg sends, from --headers.
func (f *serveFlags) fields(cfg *server.Config, _ map[string]bool) error {
	h, ok := map[string]httplimit.Headers{"all": httplimit.AllHeaders, "legacy": httplimit.LegacyHeaders, "draft": httplimit.DraftHeaders, "none": httplimit.NoHeaders}[f.headers]
	if !ok {
		return fmt.Errorf("--headers %q: want all, legacy, draft or none", f.headers)
	}
	cfg.Headers = h
	return nil
}

// serve runs s on addr, and its metrics on metricsAddr if any, until ctx
// is done or SIGINT or SIGTERM comes; SIGHUP reloads its configuration.
func serve(ctx context.Context, s *server.Server, addr, metricsAddr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close()
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(stdout, "ratelab serve: listening on http://%s\n", ln.Addr())
	if metricsAddr != "" {
		mln, err := net.Listen("tcp", metricsAddr)
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
			return fmt.Errorf("--redis-url (Sentinels): %w", err)
		}
		cfg.Sentinel = opt
		return nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	cfg.Redis = opt
	return nil
}
