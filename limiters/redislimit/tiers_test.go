package redislimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// A *redislimit.Limiter is what a tier is made of.
var _ tiers.Group = (*redislimit.Limiter)(nil)

// braces escapes what a key prefix may not hold, as keys are escaped.
var braces = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// TestTiers checks tiers kept in Redis, built by tiers.NewWith with
// redislimit.New (which replaces the Builder adapter redislimit.Tiers):
// two tiers with the same limits keep a user's quota apart (moving tiers
// gives the new tier's quota, as in memory), an override decides alone,
// and every key has one hash tag, the user's, whatever braces the names
// hold.
func TestTiers(t *testing.T) {
	c := server(t)
	p := prefix(t, c)
	same := []limiters.Limit{{Name: "burst", N: 2, Per: time.Minute}}
	l, err := tiers.NewWith(tiers.Config{
		Algorithm: limiters.FixedWindow,
		Tiers:     map[string][]limiters.Limit{"free": same, "trial {x}": same},
		Default:   "free",
		Overrides: map[string][]limiters.Limit{"o{1}": {{N: 1, Per: time.Minute}}},
	}, func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ")
		return redislimit.New(c, a, limits, patient, redislimit.WithPrefix(p+kind+":"+braces.Replace(who)+":"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	at := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		d, err := l.Decide(ctx, limiters.Request{Key: "u", N: 1, At: at})
		by, denied := d.DeniedBy()
		if err != nil || d.Allowed != (i < 2) || d.Tier() != "free" || denied != (i == 2) || denied && by.Name != "burst" {
			t.Fatalf("request %d in free: %+v %q %q %v", i+1, d, d.Tier(), by.Name, err)
		}
	}
	if err := l.SetTier("u", "trial {x}"); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Decide(ctx, limiters.Request{Key: "u", N: 1, At: at}); err != nil || !d.Allowed || d.Remaining != 1 || d.Tier() != "trial {x}" {
		t.Errorf("first request after moving to another tier with the same limits: %+v %q %v; want a fresh quota", d, d.Tier(), err)
	}
	if d, err := l.AllowN(ctx, "o{1}", 1); err != nil || !d.Allowed || d.Limit != 1 {
		t.Errorf("the override: %+v %v", d, err)
	}
	var keys []string
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
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
