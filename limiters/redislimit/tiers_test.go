package redislimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// TestTiers checks tiers kept in Redis: two tiers with the same limits
// keep a user's quota apart (moving tiers gives the new tier's quota, as
// in memory), an override decides alone, and every key has one hash tag,
// the user's, whatever braces the names hold.
func TestTiers(t *testing.T) {
	c := server(t)
	p := prefix(t, c)
	same := []composite.Limit{{Name: "burst", Rate: limiters.Rate{N: 2, Per: time.Minute}}}
	l, err := tiers.NewWith(tiers.Config{
		Algorithm: limiters.FixedWindow,
		Tiers:     map[string][]composite.Limit{"free": same, "trial {x}": same},
		Default:   "free",
		Overrides: map[string][]composite.Limit{"o{1}": {{Rate: limiters.Rate{N: 1, Per: time.Minute}}}},
	}, Tiers(c, WithPrefix(p)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	at := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		d, tier, by, err := l.Explain(ctx, "u", at, 1)
		if err != nil || d.Allowed != (i < 2) || tier != "free" || (i == 2) != (by == "burst") {
			t.Fatalf("request %d in free: %+v %q %q %v", i+1, d, tier, by, err)
		}
	}
	if err := l.SetTier("u", "trial {x}"); err != nil {
		t.Fatal(err)
	}
	if d, tier, _, err := l.Explain(ctx, "u", at, 1); err != nil || !d.Allowed || d.Remaining != 1 || tier != "trial {x}" {
		t.Errorf("first request after moving to another tier with the same limits: %+v %q %v; want a fresh quota", d, tier, err)
	}
	if d, err := l.AllowN(ctx, "o{1}", 1); err != nil || !d.Allowed || d.Limit != 1 {
		t.Errorf("the override: %+v %v", d, err)
	}
	var keys []string
	iter := c.Scan(ctx, 0, glob(p)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Errorf("keys %q, want one for u in each tier and one for the override", keys)
	}
	for _, k := range keys {
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q has more than one hash tag", k)
		}
	}
}
