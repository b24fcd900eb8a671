package products

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// AWSWAF is an AWS WAF rate-based rule (wafv2 RateBasedStatement), as
// AWS documents it (waf-rule-statement-type-rate-based-*.html): the
// requests of each aggregation key over an evaluation window of 60, 120,
// 300 or 600 seconds looking back, checked about every 10 seconds, and
// the rule's action (Block) on every request of a key while its count at
// the last check is over the limit (no ban beyond it).
//
// AWS says its counts are estimates ("does not guarantee an exact limit
// match"; a key may pass for a while before it is caught, and stay
// blocked a while after). The model is the documented shape, not AWS's
// estimator: checks at every tenth second of the epoch, an exact count
// of every request of the key in the window before it (AWS does not say
// whether a blocked request counts; here it does).
type AWSWAF struct{}

// AWSWAFRule is a rate-based rule: Limit requests in a window of Window.
type AWSWAFRule struct {
	Limit  int
	Window time.Duration
	meant  limiters.Limit
}

// wafWindows are the evaluation windows AWS WAF takes; wafCheck how
// often it checks.
var wafWindows = []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

const (
	wafCheck    = 10 * time.Second
	wafMinLimit = 10
	wafMaxLimit = 2_000_000_000
)

func (AWSWAF) Name() string  { return "aws-waf" }
func (AWSWAF) Title() string { return "AWS WAF" }
func (AWSWAF) File() string  { return "aws-waf.json" }

// Express keeps a window of N per Per in the evaluation window nearest
// Per (by ratio), N scaled to it, 10 at least; a bucket (Burst its
// capacity) in the window nearest the time it takes to fill, as the most
// it admits in that window (Burst and what it refills).
func (AWSWAF) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("aws-waf: the limit %s: want a count and a period", want)
	}
	w := nearestDuration(wafWindows, windowOf(want))
	return AWSWAFRule{Limit: min(max(wafMinLimit, countIn(want, w)), wafMaxLimit), Window: w, meant: want}, nil
}

// windowOf is the length of want's window, or of the time its bucket
// takes to fill.
func windowOf(want limiters.Limit) time.Duration {
	if want.Burst > 0 {
		return time.Duration(float64(want.Per) * float64(want.Burst) / float64(want.N))
	}
	return want.Per
}

// countIn is want as a count in a window of w: a window's N scaled to
// it; a bucket's most in any w, its capacity and what it refills.
func countIn(want limiters.Limit, w time.Duration) int {
	n := float64(want.N) * float64(w) / float64(want.Per)
	if want.Burst > 0 {
		return want.Burst + int(math.Ceil(n-1e-9))
	}
	return max(1, int(math.Round(n)))
}

// nearestDuration is the one of ds nearest d by ratio (the first, at a
// tie).
func nearestDuration(ds []time.Duration, d time.Duration) time.Duration {
	return slices.MinFunc(ds, func(a, b time.Duration) int {
		da, db := math.Abs(math.Log(float64(a)/float64(d))), math.Abs(math.Log(float64(b)/float64(d)))
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
}

// Merge keeps one rule a window, the lowest limit of its rules (two
// counts of one window are the same count), and a shorter window's limit
// no higher than a longer's (the longer counts all the shorter does:
// above it, the shorter never blocks alone), shortest window first.
func (AWSWAF) Merge(rules []Rule) []Rule {
	return mergeNested(rules, func(r AWSWAFRule) time.Duration { return r.Window }, func(r AWSWAFRule) int { return r.Limit })
}

func (r AWSWAFRule) String() string {
	return fmt.Sprintf("Limit %d, EvaluationWindowSec %d", r.Limit, int(r.Window/time.Second))
}

func (r AWSWAFRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.Limit, Per: r.Window}
	}
	return r.meant
}

func (r AWSWAFRule) Changes() string {
	s := "counted as AWS estimates it, checked about every 10 seconds: a key is blocked while over, from the check that finds it so to the one that finds it under"
	m := r.meant
	switch {
	case m.N == 0:
		return s
	case m.Burst > 0:
		return fmt.Sprintf("no bucket: %d in %s, the most %s admits in the window AWS WAF has nearest the time it takes to fill; %s", r.Limit, configDuration(r.Window), m, s)
	case m.Per != r.Window:
		return fmt.Sprintf("no window of %s: %d in %s, the window AWS WAF has nearest it; %s", configDuration(m.Per), r.Limit, configDuration(r.Window), s)
	case m.N != r.Limit:
		return fmt.Sprintf("AWS WAF's least limit is %d; %s", wafMinLimit, s)
	}
	return s
}

// Expect: from outside, nearest a sliding count of the window (the
// checks' lag is a trait the probe does not name).
func (r AWSWAFRule) Expect() string {
	return "sliding-log " + limiters.Limit{N: r.Limit, Per: r.Window}.String()
}

// Spares: a key is blocked only from a check that counts more than Limit
// in the window before it.
func (r AWSWAFRule) Spares() (int, time.Duration) { return r.Limit, r.Window }

// wafKey is a key's requests within the longest window, and whether the
// last check found it over a rule's limit.
type wafKey struct {
	rules   []AWSWAFRule
	longest int64
	times   []int64
	check   int64 // the last check's time
	blocked bool
}

// NewKey counts the key under each rule.
func (AWSWAF) NewKey(rules []Rule) Key {
	k := &wafKey{check: math.MinInt64}
	for _, r := range rules {
		wr := r.(AWSWAFRule)
		k.rules = append(k.rules, wr)
		k.longest = max(k.longest, int64(wr.Window))
	}
	return k
}

// Decide checks the key again at each tenth second past, from the
// requests before it: blocked while a rule counts more than its limit in
// its window; then counts the request, blocked or not.
func (k *wafKey) Decide(t int64) Decision {
	if c := floorDiv(t, int64(wafCheck)) * int64(wafCheck); c > k.check {
		k.check = c
		i := 0
		for i < len(k.times) && k.times[i] < c-k.longest {
			i++
		}
		k.times = k.times[i:]
		k.blocked = false
		for _, r := range k.rules {
			from := c - int64(r.Window)
			n := len(k.times) - sortSearch(k.times, from)
			// The requests at the check's instant are after it.
			n -= len(k.times) - sortSearch(k.times, c)
			if n > r.Limit {
				k.blocked = true
			}
		}
	}
	k.times = append(k.times, t)
	return Decision{Admitted: !k.blocked}
}

// sortSearch is the first index of times at or after t.
func sortSearch(times []int64, t int64) int {
	i, _ := slices.BinarySearch(times, t)
	return i
}
