package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// BenchmarkRedis measures one decision on Redis with 1 and 50 goroutines
// over 10,000 keys, for ratelab's GCRA, alone and batched into pipelines, and
// go-redis/redis_rate (GCRA too), at the same limit (100/s, burst 100).
// It reports decisions/s, p50 and p99.
func BenchmarkRedis(b *testing.B) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		b.Fatalf("no Redis at %s: %v", addr, err)
	}
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%011d", i)
	}
	ours, err := redislimit.New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 100, Rate: 100}},
		redislimit.WithPrefix("ratelab-bench:"))
	if err != nil {
		b.Fatal(err)
	}
	defer ours.ResetAll(context.Background())
	batched, err := redislimit.New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 100, Rate: 100}},
		redislimit.WithPrefix("ratelab-bench-batched:"), redislimit.WithBatching(redislimit.Batching{}))
	if err != nil {
		b.Fatal(err)
	}
	defer batched.ResetAll(context.Background())
	defer batched.Close()
	peer := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second}
	for _, tc := range []struct {
		name string
		fn   func(ctx context.Context, key string) error
	}{
		{"ratelab-gcra", func(ctx context.Context, key string) error { _, err := ours.AllowN(ctx, key, 1); return err }},
		{"ratelab-gcra-batched", func(ctx context.Context, key string) error { _, err := batched.AllowN(ctx, key, 1); return err }},
		{"redis_rate", func(ctx context.Context, key string) error { _, err := peer.Allow(ctx, key, limit); return err }},
	} {
		for _, g := range []int{1, 50} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", tc.name, g), func(b *testing.B) {
				lat := make([]time.Duration, b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				for w := range g {
					wg.Go(func() {
						ctx := context.Background()
						k := w * 997 // each goroutine its own walk through the keys
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							start := time.Now()
							if err := tc.fn(ctx, keys[k%len(keys)]); err != nil {
								b.Error(err)
								return
							}
							lat[i] = time.Since(start)
							k += 7919
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}
