package harness

import (
	"context"
	"errors"
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
// retry-after; and GCRA and the token bucket with leases (approximate,
// WithLeases), which admit from units leased for a lease time.
const (
	redisFleetPlainName   = "gcra fleet (plain)"
	redisFleetBatchedName = "gcra fleet (batched)"
	redisFleetCachedName  = "gcra fleet (cached)"
	redisFleetLeaseName   = "gcra fleet (lease)"
	redisFleetLeaseTBName = "token-bucket fleet (lease)"
)

// leaseTime is the lease time of the lease fleets, as a fraction of the
// lab's window: they admit at most leaseTime·R more than the exact limiter
// in any interval.
const leaseTime = 10 // a tenth of the window

// fleets returns the fleets on r's server.
func (r *redisLab) fleets() []Subject {
	off := redislimit.WithDenialCache(-1)
	var out []Subject
	for _, v := range []struct {
		name  string
		a     limiters.Algorithm
		opts  []redislimit.Option
		lease bool // leases of a LeaseTime-th of the window
	}{
		{redisFleetPlainName, limiters.GCRA, []redislimit.Option{off}, false},
		{redisFleetBatchedName, limiters.GCRA, []redislimit.Option{off, redislimit.WithBatching(redislimit.Batching{})}, false},
		{redisFleetCachedName, limiters.GCRA, nil, false},
		{redisFleetLeaseName, limiters.GCRA, nil, true},
		{redisFleetLeaseTBName, limiters.TokenBucket, nil, true},
	} {
		out = append(out, Subject{Name: v.name, Library: "ratelab", Algorithm: v.a,
			Fleet: &fleetMaker{
				New: func(w limiters.Limit, n int) ([]process, func(), error) {
					opts := v.opts
					if v.lease {
						opts = []redislimit.Option{redislimit.WithLeases(w.Per/leaseTime, 0)}
					}
					return r.fleet(v.a, w, n, opts)
				},
				ServerCPU: r.serverCPU,
				Lease:     v.lease,
			}})
	}
	return out
}

// fleet makes n processes of a at w with opts, each with a client of its
// own, sharing a key prefix.
func (r *redisLab) fleet(a limiters.Algorithm, w limiters.Limit, n int, opts []redislimit.Option) ([]process, func(), error) {
	prefix := r.newPrefix()
	procs := make([]process, 0, n)
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
		l, err := redislimit.New(c, a, []limiters.Limit{w}, append([]redislimit.Option{redislimit.WithPrefix(prefix),
			redislimit.WithTimeout(redisTimeout), redislimit.WithFailureMode(redislimit.FailClosed)}, opts...)...)
		if err != nil {
			c.Close()
			stop()
			return nil, nil, err
		}
		procs = append(procs, redisProcess{recorded{l, r}, l, c})
	}
	return procs, stop, nil
}

// redisProcess is a process of a fleet: a limiter and its client, its
// errors recorded, at the server's clock and at explicit times.
type redisProcess struct {
	recorded
	l *redislimit.Limiter
	c *redis.Client
}

func (p redisProcess) RoundTrips() int64 { return p.l.Counts().RoundTrips }

// Close closes the process's limiter and its client.
func (p redisProcess) Close() error {
	return errors.Join(p.l.Close(), p.c.Close())
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
