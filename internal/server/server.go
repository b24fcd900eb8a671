// Package server is ratelab's HTTP server: a tiny JSON API behind the
// httplimit middleware, to try a limiter against with curl, or to drive
// with a load generator (the lab starts one in process on a free loopback
// port).
//
// Every request, whatever its method and path, is decided by the limiter.
// A denied one gets httplimit's 429 and its problem body. A served one
// gets 200 and one JSON object that echoes the decision:
//
//	{"key":"alice","n":1,"allowed":true,"limit":10,"remaining":9,"retry_after":0,"reset_after":0.1,"tier":"free"}
//
// (see Echo for the fields), with the rate-limit header fields httplimit
// writes.
//
// The limits are one algorithm and limit for every key (Config.Algorithm
// and Config.Limit), or a
// configuration file of tiers, users and overrides (Config.File, package
// config), which Reload reads again without losing the quotas of tiers
// that did not change. They are kept in memory, or in Redis (Config.Backend),
// where a fleet of servers shares them.
//
// A Server is safe for concurrent use. Serve it on a listener of your own
// (Serve, then Shutdown), or let Run do both and reload on a signal.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Config configures a Server. Exactly one of Limit (with Algorithm) and
// File gives the limits.
type Config struct {
	// Algorithm and Limit are the one limit of every key, when File is
	// empty.
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// File is a configuration file (package config): the algorithm, the
	// tiers and who is in which; each key is a user.
	File string

	// Backend keeps the limits: "memory" or "redis". Empty means the
	// file's backend, or memory; when both are given they must agree.
	Backend string
	// Redis is the Redis server of a Redis backend (its Addr, DB,
	// password); nil means 127.0.0.1:6379, database 0. The server sets
	// its own timeouts on a copy: context deadlines honoured, no retries,
	// and no wait for a pooled connection longer than RedisTimeout.
	Redis *redis.Options
	// Sentinel, when set, names a master watched by Redis Sentinels in
	// place of Redis: the client asks them where the master is, and
	// follows it when they promote a replica (go-redis's failover client,
	// with the same timeouts).
	Sentinel *redis.FailoverOptions
	// RedisPrefix starts every Redis key; empty means "ratelab:serve:".
	RedisPrefix string
	// RedisTimeout bounds every decision on Redis; zero means 250ms.
	RedisTimeout time.Duration
	// FailClosed refuses requests (503) when Redis does not decide;
	// false, the default, serves them unmetered.
	FailClosed bool
	// Fallback, when positive, decides them in memory instead, at each
	// limit divided by Fallback, the servers sharing it.
	Fallback int

	// KeyHeader is the header requests are keyed by; empty means
	// X-API-Key. A request without it is refused (400).
	KeyHeader string
	// ClientIP keys requests by the client's address instead, behind
	// TrustedProxies (CIDRs or addresses; none by default), whose
	// X-Forwarded-For alone is believed (see httplimit.ClientIP).
	ClientIP       bool
	TrustedProxies []string
	// CostHeader, when set, is a header holding a request's cost, a
	// positive integer; a request without it costs 1, and one with a
	// malformed cost is refused (400).
	CostHeader string
	// SettleHeader, when set, is the response header (or trailer) that
	// says what a served request really cost: the cost it was decided at
	// (CostHeader, else 1) is then an estimate, reserved, and settled at
	// the actual cost once the request is answered (httplimit.WithSettle).
	SettleHeader string
	// EchoCost is what the echo reports as a served request's actual
	// cost, in SettleHeader: "" nothing (the estimate stands), a number, or
	// "random" (uniform from 0 to twice the estimate). A request's query
	// parameter actual=N reports N instead, for trying a settle with curl.
	EchoCost string
	// Headers are the rate-limit header fields sent; the zero value sends
	// none (httplimit.AllHeaders is what the command sends by default).
	Headers httplimit.Headers
	// Shadow decides and sends headers but serves every request.
	Shadow bool

	// MaxKeys caps the keys the limits keep in memory (limiters.
	// WithMaxKeys); zero means no cap. At the cap a new key makes the
	// limiter forget the key closest to a full quota, whose next request
	// starts fresh: an attacker who sends a new key with every request
	// costs bounded memory, and the keys it pushes out a little accuracy.
	// (On Redis, keys expire with their windows: the server holds none.)
	MaxKeys int

	// Clock is the time of limits in memory; nil means the real time.
	// (Redis uses its own clock.)
	Clock limiters.Clock
	// ShutdownTimeout bounds Run's graceful shutdown; zero means 5s.
	ShutdownTimeout time.Duration
	// Log gets a line for each reload Run makes and for its shutdown;
	// nil means none.
	Log *log.Logger
}

