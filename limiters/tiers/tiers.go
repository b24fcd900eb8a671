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
// Each tier and each override is one Group: in memory (package composite)
// by default, or wherever a Builder puts it, such as Redis (package
// redislimit), for a fleet that shares its tiers' quotas. A decision's
// Policy names the user's tier and its limits.
//
// A Limiter is safe for concurrent use. Decisions take no lock of their
// own: they read the configuration in force through one atomic pointer,
// which Reload and SetTier replace. Close it when done.
package tiers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/internal/reservation"
)

// Config is a set of tiers and who is in which.
type Config struct {
	// Algorithm keeps every limit.
	Algorithm limiters.Algorithm
	// Tiers are the limits of each tier, by name.
	Tiers map[string][]limiters.Limit
	// Default is the tier of every user not in Users or Overrides.
	Default string
	// Users assigns users to tiers.
	Users map[string]string
	// Overrides are users' own limits, in place of their tier's.
	Overrides map[string][]limiters.Limit
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
	lists := func(m map[string][]limiters.Limit) map[string][]limiters.Limit {
		out := make(map[string][]limiters.Limit, len(m))
		for k, v := range m {
			out[k] = slices.Clone(v)
		}
		return out
	}
	c.Tiers, c.Overrides, c.Users = lists(c.Tiers), lists(c.Overrides), maps.Clone(c.Users)
	return c
}

// Group decides for one tier or one override: its limits, enforced
// together, all or nothing, in their order. A *composite.Limiter is one (in
// memory, what New builds), and so is a *redislimit.Limiter (in Redis).
type Group interface {
	limiters.Settler
	limiters.Peeker
}

// A Builder builds the Group enforcing limits with algorithm a, for the
// tier or the override called name ("tier free", "user alice"). Groups of
// different names must not share state, even when their limits are the
// same: a Redis builder gives each name a key prefix of its own.
type Builder func(name string, a limiters.Algorithm, limits []limiters.Limit) (Group, error)

// Limiter decides each user's requests against their tier's limits.
type Limiter struct {
	build Builder
	// mu orders Reload, SetTier and Close; decisions take no lock, but
	// load the configuration in force, which those replace whole.
	mu     sync.Mutex
	closed bool
	now    atomic.Pointer[state]
}

// state is one configuration, built: read by decisions without a lock,
// never changed once stored, except for its moves.
type state struct {
	cfg   Config
	tiers map[string]Group
	// who places the users the configuration names (in a tier, or with
	// an override); anyone else is in def.
	who map[string]placement
	def placement
	// moves are SetTier's since this configuration: a map replaced, not
	// changed, so that SetTier costs the moves so far, not the users.
	moves atomic.Pointer[map[string]placement]
}

// placement is what decides for a user: an override's group (tier "") or
// a tier's, and the policy of its decisions.
type placement struct {
	lim    Group
	policy *limiters.Policy
}

var (
	_ limiters.Settler = (*Limiter)(nil)
	_ limiters.Peeker  = (*Limiter)(nil)
)

// New returns a limiter for c, in memory. The options apply to every
// limit's limiter.
func New(c Config, opts ...limiters.Option) (*Limiter, error) {
	return NewWith(c, func(_ string, a limiters.Algorithm, limits []limiters.Limit) (Group, error) {
		return composite.New(a, limits, opts...)
	})
}

// NewWith returns a limiter for c whose tiers and overrides build builds.
func NewWith(c Config, build Builder) (*Limiter, error) {
	if build == nil {
		return nil, fmt.Errorf("tiers: %w: no Builder", limiters.ErrInvalidParameter)
	}
	l := &Limiter{build: build}
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("tiers: Reload after Close")
	}
	old := l.now.Load()
	if old == nil {
		old = &state{}
	}
	var built []Group // to close if c fails half way
	build := func(name, what string, had Group, oldLimits, limits []limiters.Limit) (Group, error) {
		if had != nil && old.cfg.Algorithm == c.Algorithm && slices.Equal(oldLimits, limits) {
			return had, nil
		}
		b, err := l.build(name, c.Algorithm, limits)
		if err != nil {
			for _, b := range built {
				b.Close()
			}
			return nil, fmt.Errorf("tiers: %s: %w", what, err)
		}
		built = append(built, b)
		return b, nil
	}
	st := &state{cfg: c, tiers: map[string]Group{}, who: map[string]placement{}}
	for _, name := range slices.Sorted(maps.Keys(c.Tiers)) {
		b, err := build("tier "+name, "tier "+name, old.tiers[name], old.cfg.Tiers[name], c.Tiers[name])
		if err != nil {
			return err
		}
		st.tiers[name] = b
	}
	policies := map[string]*limiters.Policy{} // each tier's, made once
	for name, limits := range c.Tiers {
		policies[name] = tierPolicy(name, limits)
	}
	for user, tier := range c.Users {
		st.who[user] = placement{st.tiers[tier], policies[tier]}
	}
	kept := map[Group]bool{}
	for _, user := range slices.Sorted(maps.Keys(c.Overrides)) {
		var had Group
		if p, ok := old.who[user]; ok && p.policy.Tier == "" {
			had = p.lim
		}
		b, err := build("user "+user, fmt.Sprintf("user %q's override", user), had, old.cfg.Overrides[user], c.Overrides[user])
		if err != nil {
			return err
		}
		st.who[user] = placement{b, tierPolicy("", c.Overrides[user])}
		kept[b] = true
	}
	st.def = placement{st.tiers[c.Default], policies[c.Default]}
	for _, t := range st.tiers {
		kept[t] = true
	}
	l.now.Store(st)
	// What the new configuration no longer holds stops: a decision that
	// read it before the swap still finishes, on a limiter that decides
	// as ever and only no longer sweeps.
	for _, lim := range old.limiters() {
		if !kept[lim] {
			lim.Close()
		}
	}
	return nil
}

