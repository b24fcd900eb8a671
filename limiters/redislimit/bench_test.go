package redislimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// BenchmarkAllowN is one decision at the server's clock, one goroutine,
// over 1,000 keys: the client's cost (allocations) and a round trip.
func BenchmarkAllowN(b *testing.B) {
	c := server(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%011d", i)
	}
	for _, a := range limiters.Algorithms() {
		b.Run(string(a), func(b *testing.B) {
			l, err := redislimit.New(c, a, []limiters.Limit{{N: 100, Per: time.Second}}, redislimit.WithPrefix(prefix(b, c)))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.AllowN(ctx, keys[i%len(keys)], 1); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkHotKey is a key hammered past its limit by every goroutine
// (GOMAXPROCS of them), with the denial cache and without: with it, the
// denials after the first are made in the process.
func BenchmarkHotKey(b *testing.B) {
	c := server(b)
	for _, tc := range []struct {
		name string
		opts []redislimit.Option
	}{
		{"cache=on", nil},
		{"cache=off", []redislimit.Option{redislimit.WithDenialCache(-1)}},
		{"lease", []redislimit.Option{redislimit.WithLeases(100*time.Millisecond, 0)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 1, Per: 1000 * time.Second, Burst: 10}},
				append([]redislimit.Option{redislimit.WithPrefix(prefix(b, c))}, tc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for range 10 {
				l.AllowN(ctx, "hot", 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := l.AllowN(ctx, "hot", 1); d.Allowed || err != nil {
						b.Errorf("the hot key: %+v, %v: want denied", d, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(l.Counts().RoundTrips)/float64(b.N+10), "round-trips/decision")
		})
	}
}

// BenchmarkOverload is a fleet of four processes (Limiters, one client)
// deciding 16 keys, each asked ten times its rate (100 a second, a
// capacity of 100), at explicit times, each request sent to a process at
// random or every request of a key to one (sticky): the round trips a
// decision and an admission of each kind of fleet, and the share
// admitted (the exact limiter admits a tenth, and the capacity at first).
func BenchmarkOverload(b *testing.B) {
	c := server(b)
	limits := []limiters.Limit{{N: 100, Per: time.Second}}
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	for _, v := range []struct {
		name string
		opts []redislimit.Option
	}{
		{"plain", []redislimit.Option{redislimit.WithDenialCache(-1)}},
		{"cached", nil},
		{"lease", []redislimit.Option{redislimit.WithLeases(100*time.Millisecond, 0)}},
	} {
		for _, routing := range []string{"random", "sticky"} {
			b.Run(v.name+"/"+routing, func(b *testing.B) {
				pre := prefix(b, c)
				var fleet []*redislimit.Limiter
				for range 4 {
					l, err := redislimit.New(c, limiters.GCRA, limits, append([]redislimit.Option{redislimit.WithPrefix(pre)}, v.opts...)...)
					if err != nil {
						b.Fatal(err)
					}
					fleet = append(fleet, l)
				}
				r := rand.New(rand.NewPCG(1, 2))
				t0 := time.Unix(1_800_000_000, 0)
				admitted := 0
				i := 0
				for b.Loop() {
					k := i % len(keys)
					p := k % len(fleet)
					if routing == "random" {
						p = r.IntN(len(fleet))
					}
					// Each key every millisecond: ten times 100 a second.
					at := t0.Add(time.Duration(i/len(keys))*time.Millisecond + time.Duration(k)*time.Microsecond)
					d, err := fleet[p].Decide(context.Background(), limiters.Request{Key: keys[k], N: 1, At: at})
					if err != nil {
						b.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
					i++
				}
				trips := int64(0)
				for _, l := range fleet {
					trips += l.Counts().RoundTrips
				}
				b.ReportMetric(float64(trips)/float64(i), "round-trips/decision")
				b.ReportMetric(float64(trips)/float64(max(admitted, 1)), "round-trips/admitted")
				b.ReportMetric(float64(admitted)/float64(i), "admitted/decision")
			})
		}
	}
}

// BenchmarkSettle is what settling costs on Redis beside a plain decision,
// per algorithm, one goroutine on 1,000 keys, each request of cost 4:
// op=decide decides it; op=reserve-settle reserves it and settles it at 2
// (two round trips); op=decide-twice decides twice, the floor of two round
// trips for the same work.
func BenchmarkSettle(b *testing.B) {
	c := server(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%011d", i)
	}
	for _, a := range limiters.Algorithms() {
		for _, op := range []string{"decide", "reserve-settle", "decide-twice"} {
			b.Run(fmt.Sprintf("alg=%s/op=%s", a, op), func(b *testing.B) {
				l, err := redislimit.New(c, a, []limiters.Limit{{N: 1000, Per: time.Second}}, redislimit.WithPrefix(prefix(b, c)))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					k := keys[i%len(keys)]
					i++
					switch op {
					case "decide":
						_, err = l.AllowN(ctx, k, 4)
					case "decide-twice":
						if _, err = l.AllowN(ctx, k, 4); err == nil {
							_, err = l.AllowN(ctx, k, 1)
						}
					default:
						var r limiters.Reservation
						if r, err = l.Reserve(ctx, limiters.Request{Key: k, N: 4}); err == nil && r.Allowed() {
							_, err = l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 2})
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// instant is a client whose every script is answered at once with reply,
// without a server: what a decision costs the client, round trip aside.
type instant struct {
	*redis.Client
	reply any
}

func (i instant) Process(ctx context.Context, cmd redis.Cmder) error {
	cmd.(*redis.Cmd).SetVal(i.reply)
	return nil
}

// BenchmarkClientCost is one decision's cost in the client alone (the
// command built, sent to a client that answers at once, the reply read):
// what the limiter adds to a round trip.
func BenchmarkClientCost(b *testing.B) {
	for _, tc := range []struct {
		name  string
		a     limiters.Algorithm
		reply any
	}{
		{"fixed-window", limiters.FixedWindow, "1 0 100 99 0 1000"},
		{"gcra", limiters.GCRA, int64(10000000)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
			l, err := redislimit.New(instant{c, tc.reply}, tc.a, []limiters.Limit{{N: 100, Per: time.Second}}, redislimit.WithDenialCache(-1))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if d, err := l.AllowN(ctx, "user-00000000001", 1); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
	}
}
