package tiers_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
)

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func limits(t *testing.T, rates ...string) []limiters.Limit {
	t.Helper()
	var out []limiters.Limit
	for _, s := range rates {
		r, err := limiters.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func config(t *testing.T) tiers.Config {
	return tiers.Config{
		Algorithm: limiters.SlidingLog,
		Tiers: map[string][]limiters.Limit{
			"free":    limits(t, "2/s", "5/min"),
			"premium": limits(t, "10/s"),
		},
		Default:   "free",
		Users:     map[string]string{"paula": "premium"},
		Overrides: map[string][]limiters.Limit{"olga": limits(t, "1/min")},
	}
}

func newTiers(t *testing.T, c tiers.Config) *tiers.Limiter {
	t.Helper()
	l, err := tiers.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// spend admits requests for user, all at the time at, until one is denied,
// and returns how many were admitted.
func spend(t *testing.T, l *tiers.Limiter, user string, at time.Time) int {
	t.Helper()
	for n := 0; ; n++ {
		d, err := l.Decide(t.Context(), limiters.Request{Key: user, N: 1, At: at})
		if err != nil {
			t.Fatalf("Decide(%s, t0+%v, 1): %v", user, at.Sub(t0), err)
		}
		if !d.Allowed {
			return n
		}
	}
}

func TestTiers(t *testing.T) {
	l := newTiers(t, config(t))
	for _, tt := range []struct {
		user, tier string
		admitted   int
	}{
		{"paula", "premium", 10},
		{"frank", "free", 2},    // not assigned: the default tier
		{"stranger", "free", 2}, // unknown users are never an error
		{"olga", "", 1},         // her override, not a tier
	} {
		if got := l.TierOf(tt.user); got != tt.tier {
			t.Errorf("TierOf(%s) = %q, want %q", tt.user, got, tt.tier)
		}
		if got := spend(t, l, tt.user, t0); got != tt.admitted {
			t.Errorf("%s: %d admitted at t0, want %d", tt.user, got, tt.admitted)
		}
	}
	// The free tier is two limits at once: 2 a second, and 5 a minute,
	// spent by t0+2s.
	for i, want := range []int{2, 1} {
		if got := spend(t, l, "frank", t0.Add(time.Duration(i+1)*time.Second)); got != want {
			t.Errorf("frank: %d admitted at t0+%ds, want %d", got, i+1, want)
		}
	}
	d, err := l.Decide(t.Context(), limiters.Request{Key: "frank", N: 1, At: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if by, _ := d.DeniedBy(); d.Allowed || by.Name != "5/min" || !d.Denied.Has(1) || d.Denied.Has(0) || d.RetryAfter != 57*time.Second || d.Tier() != "free" {
		t.Errorf("frank at t0+3s: %+v, denied by %q; want denied by the minute (5/min) in tier free, retry 57s", d, by.Name)
	}
	if got, tier := l.Limits("frank"); tier != "free" || len(got) != 2 || got[1].Name != "5/min" {
		t.Errorf("Limits(frank) = %v, %q", got, tier)
	}
}

func TestSetTier(t *testing.T) {
	l := newTiers(t, config(t))
	spend(t, l, "frank", t0)
	if err := l.SetTier("frank", "premium"); err != nil {
		t.Fatal(err)
	}
	// A fresh premium quota; what he spent as free stays with free.
	if got := spend(t, l, "frank", t0); got != 10 {
		t.Errorf("frank upgraded: %d admitted, want 10", got)
	}
	if err := l.SetTier("frank", "free"); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, l, "frank", t0); got != 0 {
		t.Errorf("frank back to free at the same instant: %d admitted, want 0 (his free quota is spent)", got)
	}
	err := l.SetTier("frank", "gold")
	if !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), `no tier "gold" (the tiers: free, premium)`) {
		t.Errorf("SetTier(frank, gold) = %v", err)
	}
}

func TestReloadKeepsState(t *testing.T) {
	c := config(t)
	l := newTiers(t, c)
	spend(t, l, "frank", t0)
	spend(t, l, "paula", t0)
	spend(t, l, "olga", t0)

	// Premium gets more; free and olga's override are unchanged.
	c2 := config(t)
	c2.Tiers["premium"] = limits(t, "20/s")
	if err := l.Reload(c2); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		user string
		want int
	}{
		{"frank", 0},  // free kept its state: still spent
		{"olga", 0},   // so did her override
		{"paula", 20}, // premium changed: a new limiter, a new quota
	} {
		if got := spend(t, l, tt.user, t0); got != tt.want {
			t.Errorf("%s after the reload: %d admitted, want %d", tt.user, got, tt.want)
		}
	}

	// An invalid config changes nothing.
	bad := config(t)
	bad.Users["paula"] = "platinum"
	if err := l.Reload(bad); err == nil || !strings.Contains(err.Error(), `user "paula" is in tier "platinum", which is not a tier`) {
		t.Errorf("Reload(bad) = %v", err)
	}
	bad = config(t)
	bad.Tiers["premium"] = limits(t, "10/s burst 20") // a burst for a window algorithm
	if err := l.Reload(bad); err == nil || !strings.Contains(err.Error(), "tiers: tier premium: composite: limit 1 (10/s burst 20)") {
		t.Errorf("Reload(burst) = %v", err)
	}
	if got, _ := l.Limits("paula"); len(got) != 1 || got[0].N != 20 {
		t.Errorf("after two refused reloads paula has %v, want the 20/s of the last good one", got)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		change func(*tiers.Config)
		says   string
	}{
		{func(c *tiers.Config) { c.Algorithm = "magic" }, "unknown algorithm"},
		{func(c *tiers.Config) { c.Tiers = nil }, "no tiers"},
		{func(c *tiers.Config) { c.Default = "gold" }, `the default tier "gold" is not a tier (the tiers: free, premium)`},
		{func(c *tiers.Config) { c.Overrides["olga"] = nil }, `user "olga"'s override: composite: limiters: invalid parameter: want 1 to 8 limits, got 0`},
	} {
		c := config(t)
		tt.change(&c)
		_, err := tiers.New(c)
		if !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("New = %v, want ErrInvalidParameter saying %q", err, tt.says)
		}
	}
}

