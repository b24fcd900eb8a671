package redislimit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
)

// TestPackedSameAsMemory replays random traces through GCRA packed into
// few hashes (so that keys share them, and new keys find stale fields to
// delete) and the in-memory GCRA: every decision the same, field for
// field.
func TestPackedSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	for trial := range 12 {
		s := randomSpec(r, limiters.GCRA, trial%4 == 3)
		mem, err := memory.New(s, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		red, err := New(c, s, WithPrefix(prefix(t, c)), WithPacking(1+trial%3))
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		trace := randomTrace(r, s.Judged().Length, s.Judged().Limit, 300)
		for i := range trace {
			trace[i].key += fmt.Sprint(".", r.IntN(8)) // 24 keys in 1 to 3 hashes
		}
		sameDecisions(t, s.String()+" packed", mem, red, trace)
	}
}

// TestPackedKeys checks the hashes: named by prefix, hash number and
// limit; living as long as their longest-lived field plus the grace; and
// rid of the fields whose quota has been full for the grace as new keys
// come. Reset and Walk see the keys in them.
func TestPackedKeys(t *testing.T) {
	c := server(t)
	ctx := t.Context()
	p := prefix(t, c)
	s := limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 4, Rate: 1}} // full again 4s after a spent quota
	l, err := New(c, s, WithPrefix(p), WithPacking(1), WithGrace(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.AllowN(ctx, "alice", 2)
	if err != nil || !d.Allowed {
		t.Fatalf("AllowN: %+v, %v", d, err)
	}
	if _, err := l.AllowN(ctx, "bob", 1); err != nil {
		t.Fatal(err)
	}
	hash := p + "{%b0}" + l.suffix[0]
	keys, err := c.Keys(ctx, glob(p)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != hash {
		t.Fatalf("keys %q, want [%q]", keys, hash)
	}
	fields, err := c.HKeys(ctx, hash).Result()
	slices.Sort(fields)
	if err != nil || !slices.Equal(fields, []string{"alice", "bob"}) {
		t.Fatalf("the hash's fields: %q, %v; want alice and bob", fields, err)
	}
	// The hash lives as long as alice's quota takes to fill (2s), its
	// longest, plus the grace; it was set a moment (under 100ms) before.
	ttl, err := c.PTTL(ctx, hash).Result()
	if lo, hi := d.ResetAfter+400*time.Millisecond, d.ResetAfter+501*time.Millisecond; err != nil || ttl < lo || ttl > hi {
		t.Errorf("PTTL %v, %v: want %v to %v", ttl, err, lo, hi)
	}

	var walked []string
	if err := l.Walk(ctx, func(key string, d limiters.Decision) bool {
		walked = append(walked, fmt.Sprintf("%s %d", key, d.Remaining))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(walked)
	if want := []string{"alice 2", "bob 3"}; !slices.Equal(walked, want) {
		t.Errorf("Walk: %q, want %q", walked, want)
	}
	if err := l.Reset(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Peek(ctx, "alice"); err != nil || d.Remaining != 4 {
		t.Errorf("alice after Reset: %+v, %v; want a full quota", d, err)
	}
	if n, err := c.HLen(ctx, hash).Result(); err != nil || n != 1 {
		t.Errorf("the hash holds %d fields after Reset, %v; want bob's alone", n, err)
	}
	if err := l.ResetAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, hash).Result(); err != nil || n != 0 {
		t.Errorf("the hash after ResetAll: exists %d, %v", n, err)
	}

	// Stale fields go as new keys come: 60 keys at t0, then 60 others
	// long after (their quota full for more than the grace of decisions
	// at explicit times). Each new key looks at two fields at random: in
	// a simulation of 20,000 such runs, 6 stale fields were left in the
	// median, 16 at most.
	t0 := time.Unix(1.9e9, 0)
	for i := range 60 {
		l.AllowAt(fmt.Sprint("old", i), t0, 4)
	}
	later := t0.Add(explicitGrace + 10*time.Second)
	for i := range 60 {
		if d := l.AllowAt(fmt.Sprint("new", i), later, 1); !d.Allowed {
			t.Fatalf("new%d denied: %+v", i, d)
		}
	}
	fields, err = c.HKeys(ctx, hash).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := 0
	for _, f := range fields {
		if strings.HasPrefix(f, "old") {
			old++
		}
	}
	if len(fields)-old != 60 || old > 40 {
		t.Errorf("after 60 new keys: %d old fields and %d new, want 60 new and at most 40 old (about 6)", old, len(fields)-old)
	}
	// An old key found or not decides the same: its quota is full.
	for i := range 60 {
		if d := l.PeekAt(fmt.Sprint("old", i), later); d.Remaining != 4 {
			t.Fatalf("old%d at the later time: %+v, want a full quota", i, d)
		}
	}
}
