package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// The fleets kept in Redis: ratelab's GCRA as processes of a fleet, each
// with a client of its own, one round trip a decision (plain), gathered in
// batches (batched), and with the denial cache (cached, redislimit's
// default), which answers a denied key in the process until Redis's
// retry-after.
const (
	RedisFleetPlainName   = "gcra fleet (plain)"
	RedisFleetBatchedName = "gcra fleet (batched)"
	RedisFleetCachedName  = "gcra fleet (cached)"
)

// fleets returns the fleets on r's server.
func (r *redisLab) fleets() []Subject {
	off := redislimit.WithDenialCache(-1)
	var out []Subject
	for _, v := range []struct {
		name string
		opts []redislimit.Option
	}{
		{RedisFleetPlainName, []redislimit.Option{off}},
		{RedisFleetBatchedName, []redislimit.Option{off, redislimit.WithBatching(redislimit.Batching{})}},
		{RedisFleetCachedName, nil},
	} {
		out = append(out, Subject{Name: v.name, Library: "ratelab", Algorithm: limiters.GCRA,
			Fleet: &Fleet{New: func(w limiters.Window, n int) ([]Process, func(), error) { return r.fleet(w, n, v.opts) }, ServerCPU: r.serverCPU}})
	}
	return out
}

// fleet makes n processes of GCRA at w with opts, each with a client of
// its own, sharing a key prefix.
func (r *redisLab) fleet(w limiters.Window, n int, opts []redislimit.Option) ([]Process, func(), error) {
	prefix := r.newPrefix()
	procs := make([]Process, 0, n)
	stop := func() {
		for _, p := range procs {
			p.Close()
		}
		if err := r.sweep(context.Background(), prefix+"*"); err != nil {
			r.fail(err)
		}
	}
	for range n {
		opt := *r.c.Options()
		c := redis.NewClient(&opt)
		l, err := redislimit.New(c, Spec(limiters.GCRA, w), append([]redislimit.Option{redislimit.WithPrefix(prefix),
			redislimit.WithTimeout(redisTimeout), redislimit.WithFailureMode(redislimit.FailClosed)}, opts...)...)
		if err != nil {
			c.Close()
			stop()
			return nil, nil, err
		}
		procs = append(procs, redisProcess{l, c, r})
	}
	return procs, stop, nil
}

// redisProcess is a process of a fleet: a limiter and its client, its
// errors recorded.
type redisProcess struct {
	l *redislimit.Limiter
	c *redis.Client
	r *redisLab
}

func (p redisProcess) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	d, err := p.l.AllowN(ctx, key, n)
	if err != nil && ctx.Err() == nil {
		p.r.fail(err)
	}
	return d, err
}

func (p redisProcess) AllowAt(key string, t time.Time, n int) limiters.Decision {
	d, _, err := p.l.DecideAt(context.Background(), key, t, n)
	if err != nil {
		p.r.fail(err)
	}
	return d
}

func (p redisProcess) RoundTrips() int64 { return p.l.Counts().RoundTrips }

func (p redisProcess) Close() {
	p.l.Close()
	p.c.Close()
}

// serverCPU returns the CPU time the server has used, user and system
// (INFO cpu).
func (r *redisLab) serverCPU(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	info, err := r.c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("harness: Redis at %s: INFO cpu: %w", r.addr, err)
	}
	var total float64
	seen := 0
	for line := range strings.SplitSeq(info, "\n") {
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
				s, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("harness: Redis at %s: INFO cpu: %s%q: %w", r.addr, field, v, err)
				}
				total += s
				seen++
			}
		}
	}
	if seen != 2 {
		return 0, fmt.Errorf("harness: Redis at %s: INFO cpu has no used_cpu_sys and used_cpu_user", r.addr)
	}
	return time.Duration(total * 1e9), nil
}
