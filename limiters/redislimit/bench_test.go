package redislimit

import (
	"context"
	"fmt"
	"testing"

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
	}{{"cache=on", nil}, {"cache=off", []Option{WithDenialCache(-1)}}} {
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
