// Package tiers gives each user the limits of their tier: named tiers of
// limits ("free: 10/s and 1000/day", "premium: 100/s"), users assigned to
// tiers, a default tier for every user not assigned, and per-user
// overrides that replace a user's tier. Each tier's limits are enforced
// together, all or nothing (package composite).
//
// A user's quota is kept by their tier: moving a user to another tier
// (SetTier) gives them what the new tier holds for them, a full quota if
// they have not been there lately, and leaves what they spent in the old
// tier behind. Reload swaps in a new configuration without dropping
// state: a tier or an override whose algorithm and limits did not change
// keeps its limiter and every user's quota in it.
//
// A Limiter is safe for concurrent use; decisions take a read lock, and
// SetTier and Reload a write lock. Close it when done.
package tiers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// Config is a set of tiers and who is in which.
type Config struct {
	// Algorithm keeps every limit.
	Algorithm limiters.Algorithm
	// Tiers are the limits of each tier, by name.
	Tiers map[string][]composite.Limit
	// Default is the tier of every user not in Users or Overrides.
	Default string
	// Users assigns users to tiers.
	Users map[string]string
	// Overrides are users' own limits, in place of their tier's.
	Overrides map[string][]composite.Limit
}

// Validate reports whether c is a configuration New can build: a default
// that is a tier, users in tiers that exist, and limits the algorithm can
// enforce (checked by New).
func (c Config) Validate() error {
	if _, err := limiters.ParseAlgorithm(string(c.Algorithm)); err != nil {
		return fmt.Errorf("tiers: %w", err)
	}
	if len(c.Tiers) == 0 {
		return fmt.Errorf("tiers: %w: no tiers", limiters.ErrInvalidParameter)
	}
	if _, ok := c.Tiers[c.Default]; !ok {
		return fmt.Errorf("tiers: %w: the default tier %q is not a tier (the tiers: %s)", limiters.ErrInvalidParameter, c.Default, c.names())
	}
	for _, user := range slices.Sorted(maps.Keys(c.Users)) {
		if _, ok := c.Tiers[c.Users[user]]; !ok {
			return fmt.Errorf("tiers: %w: user %q is in tier %q, which is not a tier (the tiers: %s)", limiters.ErrInvalidParameter, user, c.Users[user], c.names())
		}
	}
	return nil
}

func (c Config) names() string { return strings.Join(slices.Sorted(maps.Keys(c.Tiers)), ", ") }

// clone returns c with its maps and lists copied, so that neither the
// caller nor the Limiter changes the other's.
func (c Config) clone() Config {
	lists := func(m map[string][]composite.Limit) map[string][]composite.Limit {
		out := make(map[string][]composite.Limit, len(m))
		for k, v := range m {
			out[k] = slices.Clone(v)
		}
		return out
	}
	c.Tiers, c.Overrides, c.Users = lists(c.Tiers), lists(c.Overrides), maps.Clone(c.Users)
	return c
}

// Limiter decides each user's requests against their tier's limits.
type Limiter struct {
	opts     []limiters.Option
	reloadMu sync.Mutex // one Reload at a time
	closed   bool       // under reloadMu
	mu       sync.RWMutex
	cfg      Config
	// tiers and overrides keep the limits, by tier and by user.
	tiers, overrides map[string]*composite.Limiter
	users            map[string]string
}

var _ limiters.AtLimiter = (*Limiter)(nil)

// New returns a limiter for c. The options apply to every limit's
// limiter.
func New(c Config, opts ...limiters.Option) (*Limiter, error) {
	l := &Limiter{opts: opts}
	if err := l.Reload(c); err != nil {
		return nil, err
	}
	return l, nil
}

