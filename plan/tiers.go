package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// The tiers a plan writes beside its bucket: the keys that look like many
// users and the steady pollers, each the bucket scaled to spare them.

// tierOf is the policy that spares every one of the clients many: the
// bucket of rate k and burst b scaled, to the lowest rate of the grid at
// which each needs no more than b times the scale (the grid's rate over
// rate k); when none does, rate k's policy times the least power of two
// that spares them (a key's least burst at a higher rate is no more than
// at rate k, so that much burst is enough).
func tierOf(cv *curves, many []int32, k int, b int64) Tier {
	r := perSecond(cv.rates[k])
	for j := k; j < len(cv.rates); j++ {
		scale := perSecond(cv.rates[j]) / r
		burst := int64(math.Ceil(float64(b) * scale))
		if !slices.ContainsFunc(many, func(id int32) bool { return cv.burst(id, j) > burst }) {
			return Tier{Scale: scale, Policy: limiters.Limit{N: cv.rates[j].N, Per: cv.rates[j].Per, Burst: int(burst)}}
		}
	}
	var most int64
	for _, id := range many {
		most = max(most, cv.burst(id, k))
	}
	scale := int64(1)
	for scale*b < most {
		scale *= 2
	}
	return Tier{Scale: float64(scale), Policy: limiters.Limit{N: cv.rates[k].N * int(scale), Per: cv.rates[k].Per, Burst: int(b * scale)}}
}

// TierFile is the bucket suggested as a ratelab serve --config file: every
// key in the default tier, the keys that look like many users in a tier
// of their own (at most Config.Top of them listed, as the tables do).
// Empty when the plan suggested no bucket.
func (p *Plan) TierFile(log string) []byte {
	b := p.Bucket
	if b.Rate.N == 0 {
		return nil
	}
	var s strings.Builder
	fmt.Fprintf(&s, "# ratelab plan's policy for %s: a bucket for every key, the keys that look\n# like many users in a tier of their own (ratelab serve --config FILE).\n", log)
	s.WriteString("algorithm: gcra\ndefault_tier: users\ntiers:\n")
	fmt.Fprintf(&s, "  users: [%s]\n", b.Policy())
	tiers := p.tiers()
	for _, t := range tiers {
		fmt.Fprintf(&s, "  %s: [%s]\n", t.name, t.policy)
	}
	if len(tiers) > 0 {
		s.WriteString("users:\n")
	}
	for _, t := range tiers {
		for _, c := range t.keys {
			fmt.Fprintf(&s, "  %s: %s\n", strconv.Quote(c.Key), t.name)
		}
	}
	return []byte(s.String())
}

// aTier is a tier of keys a plan writes beside its bucket: the keys that
// look like many users (shared), the steady pollers (pollers), each where
// the bucket would refuse them (a scale above 1) or, for the shared keys,
// as the plan has always written them.
type aTier struct {
	name   string
	policy limiters.Limit
	keys   []Client
	share  float64
	scale  float64 // the tier's policy over the bucket's
}

// maxTierKeys is how many pollers a plan lists in their tier, at most.
const maxTierKeys = 1000

// tiers are the plan's tiers besides its bucket: the shared keys', and
// the pollers' where the bucket does not spare them as it is.
func (p *Plan) tiers() []aTier {
	var out []aTier
	if t := p.SharedTier; t.Keys > 0 && len(p.Shared) > 0 {
		out = append(out, aTier{"shared", t.Policy, p.Shared, t.Share, t.Scale})
	}
	if t := p.PollerTier; t.Keys > 0 && len(p.Pollers) > 0 && t.Scale > 1 {
		out = append(out, aTier{"pollers", t.Policy, p.Pollers, t.Share, t.Scale})
	}
	return out
}
