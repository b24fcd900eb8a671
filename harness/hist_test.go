package harness

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var h, a, b hist
	var all []int64
	for i := range 200000 {
		v := int64(rng.ExpFloat64() * 5000) // a long tail around 5µs
		if i%1000 == 0 {
			v *= 1000
		}
		all = append(all, v)
		h.record(v)
		if i%2 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(&b)
	slices.Sort(all)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		want := float64(all[max(int(math.Ceil(q*float64(len(all))))-1, 0)])
		for name, x := range map[string]*hist{"one": &h, "merged": &a} {
			got := x.quantile(q)
			if math.Abs(got-want) > 0.008*want+1 {
				t.Errorf("%s: quantile(%v) = %v, want %v within 0.8%%", name, q, got, want)
			}
		}
	}
	if h.max != all[len(all)-1] || a.max != h.max {
		t.Errorf("max = %d and %d, want %d", h.max, a.max, all[len(all)-1])
	}
	// Exact below 256, and every index in range up to the largest value.
	for v := int64(0); v < 256; v++ {
		if histValue(histIndex(v)) != float64(v) {
			t.Fatalf("%d is not exact", v)
		}
	}
	if i := histIndex(math.MaxInt64); i >= histBuckets {
		t.Fatalf("index %d for MaxInt64 out of %d", i, histBuckets)
	}
}
