package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
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
			r := limiters.Rate{N: 100, Per: 1e9}
			s, _ := r.Spec(a)
			l, err := New(c, s, WithPrefix(prefix(b, c)))
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
		opts []Option
	}{
		{"cache=on", nil},
		{"cache=off", []Option{WithDenialCache(-1)}},
		{"lease", []Option{WithLeases(100*time.Millisecond, 0)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 10, Rate: 0.001}},
				append([]Option{WithPrefix(prefix(b, c))}, tc.opts...)...)
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
	s := limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 100, Rate: 100}}
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	for _, v := range []struct {
		name string
		opts []Option
	}{
		{"plain", []Option{WithDenialCache(-1)}},
		{"cached", nil},
		{"lease", []Option{WithLeases(100*time.Millisecond, 0)}},
	} {
		for _, routing := range []string{"random", "sticky"} {
			b.Run(v.name+"/"+routing, func(b *testing.B) {
				pre := prefix(b, c)
				var fleet []*Limiter
				for range 4 {
					l, err := New(c, s, append([]Option{WithPrefix(pre)}, v.opts...)...)
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
					d, _, err := fleet[p].DecideAt(context.Background(), keys[k], at, 1)
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
				s, _ := limiters.Rate{N: 1000, Per: time.Second}.Spec(a)
				l, err := New(c, s, WithPrefix(prefix(b, c)))
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
						if r, err = l.Reserve(ctx, k, 4); err == nil && r.Allowed {
							_, err = l.Settle(ctx, r, 2)
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
