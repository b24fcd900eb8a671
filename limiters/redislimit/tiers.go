package redislimit

import (
	"slices"
	"strings"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Tiers returns a tiers.Builder that keeps every tier and every override
// in Redis through c, for a fleet that shares its users' quotas:
//
//	l, err := tiers.NewWith(cfg, redislimit.Tiers(client, redislimit.WithPrefix("api:")))
//
// Each tier's keys are under a prefix of its own, the options' prefix then
// "tier:NAME:" ("user:NAME:" for an override), so that two tiers with the
// same limits never share a user's quota, as in memory. Braces and % in a
// name are escaped as in keys.
func Tiers(c Client, opts ...Option) tiers.Builder {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	base := o.Prefix
	if base == "" {
		base = "ratelab:"
	}
	return func(name string, a limiters.Algorithm, limits []composite.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ")
		p := base + kind + ":" + escaper.Replace(who) + ":"
		return NewComposite(c, a, limits, append(slices.Clip(opts), WithPrefix(p))...)
	}
}
