package httplimit

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// The header fields the middleware writes, spelled as their specifications
// spell them. (http.Header keys them canonically: "Ratelimit-Policy".)
const (
	// HeaderRateLimitPolicy is the IETF draft's list of quota policies:
	// "burst";q=10;w=1, "daily";q=1000;w=86400.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit is the IETF draft's list of service limits, one per
	// policy: "burst";r=9;t=1, "daily";r=999;t=86400.
	HeaderRateLimit = "RateLimit"
	// HeaderLimit is the legacy quota: the Decision's Limit.
	HeaderLimit = "X-RateLimit-Limit"
	// HeaderRemaining is the legacy remaining quota: the Decision's
	// Remaining.
	HeaderRemaining = "X-RateLimit-Remaining"
	// HeaderReset is the legacy reset: the Decision's ResetAfter in whole
	// seconds, rounded up (a delay, not a Unix time).
	HeaderReset = "X-RateLimit-Reset"
	// HeaderRetryAfter is RFC 9110's Retry-After, in whole seconds rounded
	// up, on a 429 (and on a 503 when the limiter failed closed).
	HeaderRetryAfter = "Retry-After"
)

// The keys of http.Header, canonical, so that setting one costs no
// canonicalisation.
var (
	keyPolicy      = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	keyRateLimit   = http.CanonicalHeaderKey(HeaderRateLimit)
	keyLimit       = http.CanonicalHeaderKey(HeaderLimit)
	keyRemaining   = http.CanonicalHeaderKey(HeaderRemaining)
	keyReset       = http.CanonicalHeaderKey(HeaderReset)
	keyRetryAfter  = http.CanonicalHeaderKey(HeaderRetryAfter)
	keyContentType = http.CanonicalHeaderKey("Content-Type")
)

// Headers chooses the sets of rate-limit header fields the middleware
// writes on every decided response. Retry-After is written on every 429
// whatever the choice.
type Headers uint8

const (
	// LegacyHeaders are X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, as most clients and gateways read them today.
	LegacyHeaders Headers = 1 << iota
	// DraftHeaders are the IETF draft's RateLimit-Policy and RateLimit
	// structured fields (draft-ietf-httpapi-ratelimit-headers-10/11).
	DraftHeaders
	// NoHeaders writes none of them.
	NoHeaders Headers = 0
	// AllHeaders writes both sets: the default.
	AllHeaders = LegacyHeaders | DraftHeaders
)

// Policy is one limit as the RateLimit-Policy field states it: a quota
// per window.
type Policy struct {
	// Name names the policy in both draft fields and in a denial's
	// violated-policies. It is sent as a structured-field String: a byte
	// outside printable ASCII is sent as '?'.
	Name string
	// Quota is the policy's q: N for a window algorithm, the capacity C
	// for a bucket.
	Quota int
	// Window is the policy's w, sent in seconds when it is a whole number
	// of them (the draft has no sub-second windows); zero means not sent.
	Window time.Duration
}

// policyOf states a limit of a composite or a tier: N per W, or a
// bucket's capacity per the time it takes to fill (C/R).
func policyOf(lim composite.Limit) Policy {
	name := lim.Name
	if name == "" {
		name = lim.Rate.String()
	}
	if lim.Rate.Burst > 0 {
		b := lim.Rate.Bucket()
		return Policy{Name: name, Quota: b.Capacity, Window: fillTime(b)}
	}
	return Policy{Name: name, Quota: lim.Rate.N, Window: lim.Rate.Per}
}

// fillTime is how long bucket b takes to fill from empty, C/R, to the
// nanosecond.
func fillTime(b limiters.Bucket) time.Duration {
	return time.Duration(math.Round(float64(b.Capacity) / b.Rate * 1e9))
}

// ceilSeconds is d in whole seconds, rounded up: never earlier than d.
// Zero and negative durations are 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// maxSFInt is the largest Integer a structured field holds (RFC 9651,
// section 3.3.1: fifteen digits).
const maxSFInt = 999_999_999_999_999

// appendInt appends v as a structured-field Integer, clamped to
// [0, maxSFInt]: every number these fields carry is a count or a delay.
func appendInt(b []byte, v int64) []byte {
	switch v = min(max(v, 0), maxSFInt); {
	case v < 10: // the most frequent, and cheaper than strconv's way
		return append(b, byte('0'+v))
	case v < 100:
		return append(b, byte('0'+v/10), byte('0'+v%10))
	}
	return strconv.AppendInt(b, v, 10)
}

// appendString appends s as a structured-field String (RFC 9651, section
// 3.3.3): quoted, with '"' and '\' escaped and any byte outside printable
// ASCII sent as '?', which a String cannot hold.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// quotedDefault is DefaultPolicy as a structured-field String.
const quotedDefault = `"` + DefaultPolicy + `"`

// appendPolicy appends p as a RateLimit-Policy item: "name";q=Q[;w=W].
func appendPolicy(b []byte, p Policy) []byte {
	return appendQuota(appendString(b, p.Name), p)
}

// appendQuota appends the parameters of p as a RateLimit-Policy item.
func appendQuota(b []byte, p Policy) []byte {
	b = append(b, ";q="...)
	b = appendInt(b, int64(p.Quota))
	if p.Window >= time.Second && p.Window%time.Second == 0 {
		b = append(b, ";w="...)
		b = appendInt(b, int64(p.Window/time.Second))
	}
	return b
}

// appendPolicies appends ps as a RateLimit-Policy field value.
func appendPolicies(b []byte, ps []Policy) []byte {
	for i, p := range ps {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPolicy(b, p)
	}
	return b
}

// appendLimit appends the parameters of a RateLimit item, after its name:
// the remaining quota r and the effective window t, the seconds until the
// quota is full again, rounded up. When the response carries a
// Retry-After of retry seconds (retry >= 0), t is at most that: the draft
// wants no Retry-After earlier than the end of an effective window, and a
// client that may send nothing for retry seconds can send no more than r
// in them either.
func appendLimit(b []byte, d limiters.Decision, retry int64) []byte {
	t := ceilSeconds(d.ResetAfter)
	if retry >= 0 {
		t = min(t, retry)
	}
	b = append(b, ";r="...)
	b = appendInt(b, int64(d.Remaining))
	b = append(b, ";t="...)
	return appendInt(b, t)
}

// retrySeconds is the Retry-After a denial carries, rounded up, or -1 when
// it carries none: a request whose cost is above the limit (RetryAfter
// Never) will never be admitted, and no number of seconds says so.
func retrySeconds(d limiters.Decision) int64 {
	if d.RetryAfter == limiters.Never {
		return -1
	}
	return ceilSeconds(d.RetryAfter)
}
