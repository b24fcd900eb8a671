package redislimit

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
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
// and limit, and living until its quota is full again plus the grace:
// never less (the sliding counter's lives through the next window).
func TestKeysExpire(t *testing.T) {
	c := server(t)
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			p := prefix(t, c)
			r := limiters.Rate{N: 4, Per: 3 * time.Second}
			s, _ := r.Spec(a)
			l, err := New(c, s, WithPrefix(p), WithGrace(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			d, err := l.AllowN(ctx, "user", 2)
			if err != nil || !d.Allowed {
				t.Fatalf("AllowN: %+v, %v", d, err)
			}
			keys, err := c.Keys(ctx, glob(p)+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := p + "{user}" + l.suffix[0]; len(keys) != 1 || keys[0] != want {
				t.Fatalf("keys %q, want [%q]", keys, want)
			}
			ttl, err := c.PTTL(ctx, keys[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The key was set a moment before PTTL read it: at most that
			// moment (under 100ms here) is gone.
			lo, hi := d.ResetAfter+500*time.Millisecond-100*time.Millisecond, d.ResetAfter+500*time.Millisecond+time.Millisecond
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
	l, err := NewComposite(c, limiters.SlidingCounter, []composite.Limit{
		{Rate: limiters.Rate{N: 10, Per: time.Second}},
		{Rate: limiters.Rate{N: 100, Per: time.Minute}},
		{Name: "daily", Rate: limiters.Rate{N: 1000, Per: 24 * time.Hour}},
	}, WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"alice", "a}b{c", "{x}", "}{", ""} {
		if _, err := l.AllowN(t.Context(), key, 1); err != nil {
			t.Fatal(err)
		}
		keys, err := c.Keys(t.Context(), glob(p+"{"+escape(key)+"}")+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(keys)
		if len(keys) != 3 {
			t.Fatalf("key %q: Redis keys %q, want 3", key, keys)
		}
		for _, k := range keys[1:] {
			if hashTag(k) != hashTag(keys[0]) {
				t.Errorf("key %q: %q and %q hash differently", key, keys[0], k)
			}
		}
	}
	if err := l.ResetAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Keys(t.Context(), glob(p)+"*").Result(); len(n) != 0 {
		t.Errorf("after ResetAll: %q", n)
	}
}

// TestBadParameters checks what New refuses, with a reason.
func TestBadParameters(t *testing.T) {
	c := server(t)
	for _, tc := range []struct {
		s    limiters.Spec
		opts []Option
		want string
	}{
		{limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 10, Length: 60 * 24 * time.Hour}}, nil, "longer than"},
		{limiters.Spec{Algorithm: limiters.FixedWindow, Window: limiters.Window{Limit: 10, Length: 999}}, nil, "shorter than"},
		{limiters.Spec{Algorithm: limiters.SlidingLog, Window: limiters.Window{Limit: 1 << 20, Length: time.Second}}, nil, "at most 65536"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 100, Rate: 1e-5}}, nil, "to refill from empty"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 0, Rate: 1}}, nil, "capacity"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithPrefix("a{b")}, "brace"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithTimeout(-1)}, "negative"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithFailureMode(7)}, "failure mode"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithPacking(-1)}, "packing into -1 hashes"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithPacking(MaxPacking + 1)}, "packing into"},
		{limiters.Spec{Algorithm: limiters.TokenBucket, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithPacking(8)}, "packing is for GCRA"},
		{limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, []Option{WithPacking(8), WithBatching(Batching{})}, "do not combine"},
	} {
		_, err := New(c, tc.s, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v): %v, want an error about %q", tc.s, err, tc.want)
		}
	}
	if _, err := New(nil, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}); err == nil {
		t.Errorf("New(nil client) did not fail")
	}
	l, _ := New(c, limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}}, WithPrefix(prefix(t, c)))
	if _, _, err := l.DecideAt(t.Context(), "k", time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), 1); err == nil || !strings.Contains(err.Error(), "1970 to 2106") {
		t.Errorf("a time in 1969: %v", err)
	}
}

func TestEscape(t *testing.T) {
	for _, key := range []string{"", "a", "%", "%7B", "{", "}", "}{", "a{b}c%d", "%25", "héllo"} {
		e := escape(key)
		if e == "" || strings.ContainsAny(e, "{}") {
			t.Errorf("escape(%q) = %q: not a usable hash tag", key, e)
		}
		if back, ok := unescape(e); !ok || back != key {
			t.Errorf("unescape(escape(%q)) = %q, %v", key, back, ok)
		}
	}
}