// Echo is a decision as ratelab writes it in JSON: the body of a served
// request, and a line of ratelab replay (harness.Replay). It holds the key
// and cost the request was decided for and the decision, times in
// seconds. RetryAfter is null when the request could never be admitted
// (its cost is above the limit: shadow mode serves it). Tier is the key's
// tier under a configuration file, absent for a user with an override or
// when the limits are one for every key.
type Echo struct {
	// T is the request's time in a replay, from the trace's start; the
	// server's echo has none.
	T          *float64 `json:"t,omitempty"`
	Key        string   `json:"key"`
	N          int      `json:"n"`
	Allowed    bool     `json:"allowed"`
	Limit      int      `json:"limit"`
	Remaining  int      `json:"remaining"`
	RetryAfter *float64 `json:"retry_after"`
	ResetAfter float64  `json:"reset_after"`
	Tier       string   `json:"tier,omitempty"`
	// DeniedBy is, in a replay that explains, the name of the limit that
	// denied the request.
	DeniedBy string `json:"denied_by,omitempty"`
	// Unmetered is true when the limiter did not decide and its failure
	// policy served the request unmetered (fail open); the decision's
	// fields are then zero (why is the server's log's business, not the
	// client's).
	Unmetered bool `json:"unmetered,omitempty"`
	// Actual is the request's actual cost, for a settle: the one the echo
	// reported (see Config.EchoCost), or the one a replayed trace's line
	// gave; absent when there is none.
	Actual *int `json:"actual,omitempty"`
}

// EchoOf is the echo of d, the decision of a request for key at cost n.
func EchoOf(key string, n int, d limiters.Decision) Echo {
	e := Echo{Key: key, N: n, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter.Seconds()}
	if d.RetryAfter != limiters.Never {
		ra := d.RetryAfter.Seconds()
		e.RetryAfter = &ra
	}
	return e
}

// ErrNoRedis reports that the Redis server of a Redis backend did not
// answer PING when the Server was made.
var ErrNoRedis = errors.New("server: no answer from Redis")

// Server serves the echo API behind a limiter.
type Server struct {
	cfg     Config
	backend string
	lim     limiters.Limiter // what decides
	tiers   *tiers.Limiter   // lim, under a configuration file; nil for one limit
	rdb     *redis.Client    // the Redis backend's client, nil in memory
	mw      *httplimit.Middleware
	metrics *metrics     // fed by the middleware's hooks (Metrics)
	limited http.Handler // the echo behind mw
	srv     *http.Server

	reload    sync.Mutex // orders Reloads
	closeOnce sync.Once
}

// New returns a Server as cfg says. For a Redis backend it connects and
// checks that Redis answers (ErrNoRedis if not); errors in the
// configuration file are *config.Error, naming the file and the line.
func New(cfg Config) (*Server, error) {
	if cfg.File == "" {
		if err := cfg.Limit.Validate(cfg.Algorithm); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	} else if cfg.Limit != (limiters.Limit{}) {
		return nil, errors.New("server: a limit and a file: the limits are one or the other")
	}
	if cfg.RedisPrefix == "" {
		cfg.RedisPrefix = "ratelab:serve:"
	}
	if cfg.RedisTimeout == 0 {
		cfg.RedisTimeout = 250 * time.Millisecond
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	if cfg.EchoCost != "" {
		if cfg.SettleHeader == "" {
			return nil, errors.New("server: the echo reports its cost in the settle header: set SettleHeader")
		}
		if n, err := strconv.Atoi(cfg.EchoCost); cfg.EchoCost != "random" && (err != nil || n < 0) {
			return nil, fmt.Errorf("server: echo cost %q: want a number, 0 or more, or random", cfg.EchoCost)
		}
	}
	s := &Server{cfg: cfg}
	var file *config.Config
	if cfg.File != "" {
		c, err := config.Load(cfg.File)
		if err != nil {
			return nil, err
		}
		if cfg.Backend != "" && cfg.Backend != c.Backend {
			return nil, fmt.Errorf("server: backend %s, but %s says %s", cfg.Backend, cfg.File, c.Backend)
		}
		s.backend, file = c.Backend, c
	} else {
		s.backend = cfg.Backend
		if s.backend == "" {
			s.backend = "memory"
		}
	}
	opts, err := s.middlewareOptions()
	if err != nil {
		return nil, err
	}
	switch s.backend {
	case "memory":
		err = s.inMemory(file)
	case "redis":
		err = s.inRedis(file)
	default:
		err = fmt.Errorf("server: backend %q: want memory or redis", s.backend)
	}
	if err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s)
	if s.mw, err = httplimit.New(s.lim, opts...); err != nil {
		s.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.limited = s.mw.Wrap(http.HandlerFunc(s.echo))
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          cfg.Log,
	}
	return s, nil
}

