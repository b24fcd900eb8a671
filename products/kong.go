package products

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Kong is Kong's open-source rate-limiting plugin (kong/plugins/
// rate-limiting/handler.lua, kong/tools/timestamp.lua): a limit for each
// of the periods second, minute, hour, day, month and year, each counted
// in fixed windows aligned to the UTC calendar (the start of the second,
// minute, hour, day, calendar month, calendar year), on ngx.time()'s
// whole seconds. A request is refused when any period's count has
// reached its limit, and then counts nowhere; admitted, it counts in
// every period's window.
//
// Kong counts asynchronously (a timer after the request), so requests at
// once can all pass before the counters move: the model counts each
// request before the next, the least Kong admits.
type Kong struct{}

// KongRule is a period's limit.
type KongRule struct {
	Period string // second, minute, hour, day, month, year
	Limit  int
	meant  limiters.Limit
}

// kongPeriods are the periods Kong limits, their lengths (a month's and
// a year's the longest, for bounds), in order.
var kongPeriods = []struct {
	name string
	d    time.Duration
}{{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}, {"month", 31 * 24 * time.Hour}, {"year", 366 * 24 * time.Hour}}

func (Kong) Name() string  { return "kong" }
func (Kong) Title() string { return "Kong" }
func (Kong) File() string  { return "kong.yaml" }

// Express keeps a window of N per Per whose Per is one of Kong's periods
// as it is; another as the period nearest it (by ratio), N scaled to it
// (299/15min: 1196 an hour); a bucket (Burst its capacity) in the period
// nearest the time it takes to fill, as the most it admits in one (its
// capacity and what it refills: 20/s burst 38, second: 58).
func (Kong) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("kong: the limit %s: want a count and a period", want)
	}
	per := windowOf(want)
	best := slices.MinFunc(kongPeriods[:4], func(a, b struct {
		name string
		d    time.Duration
	}) int {
		da, db := math.Abs(math.Log(float64(a.d)/float64(per))), math.Abs(math.Log(float64(b.d)/float64(per)))
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	return KongRule{Period: best.name, Limit: countIn(want, best.d), meant: want}, nil
}

// Merge keeps one limit a period, the lowest of its rules (two counts of
// one window are the same count), and no shorter period's limit that is
// no lower than a longer's (the longer's count holds the shorter's: the
// shorter never refuses alone; Kong's schema refuses it higher).
func (Kong) Merge(rules []Rule) []Rule {
	return mergeNested(rules, KongRule.length, func(r KongRule) int { return r.Limit })
}

func (r KongRule) String() string { return fmt.Sprintf("%s: %d", r.Period, r.Limit) }

// Meant is the limit the rule was expressed for; a limit read back means
// its window.
func (r KongRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.Limit, Per: r.length()}
	}
	return r.meant
}

func (r KongRule) Changes() string {
	m := r.meant
	if m.N == 0 {
		return ""
	}
	if m.Burst > 0 {
		return fmt.Sprintf("no bucket: %d a %s, in windows of the UTC calendar, the most %s admits in one", r.Limit, r.Period, m)
	}
	if m.Per != r.length() {
		return fmt.Sprintf("no window of %s: %d a %s, in windows of the UTC calendar", configDuration(m.Per), r.Limit, r.Period)
	}
	return "a window of the UTC calendar, not a sliding one"
}

// Expect: from outside, a fixed window aligned to the epoch (the UTC
// calendar's seconds, minutes and hours are).
func (r KongRule) Expect() string {
	return "fixed-window " + limiters.Limit{N: r.Limit, Per: r.length()}.String()
}

// Spares: a key refused has sent Limit in one calendar window, which a
// window of the period's longest length holds.
func (r KongRule) Spares() (int, time.Duration) { return r.Limit, r.length() }

func (r KongRule) length() time.Duration {
	for _, p := range kongPeriods {
		if p.name == r.Period {
			return p.d
		}
	}
	return 0
}

// kongWindow is the start of the calendar window of period holding the
// second sec (UTC).
func kongWindow(period string, sec int64) int64 {
	switch period {
	case "second":
		return sec
	case "minute":
		return sec - sec%60
	case "hour":
		return sec - sec%3600
	case "day":
		return sec - sec%86400
	}
	t := time.Unix(sec, 0).UTC()
	if period == "month" {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC).Unix()
}

type kongKey struct {
	rules  []KongRule
	starts []int64
	counts []int
}

// NewKey counts the key in each rule's period.
func (Kong) NewKey(rules []Rule) Key {
	k := &kongKey{starts: make([]int64, len(rules)), counts: make([]int, len(rules))}
	for i, r := range rules {
		k.rules = append(k.rules, r.(KongRule))
		k.starts[i] = math.MinInt64
	}
	return k
}

func (k *kongKey) Decide(t int64) Decision {
	sec := floorDiv(t, int64(time.Second))
	for i, r := range k.rules {
		if w := kongWindow(r.Period, sec); w != k.starts[i] {
			k.starts[i], k.counts[i] = w, 0
		}
		if k.counts[i] >= r.Limit {
			return Decision{}
		}
	}
	for i := range k.counts {
		k.counts[i]++
	}
	return Decision{Admitted: true}
}
