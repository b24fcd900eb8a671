package tiers

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// BenchmarkDecide: what the tier lookup adds to the composite's decision,
// for a user assigned to a tier, one in the default tier, and one with an
// override, on one goroutine and on all of them.
func BenchmarkDecide(b *testing.B) {
	lim := func(s string) []composite.Limit {
		r, _ := limiters.ParseRate(s)
		return []composite.Limit{{Rate: r}}
	}
	users := map[string]string{}
	for i := range 10000 {
		users[fmt.Sprint("user", i)] = "pro"
	}
	l, err := New(Config{
		Algorithm: limiters.GCRA,
		Tiers:     map[string][]composite.Limit{"free": lim("1000000000/s"), "pro": lim("1000000000/s")},
		Default:   "free", Users: users,
		Overrides: map[string][]composite.Limit{"olga": lim("1000000000/s")},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	plain := l.now.Load().place("user1").lim
	at := time.Unix(1e9, 0)
	for _, user := range []string{"user1", "stranger", "olga"} {
		b.Run("via=tiers/user="+user, func(b *testing.B) {
			for b.Loop() {
				l.AllowAt(user, at, 1)
			}
		})
		b.Run("via=tiers/user="+user+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.AllowAt(user, at, 1)
				}
			})
		})
	}
	b.Run("via=composite", func(b *testing.B) {
		for b.Loop() {
			plain.AllowAt("user1", at, 1)
		}
	})
	b.Run("via=composite/parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				plain.AllowAt("user1", at, 1)
			}
		})
	})
}
