package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
)

// RedisRateModule is the module and version of go-redis/redis_rate the
// lab measures: a GCRA in one Lua script on Redis, on the server's clock.
const RedisRateModule = "github.com/go-redis/redis_rate/v10 v10.0.1"

// RedisClient is what redis_rate needs of a go-redis client: its scripts
// and DEL. *redis.Client is one.
type RedisClient interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// RedisRatePrefix starts every key redis_rate writes, before the prefix
// given to NewRedisRate: redis_rate's own, which it does not let a caller
// change.
const RedisRatePrefix = "rate:"

// redisRate is go-redis/redis_rate with N per W read as its users read
// "N per W": Rate N, Burst N, Period W (redis_rate.PerSecond(N) for W =
// 1s). Its keys are RedisRatePrefix, prefix, then the caller's key.
type redisRate struct {
	l      *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
}

// NewRedisRate returns go-redis/redis_rate on c for w, its keys under
// prefix (after redis_rate's own "rate:"). It decides on the server's
// clock and takes no explicit time. A decision Redis did not make is a
// denial, with the error.
func NewRedisRate(c RedisClient, prefix string, l limiters.Limit) (limiters.Limiter, error) {
	if err := l.Validate(limiters.GCRA); err != nil {
		return nil, fmt.Errorf("redis_rate: %w", err)
	}
	return &redisRate{l: redis_rate.NewLimiter(c), limit: redis_rate.Limit{Rate: l.N, Burst: l.Quota(), Period: l.Per}, prefix: prefix}, nil
}

func (r *redisRate) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return r.Decide(ctx, limiters.Request{Key: key, N: n})
}

// Decide decides req on the server's clock: a request at an explicit time
// is an error.
func (r *redisRate) Decide(ctx context.Context, req limiters.Request) (limiters.Decision, error) {
	if !req.At.IsZero() {
		return limiters.Decision{Limit: r.limit.Burst}, errOwnClock("redis_rate")
	}
	key, n := req.Key, req.N
	res, err := r.l.AllowN(ctx, r.prefix+key, r.limit, n)
	if err != nil {
		return limiters.Decision{Limit: r.limit.Burst}, err
	}
	d := limiters.Decision{Allowed: res.Allowed > 0, Limit: r.limit.Burst, Remaining: res.Remaining, ResetAfter: res.ResetAfter}
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, time.Duration(0)) // -1 means none
	}
	return d, nil
}

func (r *redisRate) Close() error { return nil }
