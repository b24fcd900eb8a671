package tiers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// BenchmarkDecide: what the tier lookup adds to the composite's decision,
// for a user assigned to a tier, one in the default tier, and one with an
// override, on one goroutine and on all of them.
func BenchmarkDecide(b *testing.B) {
	lim := func(s string) []limiters.Limit {
		r, _ := limiters.ParseLimit(s)
		return []limiters.Limit{r}
	}
	users := map[string]string{}
	for i := range 10000 {
		users[fmt.Sprint("user", i)] = "pro"
	}
	l, err := tiers.New(tiers.Config{
		Algorithm: limiters.GCRA,
		Tiers:     map[string][]limiters.Limit{"free": lim("1000000000/s"), "pro": lim("1000000000/s")},
		Default:   "free", Users: users,
		Overrides: map[string][]limiters.Limit{"olga": lim("1000000000/s")},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	plain, err := composite.New(limiters.GCRA, lim("1000000000/s")) // what decides for user1
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	ctx := context.Background()
	at := time.Unix(1e9, 0)
	for _, user := range []string{"user1", "stranger", "olga"} {
		b.Run("via=tiers/user="+user, func(b *testing.B) {
			for b.Loop() {
				l.Decide(ctx, limiters.Request{Key: user, N: 1, At: at})
			}
		})
		b.Run("via=tiers/user="+user+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Decide(ctx, limiters.Request{Key: user, N: 1, At: at})
				}
			})
		})
	}
	b.Run("via=composite", func(b *testing.B) {
		for b.Loop() {
			plain.Decide(ctx, limiters.Request{Key: "user1", N: 1, At: at})
		}
	})
	b.Run("via=composite/parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				plain.Decide(ctx, limiters.Request{Key: "user1", N: 1, At: at})
			}
		})
	})
}
