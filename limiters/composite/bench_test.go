package composite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// BenchmarkDecide: what each limit adds to a decision on one key that is
// admitted (limits far above the rate) and on one that is denied.
func BenchmarkDecide(b *testing.B) {
	all := []string{"1000000/s", "100000000/min", "1000000000/h"}
	for _, a := range []limiters.Algorithm{limiters.SlidingCounter, limiters.GCRA} {
		for k := 0; k <= len(all); k++ {
			name := fmt.Sprintf("algo=%s/limits=%d", a, k)
			var limits []limiters.Limit
			for _, s := range all[:max(k, 1)] {
				r, _ := limiters.ParseLimit(s)
				limits = append(limits, r)
			}
			var lim limiters.Limiter
			if k == 0 { // the plain limiter, for comparison
				l, err := composite.NewAlgorithm(a, limits[0])
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				lim = l
			} else {
				l, err := composite.New(a, limits)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				lim = l
			}
			ctx := context.Background()
			decide := func(at time.Time) limiters.Decision {
				d, _ := lim.Decide(ctx, limiters.Request{Key: "key", N: 1, At: at})
				return d
			}
			at := time.Unix(1e9, 0) // on across the runs b.Run makes: time never goes back
			b.Run(name, func(b *testing.B) {
				admitted := 0
				for b.Loop() {
					at = at.Add(10 * time.Microsecond) // a tenth of the tightest limit
					if decide(at).Allowed {
						admitted++
					}
				}
				if admitted != b.N {
					b.Fatalf("%d of %d admitted: the fixture should admit all", admitted, b.N)
				}
			})
		}
	}
}
