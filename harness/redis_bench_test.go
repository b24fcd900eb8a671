package harness

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// BenchmarkRedis measures one decision on Redis with 1 and 50 goroutines
// over 10,000 keys, for ratelab's GCRA, alone, batched into pipelines and
// packed 32 keys a hash, and go-redis/redis_rate (GCRA too), at the same
// limit (100/s, burst 100). Beside them, the floors: EVALSHA of a script
// that returns 0 at once, on the same keys and client, which no limiter
// that makes one round trip a decision can beat, and the same gathered
// into batches of up to 64, two in flight, which no batching limiter can;
// and a script of what every limiter must do at least (TIME, GET, SET
// with an expiry), alone and batched.
// It reports decisions/s, p50 and p99, and the server's CPU a decision
// (INFO cpu, user and system, before and after).
func BenchmarkRedis(b *testing.B) {
	c := redistest.Client(b, &redis.Options{ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%011d", i)
	}
	ours, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{limiters.PerSecond(100)},
		redislimit.WithPrefix("ratelab-bench:"))
	if err != nil {
		b.Fatal(err)
	}
	defer ours.ResetAll(context.Background())
	batched, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{limiters.PerSecond(100)},
		redislimit.WithPrefix("ratelab-bench-batched:"), redislimit.WithBatching(redislimit.Batching{}))
	if err != nil {
		b.Fatal(err)
	}
	packed, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{limiters.PerSecond(100)},
		redislimit.WithPrefix("ratelab-bench-packed:"), redislimit.WithPacking(10_000/32))
	if err != nil {
		b.Fatal(err)
	}
	defer packed.ResetAll(context.Background())
	defer batched.ResetAll(context.Background())
	defer batched.Close()
	floor, err := c.ScriptLoad(context.Background(), "return 0").Result()
	if err != nil {
		b.Fatal(err)
	}
	// What every limiter's script must do at least: read the clock, read
	// the key, write it back with an expiry.
	least, err := c.ScriptLoad(context.Background(), `local t = redis.call("TIME")
local v = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], t[1], "PX", 2000)
return 0`).Result()
	if err != nil {
		b.Fatal(err)
	}
	leastBatch, err := c.ScriptLoad(context.Background(), `local t = redis.call("TIME")
for i = 1, #KEYS do
  local v = redis.call("GET", KEYS[i])
  redis.call("SET", KEYS[i], t[1], "PX", 2000)
end
return 0`).Result()
	if err != nil {
		b.Fatal(err)
	}
	batchedLeast := newNoopBatcher(&redisLab{c: c}, leastBatch)
	defer batchedLeast.Close()
	defer func() {
		for _, k := range keys {
			c.Del(context.Background(), "ratelab-bench-least:"+k)
		}
	}()
	batchedFloor := newNoopBatcher(&redisLab{c: c}, floor)
	defer batchedFloor.Close()
	peer := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second}
	for _, tc := range []struct {
		name string
		fn   func(ctx context.Context, key string) error
	}{
		{"ratelab-gcra", func(ctx context.Context, key string) error { _, err := ours.AllowN(ctx, key, 1); return err }},
		{"ratelab-gcra-batched", func(ctx context.Context, key string) error { _, err := batched.AllowN(ctx, key, 1); return err }},
		{"ratelab-gcra-packed", func(ctx context.Context, key string) error { _, err := packed.AllowN(ctx, key, 1); return err }},
		{"redis_rate", func(ctx context.Context, key string) error { _, err := peer.Allow(ctx, key, limit); return err }},
		{"floor-evalsha", func(ctx context.Context, key string) error { return c.EvalSha(ctx, floor, []string{key}).Err() }},
		{"floor-time-get-set", func(ctx context.Context, key string) error {
			return c.EvalSha(ctx, least, []string{"ratelab-bench-least:" + key}).Err()
		}},
		{"floor-batched", func(ctx context.Context, key string) error { _, err := batchedFloor.AllowN(ctx, key, 1); return err }},
		{"floor-time-get-set-batched", func(ctx context.Context, key string) error {
			_, err := batchedLeast.AllowN(ctx, "ratelab-bench-least:"+key, 1)
			return err
		}},
	} {
		for _, g := range []int{1, 50} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", tc.name, g), func(b *testing.B) {
				lat := make([]time.Duration, b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				server := &redisLab{c: c}
				cpu0, err := server.serverCPU(context.Background())
				if err != nil {
					b.Fatal(err)
				}
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
				cpu1, err := server.serverCPU(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				// The server's CPU (user and system) a decision, its idle
				// housekeeping included: the client shares these cores.
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "server-ns/decision")
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// BenchmarkRedisMemory measures Redis memory per key, the key included,
// at 1,000,000 users (of 16 bytes) for ratelab's algorithms and for
// go-redis/redis_rate (whose keys are shorter: "rate:user-00000000001", 21
// bytes, against ratelab's 51, "ratelab:{user-00000000001}:gcra:100@" and
// the period in ns), on a redis-server of its own (so that nothing else
// moves used_memory): the difference in used_memory before and after
// one decision for each key, divided by the keys. Run it alone, once:
//
//	go test ./harness -run '^$' -bench RedisMemory -benchtime 1x
func BenchmarkRedisMemory(b *testing.B) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Fatalf("this benchmark starts a redis-server of its own: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", b.TempDir())
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port), ContextTimeoutEnabled: true, PoolTimeout: 2 * time.Second, PoolSize: 64})
	defer c.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); c.Ping(ctx).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the redis-server of the benchmark did not start")
		}
	}
	used := func() float64 {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		b.Fatal("INFO memory has no used_memory")
		return 0
	}
	const keys = 1_000_000
	fill := func(decide func(key string) error) float64 {
		before := used()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < keys; i = next.Add(1) - 1 {
					if err := decide(fmt.Sprintf("user-%011d", i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		per := (used() - before) / keys
		if err := c.FlushDB(ctx).Err(); err != nil { // the benchmark's own server
			b.Fatal(err)
		}
		return per
	}
	// 100 a day: one request leaves every key to live for hours, well past
	// the end of the fill, for ratelab and redis_rate alike.
	r := limiters.Limit{N: 100, Per: 24 * time.Hour}
	for _, a := range limiters.Algorithms() {
		l, err := redislimit.New(c, a, []limiters.Limit{r}, redislimit.WithBatching(redislimit.Batching{}), redislimit.WithTimeout(2*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(fill(func(key string) error { _, err := l.AllowN(ctx, key, 1); return err }), "B/key-"+string(a))
		l.Close()
	}
	// GCRA packed, 32 keys a hash.
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{r}, redislimit.WithPacking(keys/32), redislimit.WithTimeout(2*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(fill(func(key string) error { _, err := l.AllowN(ctx, key, 1); return err }), "B/key-gcra-packed")
	peer := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 100, Burst: 100, Period: 24 * time.Hour}
	b.ReportMetric(fill(func(key string) error { _, err := peer.Allow(ctx, key, limit); return err }), "B/key-redis_rate")
}
