package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// The header fields the middleware writes, spelled as their specifications
// spell them. (http.Header keys them canonically: "Ratelimit-Policy".)
const (
	// HeaderRateLimitPolicy is the IETF draft's list of quota policies:
	// "burst";q=10;w=1, "daily";q=1000;w=86400.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit is the IETF draft's list of service limits; the
	// middleware sends one, the decision's, named after the policy of its
	// quota: "burst";r=9;t=1.
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
	// up, on a 429 (and on a 503 when the limiter failed and denied).
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

// appendName appends the name of limit l as a structured-field String:
// its Name, or its rate when it has none.
func appendName(b []byte, l limiters.Limit) []byte {
	return appendString(b, l.Named().Name)
}

// appendPolicy appends l as a RateLimit-Policy item: "name";q=Q[;w=W].
func appendPolicy(b []byte, l limiters.Limit) []byte {
	return appendQuota(appendName(b, l), l.Quota(), l.Window())
}

// appendQuota appends the parameters of a RateLimit-Policy item: the
// quota q and the window w, in seconds when it is a whole number of them
// (the draft has no sub-second windows), else not at all.
func appendQuota(b []byte, q int, w time.Duration) []byte {
	b = append(b, ";q="...)
	b = appendInt(b, int64(q))
	if w >= time.Second && w%time.Second == 0 {
		b = append(b, ";w="...)
		b = appendInt(b, int64(w/time.Second))
	}
	return b
}

// appendPolicies appends limits as a RateLimit-Policy field value.
func appendPolicies(b []byte, limits []limiters.Limit) []byte {
	for i, l := range limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPolicy(b, l)
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
