package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/tiers"
)

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
