package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
)

// The plan's policy in a product's terms (--emit haproxy): the limits the
// product can keep nearest to the plan's, raised where the product would
// refuse a key the plan spares, and the log replayed through the
// product's own model, not through the algorithm it is named after.

// productScales are the factors a product's limits are raised by, in
// turn, until it refuses no key the plan spares, or lowered by until it
// refuses every key the plan does (asMeant is 1's index).
var productScales = []float64{0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4}

const asMeant = 4

// aCandidate is one of the plan's policies written for a product at one
// scale, and what its replay refused.
type aCandidate struct {
	pp      products.Choice
	refused []int64 // of each key, by number
	// strays are the keys refused that the plan spares: of the keys the
	// policy is for, then of each tier.
	strays []int
}

// decideProducts writes the plan's policy for each product asked
// (Config.Products) and decides it over the requests of every key (the
// keys by number): the plan's windows, a window of its own (one that
// spares every user the bucket spares, whatever the product's estimate,
// chosen where it stands farthest below the keys the bucket refuses),
// and the bucket as the product can say it, each at the least scale at
// which the product refuses no key the plan spares; of those, the one
// that refuses the fewest keys the plan does not, then misses the fewest
// of those it does. users are the keys the policy is for; decided nil
// decides nothing (each then keeps the first of them, as meant).
func (p *Plan) decideProducts(keys []string, decided *kept) {
	p.Products, p.productWindow, p.productTierIDs = nil, limiters.Limit{}, nil
	if p.Bucket.Rate.N == 0 {
		return
	}
	var want func(id int32) bool
	in := make([]bool, len(keys))
	if decided != nil {
		want = p.cv.mayBucket(p.Bucket.Policy()) // exact at a rate of the curves'
		// The window is for every key a tier does not take: the users,
		// and the pollers the bucket spares as it is.
		tiered := map[string]int{}
		ts := p.productTiers()
		for i, t := range ts {
			for _, c := range t.keys {
				tiered[c.Key] = i + 1
			}
		}
		p.productTierIDs = make([][]int32, len(ts))
		for id, k := range keys {
			i := tiered[k]
			if in[id] = i == 0; i > 0 {
				p.productTierIDs[i-1] = append(p.productTierIDs[i-1], int32(id))
			}
		}
		p.productWindow = p.separatingWindow(in, want)
		for id := range in {
			in[id] = true
		}
	}
	for _, prod := range p.Config.Products {
		if k, ok := prod.(products.Keyed); ok {
			if err := k.Keys(p.Config.Key); err != nil {
				p.Products = append(p.Products, products.Choice{Product: prod, Cannot: err.Error(), Refused: -1, Clients: -1, Banned: -1})
				continue
			}
		}
		var best *aCandidate
		for _, of := range p.productOf() {
			best = p.searchScales(prod, of, keys, decided, in, want, best)
			if b := best.pp; b.Strays+b.Missed == 0 && b.Scale == 1 && b.Refused >= 0 {
				break // the plan's keys exactly, as meant: none after can do better
			}
		}
		if best != nil {
			p.Products = append(p.Products, best.pp)
		}
	}
}