// tierPolicy is the policy of tier's decisions ("" for an override).
func tierPolicy(tier string, limits []limiters.Limit) *limiters.Policy {
	p := limiters.NewPolicy(limits...)
	p.Tier = tier
	return p
}

// limiters returns every group st holds.
func (st *state) limiters() []Group {
	var out []Group
	for _, t := range st.tiers {
		out = append(out, t)
	}
	for _, p := range st.who {
		if p.policy.Tier == "" {
			out = append(out, p.lim)
		}
	}
	return out
}

// place returns what decides for user: an override, else a SetTier move,
// else the configuration's tier, else the default tier.
func (st *state) place(user string) placement {
	p, named := st.who[user]
	if named && p.policy.Tier == "" {
		return p
	}
	if m := st.moves.Load(); m != nil {
		if q, ok := (*m)[user]; ok {
			return q
		}
	}
	if named {
		return p
	}
	return st.def
}

// Config returns the configuration in force, SetTier's moves included
// (a copy).
func (l *Limiter) Config() Config {
	st := l.now.Load()
	c := st.cfg.clone()
	if m := st.moves.Load(); m != nil {
		if c.Users == nil {
			c.Users = map[string]string{}
		}
		for user, p := range *m {
			c.Users[user] = p.policy.Tier
		}
	}
	return c
}

// SetTier moves user to tier, at once, until the next Reload. It does not
// touch an override. Each move copies the moves made since the last
// Reload: it is for the odd upgrade, while the configuration lists the
// many.
func (l *Limiter) SetTier(user, tier string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.now.Load()
	lim, ok := st.tiers[tier]
	if !ok {
		return fmt.Errorf("tiers: %w: no tier %q (the tiers: %s)", limiters.ErrInvalidParameter, tier, st.cfg.names())
	}
	moves := map[string]placement{}
	if m := st.moves.Load(); m != nil {
		moves = maps.Clone(*m)
	}
	moves[user] = placement{lim, tierPolicy(tier, st.cfg.Tiers[tier])}
	st.moves.Store(&moves)
	return nil
}

// TierOf returns the tier user is in (the default for a user not
// assigned), or "" when an override decides for them.
func (l *Limiter) TierOf(user string) string { return l.now.Load().place(user).policy.Tier }

// Limits returns the limits that decide for user, and their tier ("" for
// an override).
func (l *Limiter) Limits(user string) ([]limiters.Limit, string) {
	p := l.now.Load().place(user).policy
	return slices.Clone(p.Limits), p.Tier
}

// Decide reports whether r may happen under the limits of r.Key's tier
// (r.Key is the user), and consumes its cost if so. The Decision's Policy
// names the tier ("" for an override) and its limits, all of one
// configuration even while another is swapped in. The error is non-nil
// for r.N < 1, and when the group's backend did not decide (the Decision
// then follows its failure policy).
func (l *Limiter) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	p := l.now.Load().place(r.Key)
	d, err := p.lim.Decide(ctx, r)
	d.Policy = p.policy
	return d, err
}

// AllowN is Decide of n events for user now.
func (l *Limiter) AllowN(ctx context.Context, user string, n int) (limiters.Decision, error) {
	return l.Decide(ctx, limiters.Request{Key: user, N: n})
}

// Peek reports what Decide(ctx, r) would decide, consuming nothing.
func (l *Limiter) Peek(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	p := l.now.Load().place(r.Key)
	d, err := p.lim.Peek(ctx, r)
	d.Policy = p.policy
	return d, err
}

// Reserve decides r under the limits of r.Key's tier, as Decide does, and
// returns the reservation to settle (limiters.Settler).
func (l *Limiter) Reserve(ctx context.Context, r limiters.Request) (limiters.Reservation, error) {
	p := l.now.Load().place(r.Key)
	res, err := p.lim.Reserve(ctx, r)
	f := reservation.Get[limiters.Reservation, limiters.Decision](res)
	f.Decision.Policy = p.policy
	return reservation.Make[limiters.Reservation](f), err
}

// Settle settles a reservation at its actual cost under the limits of the
// tier its user is in now: a user moved to another tier between the two
// is refused (the reservation is another group's), rather than settled
// under limits it was not reserved under.
func (l *Limiter) Settle(ctx context.Context, s limiters.Settlement) (limiters.Decision, error) {
	p := l.now.Load().place(s.Reservation.Key())
	d, err := p.lim.Settle(ctx, s)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("tiers: user %q: %w", s.Reservation.Key(), err)
	}
	d.Policy = p.policy
	return d, nil
}

// Close closes every group: in memory, it stops their background
// sweepers, and decisions still work; Reload does not.
func (l *Limiter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, lim := range l.now.Load().limiters() {
		lim.Close()
	}
	return nil
}
