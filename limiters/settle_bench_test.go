package limiters_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// BenchmarkSettle is what settling costs beside a plain decision, per
// algorithm, on 1,000 keys held, at explicit times that move on at the
// limit's rate so that most requests are admitted: op=allow decides a
// cost of 4; op=refund reserves 4 and settles at 2; op=charge reserves 4
// and settles at 6.
func BenchmarkSettle(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%011d", i)
	}
	for _, a := range limiters.Algorithms() {
		for _, op := range []string{"allow", "refund", "charge"} {
			b.Run(fmt.Sprintf("alg=%s/op=%s", a, op), func(b *testing.B) {
				l, err := newMemory(spec{Algorithm: a, Limit: limiters.PerSecond(1000)}, limiters.WithSweepInterval(-1))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx := b.Context()
				b.ReportAllocs()
				now := time.Unix(1e9, 0)
				actual := map[string]int{"refund": 2, "charge": 6}[op]
				admitted := 0
				i := 0
				for b.Loop() {
					k := keys[i%len(keys)]
					i++
					if i%len(keys) == 0 {
						now = now.Add(4 * time.Millisecond) // 4 per key a second: the limit
					}
					r := limiters.Request{Key: k, N: 4, At: now}
					if op == "allow" {
						if d, _ := l.Decide(ctx, r); d.Allowed {
							admitted++
						}
						continue
					}
					if res, _ := l.Reserve(ctx, r); res.Allowed() {
						admitted++
						l.Settle(ctx, limiters.Settlement{Reservation: res, Actual: actual, At: now})
					}
				}
				b.ReportMetric(float64(admitted)/float64(max(i, 1)), "admitted/op")
			})
		}
	}
}