// Reload replaces the configuration with c, keeping the limiter (and its
// users' quotas) of every tier and override whose algorithm and limits are
// unchanged. Users are assigned as c says, SetTier's moves forgotten.
// When c is invalid it returns why and changes nothing.
func (l *Limiter) Reload(c Config) error {
	c = c.clone()
	if err := c.Validate(); err != nil {
		return err
	}
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	if l.closed {
		return fmt.Errorf("tiers: Reload after Close")
	}
	l.mu.RLock()
	old := l.cfg
	oldTiers, oldOverrides := l.tiers, l.overrides
	l.mu.RUnlock()
	var built []*composite.Limiter // to close if c fails half way
	fail := func(err error) error {
		for _, b := range built {
			b.Close()
		}
		return err
	}
	keep := func(oldLimits []composite.Limit, had *composite.Limiter, limits []composite.Limit) (*composite.Limiter, bool) {
		return had, had != nil && old.Algorithm == c.Algorithm && slices.Equal(oldLimits, limits)
	}
	build := func(what string, oldLimits []composite.Limit, had *composite.Limiter, limits []composite.Limit) (*composite.Limiter, error) {
		if k, ok := keep(oldLimits, had, limits); ok {
			return k, nil
		}
		b, err := composite.New(c.Algorithm, limits, l.opts...)
		if err != nil {
			return nil, fmt.Errorf("tiers: %s: %w", what, err)
		}
		built = append(built, b)
		return b, nil
	}
	tiers := map[string]*composite.Limiter{}
	for _, name := range slices.Sorted(maps.Keys(c.Tiers)) {
		b, err := build("tier "+name, old.Tiers[name], oldTiers[name], c.Tiers[name])
		if err != nil {
			return fail(err)
		}
		tiers[name] = b
	}
	overrides := map[string]*composite.Limiter{}
	for _, user := range slices.Sorted(maps.Keys(c.Overrides)) {
		b, err := build(fmt.Sprintf("user %q's override", user), old.Overrides[user], oldOverrides[user], c.Overrides[user])
		if err != nil {
			return fail(err)
		}
		overrides[user] = b
	}
	l.mu.Lock()
	l.cfg, l.tiers, l.overrides, l.users = c, tiers, overrides, maps.Clone(c.Users)
	l.mu.Unlock()
	// What the new configuration no longer holds stops: a decision that
	// read it before the swap still finishes, on a limiter that decides
	// as ever and only no longer sweeps.
	for name, t := range oldTiers {
		if tiers[name] != t {
			t.Close()
		}
	}
	for user, o := range oldOverrides {
		if overrides[user] != o {
			o.Close()
		}
	}
	return nil
}

// Config returns the configuration in force (its maps are copies).
func (l *Limiter) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	c := l.cfg.clone()
	c.Users = maps.Clone(l.users)
	return c
}

// SetTier moves user to tier, at once. It does not touch an override.
func (l *Limiter) SetTier(user, tier string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.tiers[tier]; !ok {
		return fmt.Errorf("tiers: %w: no tier %q (the tiers: %s)", limiters.ErrInvalidParameter, tier, l.cfg.names())
	}
	l.users[user] = tier
	return nil
}

// TierOf returns the tier user is in (the default for a user not
// assigned), or "" when an override decides for them.
func (l *Limiter) TierOf(user string) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, tier := l.limiterOf(user)
	return tier
}

// limiterOf returns what decides for user, and their tier ("" for an
// override). The caller holds l.mu.
func (l *Limiter) limiterOf(user string) (*composite.Limiter, string) {
	if o, ok := l.overrides[user]; ok {
		return o, ""
	}
	tier, ok := l.users[user]
	if !ok {
		tier = l.cfg.Default
	}
	return l.tiers[tier], tier
}

// Limits returns the limits that decide for user, and their tier ("" for
// an override).
func (l *Limiter) Limits(user string) ([]composite.Limit, string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	c, tier := l.limiterOf(user)
	return c.Limits(), tier
}

// AllowN reports whether n events for user may happen now under their
// limits, and consumes them if so. The error is non-nil only for n < 1.
func (l *Limiter) AllowN(ctx context.Context, user string, n int) (limiters.Decision, error) {
	l.mu.RLock()
	c, _ := l.limiterOf(user)
	l.mu.RUnlock()
	return c.AllowN(ctx, user, n)
}

// AllowAt is AllowN at time t.
func (l *Limiter) AllowAt(user string, t time.Time, n int) limiters.Decision {
	d, _ := l.DecideAt(user, t, n, nil)
	return d
}

// DecideAt is composite's DecideAt for user's limits (see Limits).
func (l *Limiter) DecideAt(user string, t time.Time, n int, per []limiters.Decision) (limiters.Decision, int) {
	l.mu.RLock()
	c, _ := l.limiterOf(user)
	l.mu.RUnlock()
	return c.DecideAt(user, t, n, per)
}

// Explain is DecideAt for a person: the decision, user's tier ("" for an
// override) and, for a denial, the name of the limit that denied, all of
// one configuration even while another is swapped in.
func (l *Limiter) Explain(user string, t time.Time, n int) (d limiters.Decision, tier, deniedBy string) {
	l.mu.RLock()
	c, tier := l.limiterOf(user)
	l.mu.RUnlock()
	d, denied := c.DecideAt(user, t, n, nil)
	if denied >= 0 {
		deniedBy = c.LimitName(denied)
	}
	return d, tier, deniedBy
}

// PeekAt reports user's state at t under their limits without consuming
// anything.
func (l *Limiter) PeekAt(user string, t time.Time) limiters.Decision {
	l.mu.RLock()
	c, _ := l.limiterOf(user)
	l.mu.RUnlock()
	return c.PeekAt(user, t)
}

// Close stops every limit's background sweeper. Decisions still work;
// Reload does not.
func (l *Limiter) Close() error {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	l.closed = true
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.tiers {
		t.Close()
	}
	for _, o := range l.overrides {
		o.Close()
	}
	return nil
}
