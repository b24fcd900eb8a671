package products

import (
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// CloudArmor is a Google Cloud Armor rate limiting rule, as Google
// documents it (armor/docs/rate-limiting-overview): throttle, requests
// over rate_limit_threshold's count in its interval refused "for the
// rest of the threshold interval"; or rate_based_ban, every request of
// the key refused for the rest of the interval and ban_duration_sec
// more. Intervals of 10 s to 1 h from a fixed set; enforced per region
// and approximate ("enforced rate limits are approximate"), the counter
// not published: the model is a window of the interval on the epoch,
// every request counted, one region.
//
// Rules are evaluated by priority and the first that matches decides: a
// request a throttle lets through ends there, so one throttle keeps a
// key (which of two would decide is not documented): the plan keeps the
// strictest of its rules.
type CloudArmor struct{}

// CloudArmorRule is a throttle (Ban 0) or a rate-based ban: Count in
// Interval.
type CloudArmorRule struct {
	Count    int
	Interval time.Duration
	Ban      time.Duration
	meant    limiters.Limit
}

// cloudArmorIntervals and cloudArmorBans are the values the API takes.
var (
	cloudArmorIntervals = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour}
	cloudArmorBans      = []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour}
)

const (
	cloudArmorMaxCount    = 1_000_000
	cloudArmorMaxBanCount = 10_000
)

func (CloudArmor) Name() string  { return "cloud-armor" }
func (CloudArmor) Title() string { return "Cloud Armor" }
func (CloudArmor) File() string  { return "cloud-armor.json" }

// Express keeps a window as a throttle in the interval nearest it (by
// ratio), N scaled; a bucket as the most it admits in the interval
// nearest the time it takes to fill.
func (CloudArmor) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("cloud-armor: the limit %s: want a count and a period", want)
	}
	iv := nearestDuration(cloudArmorIntervals, windowOf(want))
	return CloudArmorRule{Count: min(countIn(want, iv), cloudArmorMaxCount), Interval: iv, meant: want}, nil
}

// Merge keeps one rule, the strictest by rate: a throttle that lets a
// request through ends the evaluation.
func (CloudArmor) Merge(rules []Rule) []Rule {
	best := rules[0].(CloudArmorRule)
	for _, r := range rules[1:] {
		cr := r.(CloudArmorRule)
		if float64(cr.Count)/cr.Interval.Seconds() < float64(best.Count)/best.Interval.Seconds() {
			best = cr
		}
	}
	return []Rule{best}
}

func (r CloudArmorRule) String() string {
	s := fmt.Sprintf("count %d, interval_sec %d", r.Count, int(r.Interval/time.Second))
	if r.Ban > 0 {
		s += fmt.Sprintf(", ban_duration_sec %d", int(r.Ban/time.Second))
	}
	return s
}

func (r CloudArmorRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.Count, Per: r.Interval}
	}
	return r.meant
}

func (r CloudArmorRule) Changes() string {
	s := "counted as Cloud Armor estimates it, in each region apart, in windows of the interval"
	if r.Ban > 0 {
		s += fmt.Sprintf(", then every request of the key refused for the rest of the interval and %s (a ban)", configDuration(r.Ban))
	}
	m := r.meant
	switch {
	case m.N == 0:
	case m.Burst > 0:
		s = fmt.Sprintf("no bucket: the most %s admits in the interval Cloud Armor has nearest the time it takes to fill; ", m) + s
	case m.Per != r.Interval:
		s = fmt.Sprintf("no interval of %s: the nearest Cloud Armor has; ", configDuration(m.Per)) + s
	}
	return s
}

// Expect: from outside, a fixed window of the interval.
func (r CloudArmorRule) Expect() string {
	return "fixed-window " + limiters.Limit{N: r.Count, Per: r.Interval}.String()
}

// Spares: a key is refused only once it has sent more than Count in an
// interval's window.
func (r CloudArmorRule) Spares() (int, time.Duration) { return r.Count, r.Interval }

type cloudArmorKey struct {
	rule                   CloudArmorRule
	start, count, banUntil int64
}

// NewKey counts the key under the rule that decides it: the first.
func (CloudArmor) NewKey(rules []Rule) Key {
	k := &cloudArmorKey{start: -1}
	if len(rules) > 0 {
		k.rule = rules[0].(CloudArmorRule)
	}
	return k
}

// Decide counts the request in the interval's window: over the count, it
// is refused (and a ban set till the interval's end and its duration
// more); in a ban, refused, Banned where the count alone would admit it.
func (k *cloudArmorKey) Decide(t int64) Decision {
	r := k.rule
	if r.Count == 0 {
		return Decision{Admitted: true}
	}
	iv := int64(r.Interval)
	if w := floorDiv(t, iv) * iv; w != k.start {
		k.start, k.count = w, 0
	}
	k.count++
	switch {
	case k.count > int64(r.Count):
		if r.Ban > 0 && k.banUntil <= t {
			k.banUntil = k.start + iv + int64(r.Ban)
		}
		return Decision{}
	case k.banUntil > t:
		return Decision{Banned: true}
	}
	return Decision{Admitted: true}
}
