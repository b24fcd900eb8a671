package products

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// APIGateway is AWS API Gateway's (REST API) throttling of a usage plan,
// per API key, as AWS documents it (api-gateway-request-throttling.html):
// "the token bucket algorithm, where a token counts for a request",
// rateLimit requests a second and burstLimit at once, "applied on a
// best-effort basis". Whether a key's bucket starts full, and how finely
// it refills, AWS does not say: the model is a continuous bucket, full at
// the key's first request, a whole token a request, a refusal taking
// none.
//
// A usage plan has one throttle (and a quota a day, week or month, not
// decided here), and keys only by the API key: the x-api-key header, or
// what a Lambda authorizer returns as usageIdentifierKey. By address,
// AWS WAF's rate-based rule is the nearest.
type APIGateway struct{}

// APIGatewayRule is a usage plan's throttle.
type APIGatewayRule struct {
	RateLimit  float64
	BurstLimit int
	meant      limiters.Limit
}

func (APIGateway) Name() string  { return "apigateway" }
func (APIGateway) Title() string { return "AWS API Gateway" }
func (APIGateway) File() string  { return "apigateway.json" }

// Keys says API Gateway keys by a header alone (an API key).
func (APIGateway) Keys(key accesslog.KeySpec) error {
	if key.Header == "" {
		return fmt.Errorf("API Gateway keys only by API key (the x-api-key header, or what an authorizer returns as usageIdentifierKey), not by %s; by address, AWS WAF's rate-based rule (--emit aws-waf) is the nearest", key)
	}
	return nil
}

// Express keeps a bucket as it is (rateLimit its rate a second,
// burstLimit its capacity); a window of N per Per as a bucket of N
// refilled at N a period.
func (APIGateway) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("apigateway: the limit %s: want a count and a period", want)
	}
	r := APIGatewayRule{RateLimit: fourDigits(float64(want.N) / want.Per.Seconds()), BurstLimit: want.Burst, meant: want}
	if want.Burst == 0 {
		r.BurstLimit = want.N
	}
	return r, nil
}

// fourDigits is x to four significant digits, as the plan writes a
// rate (0.6167, not 0.6166666666666667).
func fourDigits(x float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 4, 64), 64)
	return f
}

// Merge keeps one throttle: the lowest rate and the lowest burst of the
// rules (a usage plan has one).
func (APIGateway) Merge(rules []Rule) []Rule {
	m := rules[0].(APIGatewayRule)
	for _, r := range rules[1:] {
		ar := r.(APIGatewayRule)
		m.RateLimit, m.BurstLimit = math.Min(m.RateLimit, ar.RateLimit), min(m.BurstLimit, ar.BurstLimit)
	}
	return []Rule{m}
}

func (r APIGatewayRule) String() string {
	return fmt.Sprintf("rateLimit %s, burstLimit %d", strconv.FormatFloat(r.RateLimit, 'g', 6, 64), r.BurstLimit)
}

func (r APIGatewayRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return r.bucket()
	}
	return r.meant
}

// bucket is the rule as a limit: its rate in thousandths a second where
// it is not whole.
func (r APIGatewayRule) bucket() limiters.Limit {
	if r.RateLimit == math.Trunc(r.RateLimit) {
		return limiters.Limit{N: int(r.RateLimit), Per: time.Second, Burst: r.BurstLimit}
	}
	return limiters.Limit{N: int(math.Round(r.RateLimit * 1000)), Per: 1000 * time.Second, Burst: r.BurstLimit}
}

func (r APIGatewayRule) Changes() string {
	s := "a bucket kept on a best-effort basis, as AWS says: a target, not a ceiling"
	m := r.meant
	if m.N > 0 && (m.Burst == 0 || m.Burst != r.BurstLimit || float64(m.N)/m.Per.Seconds() != r.RateLimit) {
		s = fmt.Sprintf("one throttle a usage plan, a bucket: %s; ", r) + s
	}
	return s
}

// Expect: from outside, the bucket it is.
func (r APIGatewayRule) Expect() string { return "gcra " + r.bucket().String() }

// Spares: a bucket of b refilled at r refuses no key that sends at most b
// in any window of b/r.
func (r APIGatewayRule) Spares() (int, time.Duration) {
	return r.BurstLimit, time.Duration(float64(r.BurstLimit) / r.RateLimit * float64(time.Second))
}

type apiGatewayKey struct {
	bucket *envoyBucket
	origin int64
	seen   bool
}

// NewKey is the key's bucket of its usage plan's throttle (the first
// rule's: a plan has one).
func (APIGateway) NewKey(rules []Rule) Key {
	k := &apiGatewayKey{}
	if len(rules) > 0 {
		r := rules[0].(APIGatewayRule)
		k.bucket = &envoyBucket{max: float64(r.BurstLimit), rate: r.RateLimit}
		k.bucket.zero = -k.bucket.max / k.bucket.rate
	}
	return k
}

func (k *apiGatewayKey) Decide(t int64) Decision {
	if k.bucket == nil {
		return Decision{Admitted: true}
	}
	if !k.seen {
		k.origin, k.seen = t, true
	}
	return Decision{Admitted: k.bucket.consume(float64(t-k.origin) / 1e9)}
}

// apiGatewayKeyNote is what a person must know of the key.
func apiGatewayKeyNote(key accesslog.KeySpec) string {
	if strings.EqualFold(key.Header, "x-api-key") {
		return "The API's key source is HEADER: a request without x-api-key, or with a key of no usage plan, is refused (403) by API Gateway itself"
	}
	return "The API's key source must be AUTHORIZER, a Lambda authorizer returning the " + key.Header + " header's value as usageIdentifierKey"
}
