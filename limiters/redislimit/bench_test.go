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
