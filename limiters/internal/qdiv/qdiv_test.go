package qdiv

import (
	"math/rand/v2"
	"testing"
)

func TestDivExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	divisors := []int64{1, 2, 3, 7, 1000, 333333333, 1e9, 60e9, 86400e9, 1<<40 + 1}
	for _, d := range divisors {
		v := New(d)
		check := func(x int64) {
			if x < 0 {
				return
			}
			if got, want := v.Div(x), x/d; got != want {
				t.Fatalf("Div(%d) by %d = %d, want %d", x, d, got, want)
			}
		}
		// Around exact multiples, where a rounded reciprocal goes wrong.
		for _, q := range []int64{0, 1, 2, 3, 1 << 20, 1<<31 - 1, 1 << 31} {
			if q > (1<<62)/d {
				continue
			}
			for dx := int64(-2); dx <= 2; dx++ {
				check(q*d + dx)
			}
		}
		for range 100000 {
			q := rand.Int64N(1 << 31)
			if q > (1<<62)/d {
				q = rng.Int64N((1<<62)/d + 1)
			}
			check(q*d + rng.Int64N(d))
		}
	}
}

func FuzzDiv(f *testing.F) {
	f.Add(int64(5), int64(3))
	f.Add(int64(1<<62-1), int64(1<<31))
	f.Fuzz(func(t *testing.T, x, d int64) {
		if x < 0 || x >= 1<<62 || d <= 0 || x/d >= 1<<52 {
			return
		}
		if got, want := New(d).Div(x), x/d; got != want {
			t.Fatalf("Div(%d) by %d = %d, want %d", x, d, got, want)
		}
	})
}

func TestFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int64{1, 3, 1000, 1e6, 1e9, 60e9} {
		v := New(d)
		for range 100000 {
			x := rng.Int64() - rng.Int64()
			want := x / d
			if x%d < 0 {
				want--
			}
			if got := v.Floor(x); got != want {
				t.Fatalf("Floor(%d) by %d = %d, want %d", x, d, got, want)
			}
		}
	}
}
