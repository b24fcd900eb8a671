package composite

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// BenchmarkDecide: what each limit adds to a decision on one key that is
// admitted (limits far above the rate) and on one that is denied.
func BenchmarkDecide(b *testing.B) {
	all := []string{"1000000/s", "100000000/min", "1000000000/h"}
	for _, a := range []limiters.Algorithm{limiters.SlidingCounter, limiters.GCRA} {
		for k := 0; k <= len(all); k++ {
			name := fmt.Sprintf("algo=%s/limits=%d", a, k)
			var decide func(at time.Time) limiters.Decision
			if k == 0 { // the plain limiter, for comparison
				r, _ := limiters.ParseRate(all[0])
				spec, _ := r.Spec(a)
				l, err := memory.New(spec)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				decide = func(at time.Time) limiters.Decision { return l.AllowAt("key", at, 1) }
			} else {
				var limits []Limit
				for _, s := range all[:k] {
					r, _ := limiters.ParseRate(s)
					limits = append(limits, Limit{Rate: r})
				}
				l, err := New(a, limits)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				decide = func(at time.Time) limiters.Decision { return l.AllowAt("key", at, 1) }
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