// TestReplyChecked feeds reply what a server must never send: each is
// refused, with the failure mode's decision, never read as a decision.
func TestReplyChecked(t *testing.T) {
	l := &Limiter{quota: []int{5}, suffix: []string{":x"}, o: Options{FailureMode: FailClosed, Timeout: time.Second}}
	for _, v := range []any{nil, int64(1), []any{int64(1)}, "", "1 0 5 4 0", "1 0 5 4 0 7 8", "1 0 5 4 0 x", "2 0 5 4 0 1", "0 2 5 4 1 1", "1 0 5 -1 0 1", "1 0 5 4 0 1 "} {
		d, _, err := l.reply(v, 1, nil)
		if !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Errorf("reply(%#v) = %+v, %v; want refused, fail closed", v, d, err)
		}
	}
	d, denied, err := l.reply("0 1 5 0 250 1000", 1, nil)
	if err != nil || d != (limiters.Decision{Limit: 5, RetryAfter: 250, ResetAfter: 1000}) || denied != 0 {
		t.Errorf("reply of a denial: %+v, %d, %v", d, denied, err)
	}
	d, _, err = l.reply("0 1 5 0 -1 0", 1, nil)
	if err != nil || d.RetryAfter != limiters.Never {
		t.Errorf("reply of a never: %+v, %v", d, err)
	}

	// GCRA with one limit replies with the debt: C=5, T=100ns, so CT=500.
	g := &Limiter{quota: []int{5}, suffix: []string{":x"}, interval: 100, o: l.o}
	for _, v := range []any{nil, "", "x", "1 0 5 4 0 1", []any{int64(1)}, int64(501), "501", int64(-1), int64(-400)} {
		// -1 and -400 are denials of cost 1 with debts of 0 and 399: one
		// more would fit, so they could not have been denied.
		if d, _, err := g.reply(v, 1, nil); !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Errorf("debt: reply(%#v) = %+v, %v; want refused, fail closed", v, d, err)
		}
	}
	for _, tc := range []struct {
		v      any
		n      int
		want   limiters.Decision
		denied int
	}{
		{int64(0), 1, limiters.Decision{Allowed: true, Limit: 5, Remaining: 5}, -1},
		{"250", 1, limiters.Decision{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 250}, -1},
		{int64(500), 1, limiters.Decision{Allowed: true, Limit: 5, ResetAfter: 500}, -1},
		{int64(-451), 1, limiters.Decision{Limit: 5, RetryAfter: 50, ResetAfter: 450}, 0},
		{"-451", 2, limiters.Decision{Limit: 5, RetryAfter: 150, ResetAfter: 450}, 0},
		{int64(-1), 6, limiters.Decision{Limit: 5, Remaining: 5, RetryAfter: limiters.Never}, 0},
	} {
		d, denied, err := g.reply(tc.v, tc.n, nil)
		if err != nil || d != tc.want || denied != tc.denied {
			t.Errorf("debt: reply(%#v, n=%d) = %+v, %d, %v; want %+v, %d", tc.v, tc.n, d, denied, err, tc.want, tc.denied)
		}
	}

	// Two limits: four more integers each, checked as closely.
	l2 := &Limiter{quota: []int{5, 100}, suffix: []string{":x", ":y"}, o: l.o}
	for _, v := range []any{"1 0 5 4 0 7", "1 0 5 4 0 7 1 4 0 7", "1 0 5 4 0 7 1 4 0 7 1 99 0", "1 0 5 4 0 7 1 4 0 7 2 99 0 9",
		"1 0 5 4 0 7 1 4 0 7 1 -1 0 9", "1 0 5 4 0 7 1 4 0 7 1 99 0 -9", "1 0 5 4 0 7 1 4 0 7 1 99 0 9 "} {
		per := make([]limiters.Decision, 2)
		if d, _, err := l2.reply(v, 1, per); !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Errorf("two limits: reply(%#v) = %+v, %v; want refused, fail closed", v, d, err)
		}
	}
	per := make([]limiters.Decision, 2)
	d, denied, err = l2.reply("0 2 5 0 3000 9000 1 0 0 10 0 99 3000 9000", 1, per)
	wantPer := []limiters.Decision{{Allowed: true, Limit: 5, ResetAfter: 10}, {Limit: 100, Remaining: 99, RetryAfter: 3000, ResetAfter: 9000}}
	if err != nil || d != (limiters.Decision{Limit: 5, RetryAfter: 3000, ResetAfter: 9000}) || denied != 1 || !slices.Equal(per, wantPer) {
		t.Errorf("two limits, a denial: %+v, %d, %v, each %+v; want each %+v", d, denied, err, per, wantPer)
	}
}

// TestRing checks decisions through a Ring, which hashes each command's
// first key (a keyArg, written in the call's own buffer) to pick a shard.
func TestRing(t *testing.T) {
	c := server(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": c.Options().Addr}, ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond})
	defer ring.Close()
	l, err := NewComposite(ring, limiters.FixedWindow, []composite.Limit{{Rate: limiters.Rate{N: 2, Per: time.Minute}}, {Rate: limiters.Rate{N: 5, Per: time.Hour}}}, WithPrefix(prefix(t, c)))
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

// TestLimits checks what a limiter says of its limits: a Spec's one, as
// N per W (a bucket's capacity over its time to fill), and a composite's,
// named.
func TestLimits(t *testing.T) {
	c := server(t)
	s := limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 20, Rate: 10}}
	l, err := New(c, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Limits(); len(got) != 1 || got[0].Name != s.String() || got[0].Rate != (limiters.Rate{N: 20, Per: 2 * time.Second}) {
		t.Errorf("Limits of %v: %+v", s, got)
	}
	lc, err := NewComposite(c, limiters.FixedWindow, []composite.Limit{{Rate: limiters.Rate{N: 2, Per: time.Second}}, {Name: "daily", Rate: limiters.Rate{N: 9, Per: 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := lc.Limits(); len(got) != 2 || got[0].Name != "2/s" || got[1].Name != "daily" || got[1].Rate.N != 9 {
		t.Errorf("Limits of a composite: %+v", got)
	}
}