// Decisions, moves and reloads at once: the race detector watches, and
// every decision is made by some configuration's limits.
func TestConcurrentReload(t *testing.T) {
	l := newTiers(t, config(t))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				r := limiters.Request{Key: fmt.Sprint("user", i%50), N: 1 + g%2, At: t0.Add(time.Duration(i) * time.Millisecond)}
				if _, err := l.Decide(t.Context(), r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			c := config(t)
			c.Tiers["premium"] = limits(t, fmt.Sprintf("%d/s", 10+i))
			if err := l.Reload(c); err != nil {
				t.Error(err)
			}
			if err := l.SetTier(fmt.Sprint("user", i), "premium"); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if got, _ := l.Limits("paula"); got[0].N != 59 {
		t.Errorf("paula's limit after 50 reloads: %v, want 59/s", got)
	}
}

// The Limiter keeps its own copy: a caller that edits the tiers.Config it
// passed, and reloads it, gets the edit; editing what tiers.Config returns
// changes nothing.
func TestConfigIsCopied(t *testing.T) {
	c := config(t)
	l := newTiers(t, c)
	c.Tiers["premium"][0] = limits(t, "1/s")[0]
	if err := l.Reload(c); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, l, "paula", t0); got != 1 {
		t.Errorf("paula after premium was edited in place to 1/s and reloaded: %d admitted, want 1", got)
	}
	got := l.Config()
	got.Tiers["free"][0] = limits(t, "100/s")[0]
	if lim, _ := l.Limits("frank"); lim[0].N != 2 || l.Config().Tiers["free"][0].N != 2 {
		t.Errorf("editing tiers.Config()'s result changed the limiter's: %v", lim)
	}
	l.Close()
	if err := l.Reload(config(t)); err == nil || !strings.Contains(err.Error(), "Reload after Close") {
		t.Errorf("Reload after Close = %v", err)
	}
}

// A decision allocates nothing, moved users and overrides included; and
// the configuration read back shows the moves.
func TestDecideAllocatesNothing(t *testing.T) {
	c := config(t)
	c.Users = nil
	l := newTiers(t, c)
	if err := l.SetTier("frank", "premium"); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, user := range []string{"frank", "olga", "stranger"} {
		if n := testing.AllocsPerRun(200, func() { l.Decide(ctx, limiters.Request{Key: user, N: 1, At: t0}) }); n != 0 {
			t.Errorf("%s: %v allocations a decision, want 0", user, n)
		}
	}
	if got := l.Config().Users; got["frank"] != "premium" || len(got) != 1 {
		t.Errorf("Config().Users = %v, want frank in premium", got)
	}
}

// A reservation is settled under the limits of the user's tier: a refund
// there, and a user moved to a tier of other limits is refused rather
// than settled under limits it was not reserved under.
func TestSettle(t *testing.T) {
	l := newTiers(t, config(t))
	ctx := t.Context()
	r, err := l.Reserve(ctx, limiters.Request{Key: "paula", N: 6})
	if err != nil || !r.Allowed() || r.Decision().Remaining != 4 || r.Decision().Tier() != "premium" {
		t.Fatalf("reserved 6 of premium's 10: %+v, %v", r.Decision(), err)
	}
	d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 2})
	if err != nil || d.Remaining != 8 {
		t.Errorf("settled at 2: %+v, %v; want 8 remaining", d, err)
	}
	r, err = l.Reserve(ctx, limiters.Request{Key: "paula", N: 1})
	if err != nil || !r.Allowed() {
		t.Fatal(r.Decision(), err)
	}
	if err := l.SetTier("paula", "free"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0}); !errors.Is(err, limiters.ErrNotReserved) {
		t.Errorf("settled under another tier's two limits: %v, want ErrNotReserved", err)
	}
	// At explicit times, as a replay settles.
	r, _ = l.Reserve(ctx, limiters.Request{Key: "olga", N: 1, At: t0})
	if !r.Allowed() || r.Decision().Remaining != 0 {
		t.Fatalf("olga's 1 a minute: %+v", r.Decision())
	}
	if d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0, At: t0.Add(time.Second)}); err != nil || d.Remaining != 1 {
		t.Errorf("cancelled a second later: %+v, %v", d, err)
	}
}
