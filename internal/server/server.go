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
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
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