// inMemory builds the limiter in memory: the one limit, or the file's
// tiers.
func (s *Server) inMemory(file *config.Config) error {
	var opts []limiters.Option
	if s.cfg.Clock != nil {
		opts = append(opts, limiters.WithClock(s.cfg.Clock))
	}
	if s.cfg.MaxKeys > 0 {
		opts = append(opts, limiters.WithMaxKeys(s.cfg.MaxKeys))
	}
	if file != nil {
		l, err := tiers.New(file.Tiers, opts...)
		if err != nil {
			return &config.Error{Path: s.cfg.File, Err: err}
		}
		s.lim, s.tiers = l, l
		return nil
	}
	l, err := composite.New(s.cfg.Algorithm, []limiters.Limit{s.cfg.Limit}, opts...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.lim = l
	return nil
}

// inRedis connects to Redis, checks that it answers, and builds the
// limiter there.
func (s *Server) inRedis(file *config.Config) error {
	s.rdb = s.redisClient()
	ctx, cancel := context.WithTimeout(context.Background(), max(2*time.Second, s.cfg.RedisTimeout))
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.rdb.Close()
		where := "at " + s.rdb.Options().Addr
		if s.cfg.Sentinel != nil {
			where = fmt.Sprintf("(master %q of the Sentinels at %s)", s.cfg.Sentinel.MasterName, strings.Join(s.cfg.Sentinel.SentinelAddrs, ", "))
		}
		return fmt.Errorf("%w %s: %w", ErrNoRedis, where, err)
	}
	// The failure policy, set here once: open, closed, or a share in
	// memory; and a breaker: an outage costs five timeouts, then none
	// until a probe a second later. Every call Redis did not answer is
	// counted.
	mode := redislimit.FailOpen
	if s.cfg.FailClosed {
		mode = redislimit.FailClosed
	}
	opts := []redislimit.Option{redislimit.WithTimeout(s.cfg.RedisTimeout),
		redislimit.WithFailureMode(mode), redislimit.WithBreaker(5, time.Second),
		redislimit.WithErrorHook(func(err error) { s.metrics.unavailable(s, err) })}
	if s.cfg.Fallback > 0 {
		opts = append(opts, redislimit.WithFallback(s.cfg.Fallback))
	}
	var err error
	if file != nil {
		var l *tiers.Limiter
		if l, err = tiers.NewWith(file.Tiers, s.redisGroups(opts)); err == nil {
			s.lim, s.tiers = l, l
		} else {
			err = &config.Error{Path: s.cfg.File, Err: err}
		}
	} else {
		var l *redislimit.Limiter
		opts = append(opts, redislimit.WithPrefix(s.cfg.RedisPrefix))
		if l, err = redislimit.New(s.rdb, s.cfg.Algorithm, []limiters.Limit{s.cfg.Limit}, opts...); err == nil {
			s.lim = l
		} else {
			err = fmt.Errorf("server: %w", err)
		}
	}
	if err != nil {
		s.rdb.Close()
	}
	return err
}

// redisClient is the client of Redis, or of the master the Sentinels
// name, with the server's timeouts: a decision's deadline bounds its
// round trip and its wait for a connection, with no retry and one dial,
// since more (five dials 100ms apart) would outlive it.
func (s *Server) redisClient() *redis.Client {
	if s.cfg.Sentinel != nil {
		o := *s.cfg.Sentinel
		o.ContextTimeoutEnabled, o.PoolTimeout, o.MaxRetries, o.DialerRetries = true, s.cfg.RedisTimeout, -1, 1
		return redis.NewFailoverClient(&o)
	}
	opt := &redis.Options{Addr: "127.0.0.1:6379"}
	if s.cfg.Redis != nil {
		o := *s.cfg.Redis
		opt = &o
	}
	opt.ContextTimeoutEnabled, opt.PoolTimeout, opt.MaxRetries, opt.DialerRetries = true, s.cfg.RedisTimeout, -1, 1
	return redis.NewClient(opt)
}

