package probe

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Headers is what the target's rate-limit header fields say, and whether
// it agrees with what it does.
type Headers struct {
	// OnAdmitted and OnRefused name the rate-limit fields present on the
	// first admitted and the first refused answer.
	OnAdmitted []string `json:"on_admitted"`
	OnRefused  []string `json:"on_refused"`
	// Policy is the limit the target declares in its fields: the IETF
	// draft's RateLimit-Policy (q and w), else X-RateLimit-Limit over the
	// window X-RateLimit-Reset gave a fresh key; "" when none.
	Policy string `json:"policy,omitempty"`
	// Remaining: how the remaining quota the fields advertised on the
	// burst's fresh key compared with the admissions seen: "consistent",
	// "off: ...", or "" when no field advertises one.
	Remaining string `json:"remaining,omitempty"`
}

// The rate-limit fields the probe reads, in the order it reports them.
var rateLimitFields = []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}

// fieldsOf names the rate-limit fields h has.
func fieldsOf(h http.Header) []string {
	out := []string{}
	for _, f := range rateLimitFields {
		if h.Get(f) != "" {
			out = append(out, f)
		}
	}
	return out
}

// sfItem is one member of a structured-field List (RFC 9651): its bare
// item and its parameters, as text.
type sfItem struct {
	value  string
	params map[string]string
}

// parseList reads a structured-field List, leniently: members split at
// commas outside quoted strings, parameters at semicolons; strings
// unquoted. It is enough for RateLimit and RateLimit-Policy.
func parseList(v string) []sfItem {
	var members []string
	quoted, start := false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			members = append(members, v[start:i])
			start = i + 1
		}
	}
	members = append(members, v[start:])
	var out []sfItem
	for _, m := range members {
		parts := strings.Split(m, ";")
		it := sfItem{value: unquote(strings.TrimSpace(parts[0])), params: map[string]string{}}
		for _, p := range parts[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			it.params[strings.ToLower(k)] = unquote(val)
		}
		if it.value != "" || len(it.params) > 0 {
			out = append(out, it)
		}
	}
	return out
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// declared reads the limit h declares, and the field it came from:
// RateLimit-Policy's first item with a quota (q, or an older draft's bare
// integer) and a window (w, seconds); else X-RateLimit-Limit over
// X-RateLimit-Reset, which on a fresh key's first answer is the window
// (seconds, or a Unix time), at received.
func declared(h http.Header, received time.Time) (limiters.Limit, string, bool) {
	for _, it := range parseList(h.Get("RateLimit-Policy")) {
		q, err := strconv.Atoi(it.params["q"])
		if err != nil {
			q, err = strconv.Atoi(it.value)
		}
		w, werr := strconv.Atoi(it.params["w"])
		if err == nil && werr == nil && q > 0 && w > 0 {
			return limiters.Limit{N: q, Per: time.Duration(w) * time.Second}, "RateLimit-Policy", true
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("X-RateLimit-Limit")))
	if err != nil || n < 1 {
		return limiters.Limit{}, "", false
	}
	reset, err := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 64)
	if err != nil || reset <= 0 {
		return limiters.Limit{}, "", false
	}
	if reset > 365*24*3600 {
		reset = time.Unix(int64(reset), 0).Sub(received).Seconds()
	}
	// A reset is whole seconds, rounded up: the window is about it.
	if w := time.Duration(reset+0.5) * time.Second; w > 0 {
		return limiters.Limit{N: n, Per: w}, "X-RateLimit-Limit", true
	}
	return limiters.Limit{}, "", false
}

// remainingOf reads the remaining quota h advertises: RateLimit's r, else
// X-RateLimit-Remaining.
func remainingOf(h http.Header) (int, bool) {
	for _, it := range parseList(h.Get("RateLimit")) {
		if r, err := strconv.Atoi(it.params["r"]); err == nil {
			return r, true
		}
		if r, err := strconv.Atoi(it.params["remaining"]); err == nil {
			return r, true
		}
	}
	if r, err := strconv.Atoi(strings.TrimSpace(h.Get("X-RateLimit-Remaining"))); err == nil {
		return r, true
	}
	return 0, false
}

// headersOf reads the fields of answers, the fingerprint's; burst are the
// burst's fresh key's answers in the order sent, on which the remaining
// quota after the k-th admission should be the quota less k (a bucket
// refills a little while the burst is sent: one more is let pass).
func headersOf(answers, burst []Answer, quota int) Headers {
	var h Headers
	for _, a := range answers {
		switch {
		case !a.Decided():
		case a.Admitted && h.OnAdmitted == nil:
			h.OnAdmitted = fieldsOf(a.Header)
		case !a.Admitted && h.OnRefused == nil:
			h.OnRefused = fieldsOf(a.Header)
		}
	}
	if len(burst) > 0 {
		if l, _, ok := declared(burst[0].Header, burst[0].Received); ok {
			h.Policy = l.String()
		}
	}
	admitted, seen := 0, 0
	for _, a := range burst {
		if !a.Admitted {
			continue
		}
		admitted++
		r, ok := remainingOf(a.Header)
		if !ok {
			continue
		}
		seen++
		if want := quota - admitted; r < want-1 || r > want+1 {
			h.Remaining = fmt.Sprintf("off: %d remaining after %d admitted on a fresh key, where the quota %d leaves %d", r, admitted, quota, want)
			return h
		}
	}
	if seen > 0 {
		h.Remaining = fmt.Sprintf("consistent (%d admissions checked)", seen)
	}
	return h
}
