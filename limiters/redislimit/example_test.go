package redislimit_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// A limit of 2 a second for each user, kept in Redis, shared by every
// process that uses the same prefix. The decisions here are made at an
// explicit time, which makes them exact; leave Request.At zero to decide
// at the server's clock.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379",
		ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	l, err := redislimit.New(client, limiters.GCRA, []limiters.Limit{limiters.PerSecond(2)},
		redislimit.WithPrefix("ratelab-example:"), redislimit.WithFailureMode(redislimit.FailClosed))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	l.Reset(ctx, "alice") // what an earlier run left
	defer l.Reset(ctx, "alice")

	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for _, at := range []time.Time{t0, t0, t0, t0.Add(500 * time.Millisecond)} {
		d, err := l.Decide(ctx, limiters.Request{Key: "alice", N: 1, At: at})
		if err != nil { // Redis did not answer: d is the failure mode's
			log.Print(err)
		}
		fmt.Printf("+%v: allowed %v, remaining %d, retry after %v\n", at.Sub(t0), d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// +0s: allowed true, remaining 1, retry after 0s
	// +0s: allowed true, remaining 0, retry after 0s
	// +0s: allowed false, remaining 0, retry after 500ms
	// +500ms: allowed true, remaining 0, retry after 0s
}

// Tiers in Redis: tiers.NewWith builds each tier and each override with
// redislimit.New, under a prefix of its own, so that two tiers with the
// same limits never share a user's quota.
func Example_tiers() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379",
		ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	braces := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D") // a prefix holds no braces
	var groups []*redislimit.Limiter
	l, err := tiers.NewWith(tiers.Config{
		Algorithm: limiters.FixedWindow,
		Tiers: map[string][]limiters.Limit{
			"free":    {{Name: "minute", N: 2, Per: time.Minute}},
			"premium": {{Name: "minute", N: 100, Per: time.Minute}},
		},
		Default: "free",
		Users:   map[string]string{"bob": "premium"},
	}, func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ") // "tier free", "user alice"
		g, err := redislimit.New(client, a, limits, redislimit.WithPrefix("ratelab-example:"+kind+":"+braces.Replace(who)+":"))
		if err == nil {
			groups = append(groups, g)
		}
		return g, err
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, g := range groups {
		g.ResetAll(ctx) // what an earlier run left
		defer g.ResetAll(ctx)
	}

	t0 := time.Date(2026, 3, 14, 15, 9, 0, 0, time.UTC)
	for _, user := range []string{"alice", "alice", "alice", "bob"} {
		d, err := l.Decide(ctx, limiters.Request{Key: user, N: 1, At: t0})
		if err != nil {
			log.Print(err)
		}
		fmt.Printf("%s (%s): allowed %v, %d of %d left\n", user, d.Tier(), d.Allowed, d.Remaining, d.Limit)
	}
	// Output:
	// alice (free): allowed true, 1 of 2 left
	// alice (free): allowed true, 0 of 2 left
	// alice (free): allowed false, 0 of 2 left
	// bob (premium): allowed true, 99 of 100 left
}