// searchScales is the best of best and of's policy in prod's terms at
// the scales tried: the keys' rules and each tier's raised while they
// refuse a key they should spare, apart (a key's decisions are its own);
// the keys' rules, as meant sparing every key they should and missing
// some the plan refuses, lowered while they still spare them.
func (p *Plan) searchScales(prod products.Product, of string, keys []string, decided *kept, in []bool, want func(id int32) bool, best *aCandidate) *aCandidate {
	// at are the indexes in productScales of the keys' rules and of
	// each tier's: each raised while it refuses a key it should
	// spare, apart (a key's decisions are its own); the keys' rules,
	// as meant sparing every key they should and missing some the
	// plan refuses, lowered while they still spare them.
	at := make([]int, 1+len(p.productTiers()))
	for i := range at {
		at[i] = asMeant
	}
	lowering, settled := false, false
	for {
		c, err := p.productCandidate(prod, of, at)
		if err != nil {
			break
		}
		if decided == nil {
			c.pp.Refused, c.pp.Clients, c.pp.Banned = -1, -1, -1
			return cmp.Or(best, &c)
		}
		c.replay(p.cv, keys, p.productTierIDs, *decided, in, want)
		if best == nil || c.better(best) {
			best = &c
		}
		moved := false
		switch {
		case settled:
		case c.strays[0] > 0 && lowering:
			settled = true
		case c.strays[0] > 0 && at[0]+1 < len(productScales):
			at[0]++
			moved = true
		case c.strays[0] == 0 && c.pp.Missed > 0 && at[0] <= asMeant && at[0] > 0:
			at[0]--
			lowering, moved = true, true
		default:
			settled = true
		}
		for i, n := range c.strays[1:] {
			if n > 0 && at[1+i]+1 < len(productScales) {
				at[1+i]++
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	return best
}

// productOf are the plan's policies a product may keep: the windows
// first where they set the same keys apart as the bucket (a window is
// what most products keep), then a window of the product's own, then the
// bucket.
func (p *Plan) productOf() []string {
	var out []string
	if w := p.Windows; w.Short.N > 0 && w.Separated && sameKeys(p.Caught, p.WindowsCaught) {
		out = append(out, "windows")
	}
	if p.productWindow.N > 0 {
		out = append(out, "window")
	}
	out = append(out, "bucket")
	if w := p.Windows; w.Short.N > 0 && !slices.Contains(out, "windows") {
		out = append(out, "windows")
	}
	return out
}

// separatingWindow is a window of N per a period of the curves' that
// spares every key of in the bucket spares (want says which it refuses)
// whatever a product estimates over it: N is at least what each sends in
// two periods (a product's estimate weighs the period before at most in
// full), times the headroom where that stays below the keys it refuses.
// Of the periods, the one above whose N the most of those keys send,
// then where the least of them sends the most times N; none (N 0) where
// no key the bucket refuses passes N at any.
func (p *Plan) separatingWindow(in []bool, want func(id int32) bool) limiters.Limit {
	cv := p.cv
	var best limiters.Limit
	bestAbove, bestRatio := 0, 0.0
	var peaks []int64
	for k, period := range cv.periods {
		var spared int64
		peaks = peaks[:0]
		for id, ok := range in {
			switch {
			case !ok:
			case want(int32(id)):
				peaks = append(peaks, cv.peak(int32(id), k))
			default:
				spared = max(spared, cv.peak2(int32(id), k))
			}
		}
		spared = max(spared, 1)
		least := int64(math.MaxInt64)
		if len(peaks) > 0 {
			least = slices.Min(peaks)
		}
		n := max(int64(math.Ceil(float64(spared)*p.Config.Headroom)), spared+1)
		if n >= least {
			n = spared
		}
		above := 0
		for _, peak := range peaks {
			if peak > n {
				above++
			}
		}
		ratio := float64(least) / float64(n)
		if above > bestAbove || above == bestAbove && above > 0 && ratio > bestRatio {
			best, bestAbove, bestRatio = limiters.Limit{N: int(n), Per: time.Duration(period)}, above, ratio
		}
	}
	return best
}

// productTiers are the plan's tiers as a product is written them: the
// steady pollers in a tier of their own even where the bucket spares
// them as it is, since a product's window, fitted to the users, may not
// (a monitor's every two seconds is 1,800 an hour).
func (p *Plan) productTiers() []aTier {
	ts := p.tiers()
	if t := p.PollerTier; t.Keys > 0 && len(p.Pollers) > 0 && t.Scale <= 1 {
		ts = append(ts, aTier{"pollers", t.Policy, p.Pollers, t.Share, 1})
	}
	return ts
}

// productCandidate is the plan's policy of (bucket or windows) in prod's
// terms, its limits raised by productScales[at[0]], and its tiers' (the
// plan's tiers, each its scale of it), each raised by its own
// productScales[at[1+i]].
func (p *Plan) productCandidate(prod products.Product, of string, at []int) (aCandidate, error) {
	c := aCandidate{pp: products.Choice{Product: prod, Of: of, Scale: productScales[at[0]]}}
	var err error
	if c.pp.Rules, err = p.productRules(prod, of, c.pp.Scale, nil); err != nil {
		return c, err
	}
	for i, t := range p.productTiers() {
		tier := products.Tier{Name: t.name}
		for _, k := range t.keys {
			tier.Keys = append(tier.Keys, k.Key)
		}
		raise := productScales[at[1+i]]
		c.pp.TierScales = append(c.pp.TierScales, raise)
		if tier.Rules, err = p.productRules(prod, of, c.pp.Scale*t.scale*raise, p.tierNeed(i)); err != nil {
			return c, fmt.Errorf("the %s tier: %w", t.name, err)
		}
		c.pp.Tiers = append(c.pp.Tiers, tier)
	}
	return c, nil
}

// tierNeed is the least N of a window of each length that spares every
// key of the product's tier i whatever a product estimates over it: the
// most any sends in two windows (nil where the keys are not known: no
// request decided).
func (p *Plan) tierNeed(i int) func(per time.Duration) int {
	if i >= len(p.productTierIDs) {
		return nil
	}
	ids := p.productTierIDs[i]
	return func(per time.Duration) int {
		j, _ := slices.BinarySearch(p.cv.lengths, int64(2*per))
		var most int64
		for _, id := range ids {
			if j < len(p.cv.lengths) {
				most = max(most, p.cv.peaks[int(id)*len(p.cv.lengths)+j])
			} else {
				most = max(most, p.cv.of[id].total)
			}
		}
		return int(most)
	}
}

// productRules are the plan's bucket, windows or window of its own,
// their limits scaled, as prod keeps them; a window's N no less than
// need says (a tier's keys' need).
func (p *Plan) productRules(prod products.Product, of string, scale float64, need func(per time.Duration) int) ([]products.Rule, error) {
	var limits []limiters.Limit
	switch of {
	case "bucket":
		l := p.Bucket.Policy()
		l.Burst = scaled(l.Burst, scale)
		limits = []limiters.Limit{l}
	case "window":
		l := p.productWindow
		l.N = scaled(l.N, scale)
		limits = []limiters.Limit{l}
	default:
		for _, l := range []limiters.Limit{p.Windows.Short, p.Windows.Long} {
			l.N = scaled(l.N, scale)
			limits = append(limits, l)
		}
	}
	var rules []products.Rule
	for _, l := range limits {
		if need != nil && l.Burst == 0 {
			l.N = max(l.N, need(l.Per))
		}
		r, err := prod.Express(l)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	if m, ok := prod.(products.Merging); ok {
		rules = m.Merge(rules)
	}
	return rules, nil
}

// scaled is n×scale, rounded up.
func scaled(n int, scale float64) int {
	return int(math.Ceil(float64(n)*scale - 1e-9))
}

// replay decides the requests of the keys in through the product's model
// of c's rules, each key its own, and counts what it refuses against
// want, the keys the plan's policy refuses.
func (c *aCandidate) replay(cv *curves, keys []string, tierIDs [][]int32, decided kept, in []bool, want func(id int32) bool) {
	pp := &c.pp
	may := only(in, cv.mayProduct(pp.Rules))
	tier := make([]int, len(keys)) // each key's tier, by number, and 1; 0 for none
	for i, ids := range tierIDs {
		for _, id := range ids {
			tier[id], may[id] = i+1, true
		}
	}
	state := make([]products.Key, len(keys))
	c.refused = make([]int64, len(keys))
	decided.each(may, func(r keptRequest) {
		k := state[r.id]
		if k == nil {
			rules := pp.Rules
			if t := tier[r.id]; t > 0 {
				rules = pp.Tiers[t-1].Rules
			}
			k = pp.Product.NewKey(rules)
			state[r.id] = k
		}
		if d := k.Decide(r.at); !d.Admitted {
			c.refused[r.id]++
			pp.Refused++
			if d.Banned {
				pp.Banned++
			}
		}
	})
	var hit []int
	c.strays = make([]int, 1+len(pp.Tiers))
	for id, n := range c.refused {
		switch {
		case n > 0:
			pp.Clients++
			hit = append(hit, id)
			if tier[id] > 0 || !want(int32(id)) { // a tier's keys are spared
				c.strays[tier[id]]++
				pp.Strays++
				pp.StrayKeys = appendFew(pp.StrayKeys, keys[id])
			}
		case in[id] && tier[id] == 0 && want(int32(id)):
			pp.Missed++
			pp.MissedKeys = appendFew(pp.MissedKeys, keys[id])
		}
	}
	slices.SortFunc(hit, func(x, y int) int { return cmp.Or(cmp.Compare(c.refused[y], c.refused[x]), cmp.Compare(x, y)) })
	for _, id := range hit[:min(len(hit), 5)] {
		pp.Caught = append(pp.Caught, keys[id])
	}
}

// better says whether c is a better answer than o: fewer keys refused
// that the plan spares, then fewer missed of those it refuses, then the
// nearer the plan's limits; at a tie, the first tried.
func (c *aCandidate) better(o *aCandidate) bool {
	return cmp.Or(cmp.Compare(c.pp.Strays, o.pp.Strays), cmp.Compare(c.pp.Missed, o.pp.Missed),
		cmp.Compare(math.Abs(math.Log(c.pp.Scale)), math.Abs(math.Log(o.pp.Scale)))) < 0
}

// appendFew appends key to keys while they are fewer than five.
func appendFew(keys []string, key string) []string {
	if len(keys) < 5 {
		keys = append(keys, key)
	}
	return keys
}

// mayProduct says which keys rules may refuse, from the curves: a rule
// that spares every key sending at most n in any window of a length
// (products.Bounded) refuses none whose most there is at most n.
func (cv *curves) mayProduct(rules []products.Rule) func(id int32) bool {
	type bound struct {
		n int64
		j int // the first length at least the window's; len: the whole log
	}
	var bs []bound
	for _, r := range rules {
		b, ok := r.(products.Bounded)
		if !ok {
			return func(int32) bool { return true }
		}
		n, within := b.Spares()
		j, _ := slices.BinarySearch(cv.lengths, int64(within))
		bs = append(bs, bound{int64(n), j})
	}
	return func(id int32) bool {
		for _, b := range bs {
			most := cv.of[id].total
			if b.j < len(cv.lengths) {
				most = cv.peaks[int(id)*len(cv.lengths)+b.j]
			}
			if most > b.n {
				return true
			}
		}
		return false
	}
}
