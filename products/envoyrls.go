package products

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// EnvoyRLS is Envoy's global rate limit service (github.com/envoyproxy/
// ratelimit), which Envoy's envoy.filters.http.ratelimit asks: each
// descriptor's limit is requests_per_unit in fixed windows of its unit
// aligned to the Unix epoch (src/limiter/cache_key.go: the key ends in
// now/divider·divider; a month is 30 days, a year 365), counted in Redis
// for every Envoy of the fleet. Every request increments every counter
// its descriptors match, refused or not (fixed_cache_impl.go's INCRBY),
// and is refused when any count, its own request counted, is over its
// limit.
type EnvoyRLS struct{}

// EnvoyRLSRule is a descriptor's rate_limit.
type EnvoyRLSRule struct {
	Unit            string // second, minute, hour, day, week, month, year
	RequestsPerUnit int
	meant           limiters.Limit
}

// rlsUnits are the units the service takes, and their windows.
var rlsUnits = []struct {
	name string
	d    time.Duration
}{{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}, {"week", 7 * 24 * time.Hour}, {"month", 30 * 24 * time.Hour}, {"year", 365 * 24 * time.Hour}}

func (EnvoyRLS) Name() string  { return "envoy-rls" }
func (EnvoyRLS) Title() string { return "Envoy's rate limit service" }
func (EnvoyRLS) File() string  { return "ratelimit.yaml" }

// Express keeps a window in the unit nearest it (by ratio), N scaled; a
// bucket as the most it admits in the unit nearest the time it takes to
// fill.
func (EnvoyRLS) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("envoy-rls: the limit %s: want a count and a period", want)
	}
	per := windowOf(want)
	best := rlsUnits[0]
	for _, u := range rlsUnits[1:4] {
		if math.Abs(math.Log(float64(u.d)/float64(per))) < math.Abs(math.Log(float64(best.d)/float64(per))) {
			best = u
		}
	}
	return EnvoyRLSRule{Unit: best.name, RequestsPerUnit: min(countIn(want, best.d), math.MaxUint32), meant: want}, nil
}

// Merge keeps one limit a unit, the lowest of its rules, and drops a
// shorter unit's whose limit is no lower than a longer's (up to a day,
// the windows nest: the longer counts all the shorter does).
func (EnvoyRLS) Merge(rules []Rule) []Rule {
	return mergeNested(rules, EnvoyRLSRule.length, func(r EnvoyRLSRule) int { return r.RequestsPerUnit })
}

func (r EnvoyRLSRule) String() string {
	return fmt.Sprintf("unit: %s, requests_per_unit: %d", r.Unit, r.RequestsPerUnit)
}

func (r EnvoyRLSRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.RequestsPerUnit, Per: r.length()}
	}
	return r.meant
}

func (r EnvoyRLSRule) Changes() string {
	s := "a window of the epoch, counting every request, refused or not"
	switch m := r.meant; {
	case m.N == 0:
	case m.Burst > 0:
		s = fmt.Sprintf("no bucket: the most %s admits in the unit nearest the time it takes to fill; ", m) + s
	case m.Per != r.length():
		s = fmt.Sprintf("no unit of %s: the nearest; ", configDuration(m.Per)) + s
	}
	return s
}

// Expect: from outside, a fixed window on the epoch that counts
// refusals.
func (r EnvoyRLSRule) Expect() string {
	return "fixed-window " + limiters.Limit{N: r.RequestsPerUnit, Per: r.length()}.String()
}

// Spares: a key is refused only once it has sent more than the limit in
// one window of the unit.
func (r EnvoyRLSRule) Spares() (int, time.Duration) { return r.RequestsPerUnit, r.length() }

func (r EnvoyRLSRule) length() time.Duration {
	for _, u := range rlsUnits {
		if u.name == strings.ToLower(r.Unit) {
			return u.d
		}
	}
	return 0
}

type rlsKey struct {
	rules         []EnvoyRLSRule
	starts, count []int64
}

// NewKey counts the key under each descriptor's limit.
func (EnvoyRLS) NewKey(rules []Rule) Key {
	k := &rlsKey{starts: make([]int64, len(rules)), count: make([]int64, len(rules))}
	for i, r := range rules {
		k.rules = append(k.rules, r.(EnvoyRLSRule))
		k.starts[i] = math.MinInt64
	}
	return k
}

// Decide counts the request in every rule's window, on whole seconds (the
// service's clock), and refuses it where a count is over its limit.
func (k *rlsKey) Decide(t int64) Decision {
	sec := floorDiv(t, int64(time.Second))
	admitted := true
	for i, r := range k.rules {
		div := int64(r.length() / time.Second)
		if w := floorDiv(sec, div) * div; w != k.starts[i] {
			k.starts[i], k.count[i] = w, 0
		}
		k.count[i]++
		if k.count[i] > int64(r.RequestsPerUnit) {
			admitted = false
		}
	}
	return Decision{Admitted: admitted}
}