// redisGroups builds each tier and each override on Redis, its keys under
// a prefix of its own ("tier:NAME:", "user:NAME:" after RedisPrefix), so
// that two tiers with the same limits never share a user's quota, as in
// memory.
func (s *Server) redisGroups(opts []redislimit.Option) tiers.Builder {
	return func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ")
		p := s.cfg.RedisPrefix + kind + ":" + braces.Replace(who) + ":"
		return redislimit.New(s.rdb, a, limits, append(slices.Clip(opts), redislimit.WithPrefix(p))...)
	}
}

// braces escapes what a Redis key prefix may not hold: braces, which would
// move the keys' hash tag.
var braces = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// middlewareOptions are the httplimit options cfg asks for, with hooks
// that hand each decision to the echo.
func (s *Server) middlewareOptions() ([]httplimit.Option, error) {
	c := s.cfg
	var key httplimit.KeyFunc
	var err error
	switch {
	case c.ClientIP && c.KeyHeader != "":
		return nil, errors.New("server: a key header and the client IP: requests are keyed by one")
	case c.ClientIP:
		key, err = httplimit.ClientIP(httplimit.IPConfig{TrustedProxies: c.TrustedProxies})
	case len(c.TrustedProxies) > 0:
		return nil, errors.New("server: trusted proxies are for keying by client IP")
	case c.KeyHeader == "":
		key, err = httplimit.HeaderKey("X-API-Key")
	default:
		key, err = httplimit.HeaderKey(c.KeyHeader)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	opts := []httplimit.Option{
		httplimit.WithKey(keyed(key)),
		httplimit.WithHeaders(c.Headers),
		httplimit.WithHooks(httplimit.Hooks{
			Allowed: func(r *http.Request, key string, d limiters.Decision) {
				decided(r, key, d)
				s.metrics.decided(s, key, "allowed")
			},
			Denied: func(r *http.Request, key string, d limiters.Decision) {
				decided(r, key, d) // in shadow mode, served
				s.metrics.decided(s, key, "denied")
			},
			Error: func(r *http.Request, err error) {
				if sl := slotOf(r); sl != nil {
					sl.err = err
				}
				s.metrics.failed(err)
			},
			Latency: func(_ *http.Request, took time.Duration) { s.metrics.took(took) },
		}),
	}
	if c.Shadow {
		opts = append(opts, httplimit.WithShadow())
	}
	if c.CostHeader != "" {
		cost, err := costHeader(c.CostHeader)
		if err != nil {
			return nil, err
		}
		opts = append(opts, httplimit.WithCost(cost))
	}
	if c.SettleHeader != "" {
		opts = append(opts, httplimit.WithSettle(c.SettleHeader))
	}
	return opts, nil
}

// costHeader prices a request by the header called name: 1 without it.
func costHeader(name string) (httplimit.CostFunc, error) {
	if _, err := httplimit.HeaderKey(name); err != nil { // the same check of the name
		return nil, fmt.Errorf("server: cost header: %w", err)
	}
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (int, error) {
		n := 1
		if v := r.Header.Get(canon); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				return 0, fmt.Errorf("%s %q: want a positive integer", canon, v)
			}
		}
		if sl := slotOf(r); sl != nil {
			sl.n = n
		}
		return n, nil
	}, nil
}

// keyed is key, recording each request's key in its slot for the echo,
// decided or not.
func keyed(key httplimit.KeyFunc) httplimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		k, err := key(r)
		if sl := slotOf(r); sl != nil && err == nil {
			sl.key = k
		}
		return k, err
	}
}

// slot carries a request's decision from the middleware's hooks to the
// echo, through the request's context.
type slot struct {
	key     string
	n       int
	d       limiters.Decision
	decided bool
	err     error
}

type slotKey struct{}

func slotOf(r *http.Request) *slot {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	return sl
}

func decided(r *http.Request, key string, d limiters.Decision) {
	if sl := slotOf(r); sl != nil {
		sl.key, sl.d, sl.decided = key, d, true
	}
}

// ServeHTTP serves r: decided by the limiter, and echoed if served.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sl := &slot{n: 1}
	s.limited.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
}

