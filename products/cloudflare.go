package products

import (
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Cloudflare is a Cloudflare rate limiting rule (the Rulesets API's
// phase http_ratelimit), as Cloudflare documents it
// (waf/rate-limiting-rules/parameters.mdx, request-rate.mdx): requests
// counted per key (and per data center) over a period of 10, 60, 120,
// 300, 600 or 3600 seconds; a request is acted on when the count before
// it exceeds requests_per_period (a limit of 1 blocks the third request,
// its count 2). With mitigation_timeout above 0, the action then holds
// every request of the key for that long: a ban. With 0, only requests
// over the rate are acted on (with block, an Enterprise plan's).
//
// Cloudflare does not say how it counts ("not designed to allow a
// precise number of requests"; counters a few seconds late). The model
// is said to be approximate: windows of the period aligned to the epoch,
// every request counted, one data center.
type Cloudflare struct{}

// CloudflareRule is a rule's ratelimit: RequestsPerPeriod in Period, and
// the ban (MitigationTimeout, 0 for none).
type CloudflareRule struct {
	RequestsPerPeriod int
	Period, Timeout   time.Duration
	meant             limiters.Limit
}

// cloudflarePeriods and cloudflareTimeouts are the values the API takes.
var (
	cloudflarePeriods  = []time.Duration{10 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour}
	cloudflareTimeouts = []time.Duration{0, 10 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour, 24 * time.Hour}
)

func (Cloudflare) Name() string  { return "cloudflare" }
func (Cloudflare) Title() string { return "Cloudflare" }
func (Cloudflare) File() string  { return "cloudflare.json" }

// Express keeps a window in the period nearest it (by ratio), N scaled,
// less the one more Cloudflare lets through; a bucket as the most it
// admits in the period nearest the time it takes to fill. The ban is as
// long as the period (every plan but Enterprise blocks only with one;
// the shortest that covers the rest of a period over the limit).
func (Cloudflare) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("cloudflare: the limit %s: want a count and a period", want)
	}
	p := nearestDuration(cloudflarePeriods, windowOf(want))
	return CloudflareRule{RequestsPerPeriod: max(1, countIn(want, p)-1), Period: p, Timeout: p, meant: want}, nil
}

func (r CloudflareRule) String() string {
	return fmt.Sprintf("requests_per_period %d, period %d, mitigation_timeout %d", r.RequestsPerPeriod, int(r.Period/time.Second), int(r.Timeout/time.Second))
}

func (r CloudflareRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.RequestsPerPeriod + 1, Per: r.Period}
	}
	return r.meant
}

func (r CloudflareRule) Changes() string {
	s := fmt.Sprintf("counted as Cloudflare estimates it, in each data center apart; %d in %s and one more", r.RequestsPerPeriod, configDuration(r.Period))
	if r.Timeout > 0 {
		s += fmt.Sprintf(", then every request of the key refused for %s (a ban)", configDuration(r.Timeout))
	}
	m := r.meant
	switch {
	case m.N == 0:
	case m.Burst > 0:
		s = fmt.Sprintf("no bucket: the most %s admits in the period Cloudflare has nearest the time it takes to fill; ", m) + s
	case m.Per != r.Period:
		s = fmt.Sprintf("no period of %s: the nearest Cloudflare has; ", configDuration(m.Per)) + s
	}
	return s
}

// Expect: from outside, a fixed window of the period (the ban is a trait
// the probe does not name yet).
func (r CloudflareRule) Expect() string {
	return "fixed-window " + limiters.Limit{N: r.RequestsPerPeriod + 1, Per: r.Period}.String()
}

// Spares: a key is acted on only once it has sent more than one over the
// limit in a period's window.
func (r CloudflareRule) Spares() (int, time.Duration) { return r.RequestsPerPeriod + 1, r.Period }

type cloudflareCounter struct {
	start, count, banUntil int64
}

type cloudflareKey struct {
	rules    []CloudflareRule
	counters []cloudflareCounter
}

// NewKey counts the key under each rule.
func (Cloudflare) NewKey(rules []Rule) Key {
	k := &cloudflareKey{counters: make([]cloudflareCounter, len(rules))}
	for i, r := range rules {
		k.rules = append(k.rules, r.(CloudflareRule))
		k.counters[i].start = -1
	}
	return k
}

// Decide counts the request in each rule's window and refuses it where a
// rule's count before it exceeds the limit, or the key is banned; a
// request the ban alone refuses is Banned.
func (k *cloudflareKey) Decide(t int64) Decision {
	var over, banned bool
	for i, r := range k.rules {
		c := &k.counters[i]
		if w := floorDiv(t, int64(r.Period)) * int64(r.Period); w != c.start {
			c.start, c.count = w, 0
		}
		switch {
		case c.count > int64(r.RequestsPerPeriod):
			over = true
			if r.Timeout > 0 && c.banUntil <= t {
				c.banUntil = t + int64(r.Timeout)
			}
		case c.banUntil > t:
			banned = true
		}
		c.count++
	}
	if over {
		return Decision{}
	}
	return Decision{Admitted: !banned, Banned: banned}
}
