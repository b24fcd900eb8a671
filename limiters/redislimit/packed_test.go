package redislimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// TestPackedSameAsMemory replays random traces through GCRA packed into
// few hashes (so that keys share them, and new keys find stale fields to
// delete) and the in-memory GCRA: every decision the same, field for
// field.
func TestPackedSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	for trial := range 12 {
		lim := []limiters.Limit{randomLimit(r, limiters.GCRA, trial%4 == 3)}
		mem := inMemory(t, limiters.GCRA, lim)
		red := onRedis(t, c, limiters.GCRA, lim, redislimit.WithPacking(1+trial%3))
		trace := randomTrace(r, lim[0].Window(), lim[0].Quota(), 300)
		for i := range trace {
			trace[i].key += fmt.Sprint(".", r.IntN(8)) // 24 keys in 1 to 3 hashes
		}
		sameDecisions(t, lim[0].String()+" packed", mem, red, trace)
	}
}

// TestPackedSettleSameAsMemory is TestSettleSameAsMemory for GCRA's keys
// packed in hashes, which gcrapackedsettle.lua settles (settling packed
// keys used to be refused).
func TestPackedSettleSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(13, uint64(time.Now().UnixNano())))
	settled := 0
	for trial := range 12 {
		lim := []limiters.Limit{randomLimit(r, limiters.GCRA, trial%4 == 3)}
		trace := randomTrace(r, lim[0].Window(), lim[0].Quota(), 200)
		for i := range trace {
			trace[i].key += fmt.Sprint(".", r.IntN(8)) // 24 keys in 1 to 3 hashes
		}
		red := onRedis(t, c, limiters.GCRA, lim, redislimit.WithPacking(1+trial%3))
		settled += settleTrace(t, r, lim[0].String()+" packed", inMemory(t, limiters.GCRA, lim), red, trace)
	}
	if settled < 200 {
		t.Errorf("fixture: %d settles", settled)
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
	lim := []limiters.Limit{{N: 1, Per: time.Second, Burst: 4}} // full again 4s after a spent quota
	l, err := redislimit.New(c, limiters.GCRA, lim, patient, redislimit.WithPrefix(p), redislimit.WithPacking(1), redislimit.WithGrace(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	d, err := l.AllowN(ctx, "alice", 2)
	if err != nil || !d.Allowed {
		t.Fatalf("AllowN: %+v, %v", d, err)
	}
	if _, err := l.AllowN(ctx, "bob", 1); err != nil {
		t.Fatal(err)
	}
	hash := p + "{%b0}:gcra:4@1000000000"
	keys, err := c.Keys(ctx, p+"*").Result()
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
	// longest, plus the grace; it was set a moment (since alice's
	// decision was sent) before; PTTL counts whole milliseconds.
	ttl, err := c.PTTL(ctx, hash).Result()
	if lo, hi := d.ResetAfter+499*time.Millisecond-time.Since(sent), d.ResetAfter+501*time.Millisecond; err != nil || ttl < lo || ttl > hi {
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
	if d, err := l.Peek(ctx, limiters.Request{Key: "alice", N: 1}); err != nil || d.Remaining != 4 {
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
}

// TestPackedStaleFields checks that the fields whose quota has been full
// for the grace go as new keys come, and that a settle keeps the hash's
// expiry.
func TestPackedStaleFields(t *testing.T) {
	c := server(t)
	ctx := t.Context()
	p := prefix(t, c)
	lim := []limiters.Limit{{N: 1, Per: time.Second, Burst: 4}}
	l, err := redislimit.New(c, limiters.GCRA, lim, patient, redislimit.WithPrefix(p), redislimit.WithPacking(1), redislimit.WithGrace(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	hash := p + "{%b0}:gcra:4@1000000000"

	// Stale fields go as new keys come: 60 keys at t0, then 60 others
	// long after (their quota full for more than the grace of decisions
	// at explicit times). Each new key looks at two fields at random: in
	// a simulation of 20,000 such runs, 6 stale fields were left in the
	// median, 16 at most.
	t0 := time.Unix(1.9e9, 0)
	for i := range 60 {
		l.Decide(ctx, at(fmt.Sprint("old", i), t0, 4))
	}
	later := t0.Add(10*time.Minute + 10*time.Second) // the grace of explicit times is 10 minutes
	for i := range 60 {
		if d, err := l.Decide(ctx, at(fmt.Sprint("new", i), later, 1)); err != nil || !d.Allowed {
			t.Fatalf("new%d denied: %+v, %v", i, d, err)
		}
	}
	fields, err := c.HKeys(ctx, hash).Result()
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
		if d, err := l.Peek(ctx, at(fmt.Sprint("old", i), later, 1)); err != nil || d.Remaining != 4 {
			t.Fatalf("old%d at the later time: %+v, %v; want a full quota", i, d, err)
		}
	}

	// A settle keeps the hash's expiry: a charge that takes the field
	// beyond the hash's time to live makes the hash live longer.
	r, err := l.Reserve(ctx, at("carol", later, 1))
	if err != nil || !r.Allowed() {
		t.Fatalf("Reserve: %s, %v", show(r.Decision()), err)
	}
	if d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 40, At: later}); err != nil || d.Allowed || d.ResetAfter != 40*time.Second {
		t.Fatalf("Settle at 40 units: %s, %v; want denied, in debt until 40s on", show(d), err)
	}
	if ttl, err := c.PTTL(ctx, hash).Result(); err != nil || ttl < 40*time.Second+10*time.Minute-time.Second {
		t.Errorf("PTTL %v, %v after a charge of 40s at an explicit time: want the field's 40s and the 10 minutes' grace", ttl, err)
	}
}