// echo answers a request the middleware served with its decision.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	sl := slotOf(r)
	e := Echo{Key: sl.key, N: sl.n}
	switch {
	case sl.decided:
		e = EchoOf(sl.key, sl.n, sl.d)
		if s.tiers != nil {
			// The tier now: a reload between the decision and this
			// line may have moved the user.
			e.Tier = s.tiers.TierOf(sl.key)
		}
	case sl.err != nil:
		e.Allowed, e.Unmetered = true, true
		zero := 0.0
		e.RetryAfter = &zero
	}
	if s.cfg.SettleHeader != "" && e.Allowed {
		actual, err := s.actual(r, sl.n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if actual >= 0 {
			e.Actual = &actual
			w.Header().Set(s.cfg.SettleHeader, strconv.Itoa(actual))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(e)
}

// actual is the actual cost the echo reports for r, estimated at n: the
// request's actual=N, else as Config.EchoCost says; -1 for none.
func (s *Server) actual(r *http.Request, n int) (int, error) {
	if v := r.URL.Query().Get("actual"); v != "" {
		a, err := strconv.Atoi(v)
		if err != nil || a < 0 {
			return -1, fmt.Errorf("actual=%q: want a number, 0 or more", v)
		}
		return a, nil
	}
	switch s.cfg.EchoCost {
	case "":
		return -1, nil
	case "random":
		return rand.IntN(2*n + 1), nil
	}
	return strconv.Atoi(s.cfg.EchoCost) // checked by New
}

// Stats returns the middleware's counts: shadow denials and failures.
func (s *Server) Stats() httplimit.Stats { return s.mw.Stats() }

// Reload reads the configuration file again and puts it in force,
// keeping every user's quota under the tiers and overrides whose limits
// did not change. When the file is unreadable or invalid, or names
// another backend, the configuration in force stays, and the error says
// why (a *config.Error names the file and the line).
func (s *Server) Reload() error {
	if s.tiers == nil {
		return errors.New("server: no configuration file to reload: the limits are the command line's")
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	c, err := config.Load(s.cfg.File)
	if err != nil {
		return err
	}
	if c.Backend != s.backend {
		return &config.Error{Path: s.cfg.File, Field: "backend", Err: fmt.Errorf("%s, but the server keeps its limits in %s: restart it to move them", c.Backend, s.backend)}
	}
	if err := s.tiers.Reload(c.Tiers); err != nil {
		return &config.Error{Path: s.cfg.File, Err: err}
	}
	return nil
}

// Serve serves on ln until Shutdown, and then returns nil; or returns
// the error that stopped it.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the server gracefully: it stops accepting connections,
// waits for the requests in flight to finish, or ctx to end (then it
// drops their connections and returns ctx's error), and closes the
// limiter and the Redis client.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
		err = fmt.Errorf("server: requests still running at shutdown, their connections closed: %w", err)
	}
	s.Close()
	return err
}

// Close closes the server at once, its connections and listeners, and the
// limiter and the Redis client. Shutdown is the graceful way.
func (s *Server) Close() error {
	if s.srv != nil {
		s.srv.Close()
	}
	s.closeOnce.Do(func() {
		if s.lim != nil {
			s.lim.Close()
		}
		if s.rdb != nil {
			s.rdb.Close()
		}
	})
	return nil
}

// Run serves on ln until ctx ends, reloading the configuration at each
// value received from reload (a channel signal.Notify fills with SIGHUP;
// nil for none) and logging one line for each; then it shuts down
// gracefully within Config.ShutdownTimeout. It returns Shutdown's error,
// or the error that stopped Serve.
func (s *Server) Run(ctx context.Context, ln net.Listener, reload <-chan os.Signal) error {
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	for {
		select {
		case <-reload:
			if err := s.Reload(); err != nil {
				s.cfg.Log.Printf("reload failed, the configuration in force stays: %v", err)
			} else {
				s.cfg.Log.Printf("reloaded %s", s.cfg.File)
			}
		case err := <-served:
			s.Close()
			return err
		case <-ctx.Done():
			s.cfg.Log.Printf("shutting down: finishing the requests in flight (at most %v)", s.cfg.ShutdownTimeout)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
			defer cancel()
			err := s.Shutdown(sctx)
			if serr := <-served; err == nil {
				err = serr
			}
			return err
		}
	}
}
