package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// BenchmarkRedis measures one decision on Redis with 50 goroutines over
// 10,000 keys, for ratelab's GCRA, alone and batched into pipelines, and
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
		b.Run(tc.name, func(b *testing.B) {
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(25) // 50 goroutines on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				local := make([]time.Duration, 0, 1024)
				i := 0
				for pb.Next() {
					start := time.Now()
					if err := tc.fn(ctx, keys[i%len(keys)]); err != nil {
						b.Error(err)
						return
					}
					local = append(local, time.Since(start))
					i += 7919
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
