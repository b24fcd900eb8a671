package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// hashTag is the part of a key Redis Cluster hashes: between the first {
// and the first } after it, when that is not empty.
func hashTag(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k[i+1 : i+1+j]
		}
	}
	return k
}

// TestKeysExpire checks every algorithm's key: named by prefix, hash tag
// and limit (N/W for a window, C@T for a bucket, in ns), and living until
// its quota is full again plus the grace: never less (the sliding
// counter's lives through the next window).
func TestKeysExpire(t *testing.T) {
	c := server(t)
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			p := prefix(t, c)
			l, err := redislimit.New(c, a, []limiters.Limit{{N: 4, Per: 3 * time.Second}}, patient, redislimit.WithPrefix(p), redislimit.WithGrace(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			d, err := l.AllowN(ctx, "user", 2)
			if err != nil || !d.Allowed {
				t.Fatalf("AllowN: %+v, %v", d, err)
			}
			keys, err := c.Keys(ctx, p+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			want := p + "{user}:" + string(a) + ":4/3000000000"
			if a.IsBucket() {
				want = p + "{user}:" + string(a) + ":4@750000000"
			}
			if len(keys) != 1 || keys[0] != want {
				t.Fatalf("keys %q, want [%q]", keys, want)
			}
			ttl, err := c.PTTL(ctx, keys[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The key was set a moment before PTTL read it: at most that
			// moment (since the decision was sent) is gone, and PTTL
			// counts whole milliseconds.
			lo, hi := d.ResetAfter+500*time.Millisecond-time.Since(sent)-time.Millisecond, d.ResetAfter+500*time.Millisecond+time.Millisecond
			if ttl < lo || ttl > hi || ttl <= d.ResetAfter {
				t.Errorf("PTTL %v after a decision with ResetAfter %v and a grace of 500ms, want %v to %v", ttl, d.ResetAfter, lo, hi)
			}
			if a == limiters.SlidingCounter && ttl < 3*time.Second {
				t.Errorf("the sliding counter's key lives %v, less than the window after this one", ttl)
			}
		})
	}
}

// TestCompositeKeysShareSlot checks that the keys of one decision share a
// hash tag, whatever braces the caller's key has, so Redis Cluster never
// answers CROSSSLOT.
func TestCompositeKeysShareSlot(t *testing.T) {
	c := server(t)
	p := prefix(t, c)
	l, err := redislimit.New(c, limiters.SlidingCounter, []limiters.Limit{
		{N: 10, Per: time.Second},
		{N: 100, Per: time.Minute},
		{Name: "daily", N: 1000, Per: 24 * time.Hour},
	}, patient, redislimit.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, tag string }{{"alice", "alice"}, {"a}b{c", "a%7Db%7Bc"}, {"{x}", "%7Bx%7D"}, {"}{", "%7D%7B"}, {"", "%"}} {
		if _, err := l.AllowN(t.Context(), tc.key, 1); err != nil {
			t.Fatal(err)
		}
		keys, err := c.Keys(t.Context(), p+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return !strings.HasPrefix(k, p+"{"+tc.tag+"}:") })
		sort.Strings(keys)
		if len(keys) != 3 {
			t.Fatalf("key %q: Redis keys %q, want 3", tc.key, keys)
		}
		for _, k := range keys {
			if hashTag(k) != tc.tag {
				t.Errorf("key %q: %q hashes by %q, want %q", tc.key, k, hashTag(k), tc.tag)
			}
		}
	}
	if err := l.ResetAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Keys(t.Context(), p+"*").Result(); len(n) != 0 {
		t.Errorf("after ResetAll: %q", n)
	}
}

// TestBadParameters checks what New refuses, with a reason: every error
// starts "redislimit: " and wraps limiters.ErrInvalidParameter.
func TestBadParameters(t *testing.T) {
	c := server(t)
	one := []limiters.Limit{{N: 1, Per: time.Second}}
	for _, tc := range []struct {
		a      limiters.Algorithm
		limits []limiters.Limit
		opts   []redislimit.Option
		want   string
	}{
		{limiters.FixedWindow, []limiters.Limit{{N: 10, Per: 60 * 24 * time.Hour}}, nil, "longer than"},
		{limiters.FixedWindow, []limiters.Limit{{N: 10, Per: 999}}, nil, "shorter than"},
		{limiters.SlidingLog, []limiters.Limit{{N: 1 << 20, Per: time.Second}}, nil, "at most 65536"},
		{limiters.GCRA, []limiters.Limit{{N: 1, Per: 100000 * time.Second, Burst: 100}}, nil, "to refill from empty"},
		{limiters.GCRA, []limiters.Limit{{N: 0, Per: time.Second}}, nil, "between 1 and"},
		{limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second, Burst: -1}}, nil, "burst"},
		{limiters.FixedWindow, []limiters.Limit{{N: 1, Per: time.Second, Burst: 2}}, nil, "no burst"},
		{"nope", one, nil, "unknown algorithm"},
		{limiters.GCRA, nil, nil, "want 1 to 8 limits, got 0"},
		{limiters.GCRA, slices.Repeat([]limiters.Limit{{N: 1, Per: time.Second}}, 9), nil, "want 1 to 8 limits, got 9"},
		{limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second}, {N: 1, Per: time.Second}}, nil, `limits 1 and 2 are both named "1/s"`},
		{limiters.GCRA, []limiters.Limit{{Name: "a", N: 1, Per: time.Second}, {Name: "a", N: 2, Per: time.Second}}, nil, `both named "a"`},
		{limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second}, {Name: "x", N: 1, Per: 120 * 24 * time.Hour}}, nil, "limit 2 (x)"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithPrefix("a{b")}, "brace"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithTimeout(-1)}, "negative"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithGrace(-1)}, "negative"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithFailureMode(7)}, "failure mode"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithPacking(-1)}, "packing into -1 hashes"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithPacking(redislimit.MaxPacking + 1)}, "packing into"},
		{limiters.TokenBucket, one, []redislimit.Option{redislimit.WithPacking(8)}, "packing is for GCRA with one limit, not token-bucket"},
		{limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Second}, {N: 9, Per: time.Minute}}, []redislimit.Option{redislimit.WithPacking(8)}, "packing is for GCRA with one limit, not gcra with 2"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithPacking(8), redislimit.WithBatching(redislimit.Batching{})}, "packing does not combine with batching"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithLeases(time.Second, 0), redislimit.WithBatching(redislimit.Batching{})}, "leases does not combine with batching"},
		{limiters.GCRA, one, []redislimit.Option{redislimit.WithLeases(time.Second, 0), redislimit.WithPacking(8)}, "leases does not combine with packing"},
		{limiters.FixedWindow, one, []redislimit.Option{redislimit.WithLeases(time.Second, 0)}, "leases is for GCRA and the token bucket with one limit"},
	} {
		_, err := redislimit.New(c, tc.a, tc.limits, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "redislimit: ") || !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("New(%s, %v): %v, want an error about %q, wrapping ErrInvalidParameter", tc.a, tc.limits, err, tc.want)
		}
	}
	if _, err := redislimit.New(nil, limiters.GCRA, one); err == nil {
		t.Errorf("New(nil client) did not fail")
	}
	l, err := redislimit.New(c, limiters.GCRA, one, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	// A time out of range is the caller's mistake, not Redis's: it is
	// denied with ErrInvalidParameter (it used to be a failure of Redis's,
	// ErrUnavailable, which a fallback would have decided).
	d, err := l.Decide(t.Context(), at("k", time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), 1))
	if err == nil || !strings.Contains(err.Error(), "1970 to 2106") || !errors.Is(err, limiters.ErrInvalidParameter) || d.Allowed || d.Policy == nil {
		t.Errorf("a time in 1969: %s, %v", show(d), err)
	}
}

