package redislimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// ownCluster starts a Redis Cluster of three masters of the test's own on
// loopback and returns their addresses. The servers stop with the test.
func ownCluster(t *testing.T) []string {
	t.Helper()
	c, err := redisfault.NewCluster(t.TempDir(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.Addrs
}

// TestCluster decides through a Redis Cluster of three masters: several
// limits at once (keys that must share a slot, or Redis says CROSSSLOT),
// alone and batched (pipelines, routed key by key), with the same
// decisions as in memory for users spread over every master; then ResetAll
// finds the keys on every master, and Walk reports them, one key at a
// time (the masters are scanned in turn).
func TestCluster(t *testing.T) {
	addrs := ownCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, PoolTimeout: time.Second})
	defer c.Close()
	limits := []limiters.Limit{
		{Name: "second", N: 3, Per: time.Second},
		{Name: "minute", N: 10, Per: time.Minute},
	}
	ctx := context.Background()
	for _, batched := range []bool{false, true} {
		opts := []redislimit.Option{redislimit.WithPrefix(fmt.Sprintf("cluster-%v:", batched)), redislimit.WithTimeout(2 * time.Second)}
		if batched {
			opts = append(opts, redislimit.WithBatching(redislimit.Batching{}))
		}
		for _, a := range limiters.Algorithms() {
			red, err := redislimit.New(c, a, limits, opts...)
			if err != nil {
				t.Fatal(err)
			}
			mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			at := time.Unix(1_800_000_000, 0)
			for i := range 200 {
				user := fmt.Sprint("user-", i%40) // 40 users: every master holds some
				at = at.Add(37 * time.Millisecond)
				want, _ := mem.Decide(ctx, limiters.Request{Key: user, N: 1, At: at})
				got, err := red.Decide(ctx, limiters.Request{Key: user, N: 1, At: at})
				if err != nil || !same(got, want) {
					t.Fatalf("%s, batched %v, decision %d for %s: %s (%v), memory %s", a, batched, i, user, show(got), err, show(want))
				}
			}
			walked := map[string]int{}
			if err := red.Walk(ctx, func(key string, _ limiters.Decision) bool {
				walked[key]++ // a map written by fn: the race detector sees fn called at once from two masters
				return true
			}); err != nil || len(walked) != 40 {
				t.Fatalf("%s: Walk found %d users, want 40 (%v)", a, len(walked), err)
			}
			if err := red.ResetAll(ctx); err != nil {
				t.Fatal(err)
			}
			var left atomic.Int64
			err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				n, err := m.DBSize(ctx).Result()
				left.Add(n)
				return err
			})
			if err != nil || left.Load() != 0 {
				t.Fatalf("%s: %d keys left on the masters after ResetAll (%v)", a, left.Load(), err)
			}
			red.Close()
			mem.Close()
		}
	}
}
