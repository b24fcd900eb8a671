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
				s := spec{Algorithm: a, Window: window{Limit: 1000, Length: time.Second},
					Bucket: bucket{Capacity: 1000, Rate: 1000}}
				l, err := newMemory(s, limiters.WithSweepInterval(-1))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
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
					if op == "allow" {
						if l.AllowAt(k, now, 4).Allowed {
							admitted++
						}
						continue
					}
					if r := l.ReserveAt(k, now, 4); r.Allowed() {
						admitted++
						l.SettleAt(r, now, actual)
					}
				}
				b.ReportMetric(float64(admitted)/float64(max(i, 1)), "admitted/op")
			})
		}
	}
}