// TestRing checks decisions through a Ring, which hashes each command's
// first key (written in the call's own buffer) to pick a shard.
func TestRing(t *testing.T) {
	c := server(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": c.Options().Addr}, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	defer ring.Close()
	l, err := redislimit.New(ring, limiters.FixedWindow, []limiters.Limit{{N: 2, Per: time.Minute}, {N: 5, Per: time.Hour}}, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d, err := l.AllowN(context.Background(), "{ring}", 1)
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("request %d through a Ring: %+v, %v", i+1, d, err)
		}
	}
}

// TestLimits checks what a limiter says of its limits: each named as
// limiters.NewPolicy names it (its rate when it has no name), in order,
// a copy; and that its decisions carry them as their Policy, and say
// which limit denied.
func TestLimits(t *testing.T) {
	c := server(t)
	l, err := redislimit.New(c, limiters.GCRA, []limiters.Limit{{N: 10, Per: time.Second, Burst: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Limits(); len(got) != 1 || got[0] != (limiters.Limit{Name: "10/s burst 20", N: 10, Per: time.Second, Burst: 20}) {
		t.Errorf("Limits of one limit: %+v", got)
	}
	limits := []limiters.Limit{{N: 2, Per: time.Second}, {Name: "daily", N: 3, Per: 24 * time.Hour}}
	lc, err := redislimit.New(c, limiters.FixedWindow, limits, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	got := lc.Limits()
	if len(got) != 2 || got[0].Name != "2/s" || got[1].Name != "daily" || got[1].N != 3 {
		t.Errorf("Limits of two: %+v", got)
	}
	got[0].N = 99
	if lc.Limits()[0].N != 2 {
		t.Error("Limits returned the limiter's own slice")
	}
	t0 := time.Unix(1_800_000_000, 0)
	for i, step := range []struct {
		at   time.Duration
		want string
	}{{0, ""}, {0, ""}, {0, "2/s"}, {time.Second, ""}, {2 * time.Second, "daily"}} {
		d, err := lc.Decide(t.Context(), at("k", t0.Add(step.at), 1))
		want := step.want
		by, denied := d.DeniedBy()
		if err != nil || d.Policy == nil || !slices.Equal(d.Policy.Limits, lc.Limits()) || denied != (want != "") || by.Name != want {
			t.Errorf("decision %d: %s, %v; want denied by %q", i, show(d), err, want)
		}
	}
}

// TestWalk checks that Walk names keys as given, braces and all, and
// reports their state by the server's clock.
func TestWalk(t *testing.T) {
	c := server(t)
	l, err := redislimit.New(c, limiters.FixedWindow, []limiters.Limit{{N: 5, Per: time.Hour}, {N: 50, Per: 24 * time.Hour}}, patient, redislimit.WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"": 4, "a{b}": 3, "%7B": 2}
	for key, left := range want {
		if _, err := l.AllowN(t.Context(), key, 5-left); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	if err := l.Walk(t.Context(), func(key string, d limiters.Decision) bool {
		got[key] = d.Remaining
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk: %v, want %v", got, want)
	}
}

// TestDecisionAllocations checks that the limiter's part of a decision
// allocates nothing: through a client that answers at once (instant, in
// bench_test.go), a decision at the server's clock makes no allocation,
// under one limit or several; those BenchmarkAllowN counts are go-redis's.
func TestDecisionAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop calls, which are then allocated")
	}
	for _, tc := range []struct {
		a      limiters.Algorithm
		limits []limiters.Limit
		reply  any
	}{
		{limiters.FixedWindow, []limiters.Limit{{N: 100, Per: time.Second}}, "1 0 100 99 0 1000"},
		{limiters.GCRA, []limiters.Limit{{N: 100, Per: time.Second}}, int64(10000000)},
		{limiters.SlidingLog, []limiters.Limit{{N: 100, Per: time.Second}, {N: 1000, Per: time.Hour}}, "1 0 100 99 0 1000 1 99 0 1000 1 999 0 1000"},
	} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
		l, err := redislimit.New(instant{c, tc.reply}, tc.a, tc.limits)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if a := testing.AllocsPerRun(100, func() {
			if d, err := l.AllowN(ctx, "user-00000000001", 1); err != nil || !d.Allowed {
				t.Fatalf("%s: %s, %v", tc.a, show(d), err)
			}
		}); a != 0 {
			t.Errorf("%s, %d limits: a decision makes %v allocations in the limiter, want 0", tc.a, len(tc.limits), a)
		}
		c.Close()
	}
}
