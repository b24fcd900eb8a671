package products

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Envoy is Envoy's local rate limit filter
// (envoy.filters.http.local_ratelimit, 1.34 and later), a bucket per
// client through its dynamic descriptors: a descriptor whose key's value
// is left empty gives each value a request brings a token bucket of its
// own (source/extensions/filters/common/local_ratelimit/
// local_ratelimit_impl.cc).
//
// Each bucket is AtomicTokenBucketImpl (source/common/common/
// token_bucket_impl.cc, after folly's TokenBucket): max_tokens at most,
// refilled continuously at tokens_per_fill every fill_interval, full when
// it is made; a request takes one token when there is a whole one, and a
// refusal takes nothing. A request that several descriptors match (two
// rules on a key) takes from their buckets in order of fill rate, the
// slowest first, and stops at the first without a token: the tokens it
// took from the slower ones are not given back.
//
// A descriptor with a value is one bucket for that value (a tier's key),
// matched before the wildcard. Envoy keeps at most max_dynamic_descriptors
// clients' buckets (20 unless told), the least recent forgotten and given
// a full bucket when it returns: the configuration written holds twice
// the log's keys; a configuration read that holds fewer is said to be
// decided as if it held them all.
type Envoy struct{}

// EnvoyRule is a descriptor's token bucket.
type EnvoyRule struct {
	MaxTokens, TokensPerFill int
	FillInterval             time.Duration
	meant                    limiters.Limit
}

func (Envoy) Name() string  { return "envoy" }
func (Envoy) Title() string { return "Envoy" }
func (Envoy) File() string  { return "envoy.yaml" }

// minFill is the shortest fill_interval Envoy takes.
const minFill = 50 * time.Millisecond

// Express keeps a bucket (Burst its capacity) as max_tokens Burst,
// tokens_per_fill N every fill_interval Per; a window of N per Per as a
// bucket of N refilled at N a period (Envoy's local limit has no window).
// fill_interval is whole milliseconds, 50 at least: a shorter period is
// scaled up with its tokens (1 every 10ms: 5 every 50ms).
func (Envoy) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("envoy: the limit %s: want a count and a period", want)
	}
	r := EnvoyRule{MaxTokens: cmp.Or(want.Burst, want.N), TokensPerFill: want.N, FillInterval: want.Per, meant: want}
	if r.FillInterval < minFill {
		k := int(math.Ceil(float64(minFill) / float64(r.FillInterval)))
		r.TokensPerFill, r.FillInterval = r.TokensPerFill*k, r.FillInterval*time.Duration(k)
	}
	r.FillInterval = max(r.FillInterval.Round(time.Millisecond), minFill)
	return r, nil
}

func (r EnvoyRule) String() string {
	return fmt.Sprintf("max_tokens: %d, tokens_per_fill: %d, fill_interval: %s", r.MaxTokens, r.TokensPerFill, configDuration(r.FillInterval))
}

// Meant is the limit the rule was expressed for; a bucket read back means
// itself.
func (r EnvoyRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.TokensPerFill, Per: r.FillInterval, Burst: r.MaxTokens}
	}
	return r.meant
}

func (r EnvoyRule) Changes() string {
	m := r.meant
	switch {
	case m.N > 0 && m.Burst == 0:
		return fmt.Sprintf("no window: a bucket of %d refilled at %s, which admits up to %d in %s after a quiet one", r.MaxTokens, limiters.Limit{N: r.TokensPerFill, Per: r.FillInterval}, r.MaxTokens+r.TokensPerFill, configDuration(r.FillInterval))
	case m.N > 0 && float64(r.TokensPerFill)*float64(m.Per) != float64(m.N)*float64(r.FillInterval):
		return fmt.Sprintf("its rate in whole milliseconds: %d every %s", r.TokensPerFill, configDuration(r.FillInterval))
	}
	return ""
}

// Expect: from outside, the bucket it is.
func (r EnvoyRule) Expect() string {
	return "gcra " + limiters.Limit{N: r.TokensPerFill, Per: r.FillInterval, Burst: r.MaxTokens}.String()
}

// Spares: a bucket of b refilled at r refuses no key that sends at most b
// in any window of b/r, even counting every request the key sends (the
// slower of two buckets takes a token of a request the faster refuses).
func (r EnvoyRule) Spares() (int, time.Duration) {
	return r.MaxTokens, time.Duration(float64(r.FillInterval) * float64(r.MaxTokens) / float64(r.TokensPerFill))
}

// rate is the fill rate in tokens a second.
func (r EnvoyRule) rate() float64 { return float64(r.TokensPerFill) / r.FillInterval.Seconds() }

// envoyBucket is AtomicTokenBucketImpl: zero is the time, in seconds
// after the key's first request, at which the bucket was (or would have
// been) empty; it holds min(max, (now − zero)·rate) tokens.
type envoyBucket struct {
	max, rate, zero float64
}

func (b *envoyBucket) consume(now float64) bool {
	total := min(b.max, (now-b.zero)*b.rate)
	if total < 1 {
		return false
	}
	b.zero = now - (total-1)/b.rate
	return true
}

type envoyKey struct {
	buckets []envoyBucket // the slowest first
	origin  int64
	seen    bool
}

// NewKey gives the key a full bucket of each rule, taken from in order of
// fill rate, the slowest first (the order is stable among equal rates).
func (Envoy) NewKey(rules []Rule) Key {
	rs := make([]EnvoyRule, len(rules))
	for i, r := range rules {
		rs[i] = r.(EnvoyRule)
	}
	slices.SortStableFunc(rs, func(a, b EnvoyRule) int { return cmp.Compare(a.rate(), b.rate()) })
	k := &envoyKey{}
	for _, r := range rs {
		b := envoyBucket{max: float64(r.MaxTokens), rate: r.rate()}
		b.zero = -b.max / b.rate // full at the first request
		k.buckets = append(k.buckets, b)
	}
	return k
}

func (k *envoyKey) Decide(t int64) Decision {
	if !k.seen {
		k.origin, k.seen = t, true
	}
	now := float64(t-k.origin) / 1e9
	for i := range k.buckets {
		if !k.buckets[i].consume(now) {
			return Decision{}
		}
	}
	return Decision{Admitted: true}
}
