package probe

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/ratelab/ratelab/limiters"
)

// The rate-limit fields the probe reads, in the order it reports them:
// the IETF draft's structured fields (RateLimit-Policy and RateLimit, RFC
// 9651; an older draft's RateLimit-Limit, -Remaining and -Reset), the
// X-RateLimit-* fields most servers send, and Retry-After.
var rateLimitFields = []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}

// fieldsOf names the rate-limit fields h has.
func fieldsOf(h http.Header) []string {
	out := []string{}
	for _, f := range rateLimitFields {
		if h.Get(f) != "" {
			out = append(out, f)
		}
		if strings.HasSuffix(f, "-Limit") {
			for _, u := range unitFields {
				if h.Get(f+"-"+u.unit) != "" {
					out = append(out, f+"-"+u.unit)
				}
			}
		}
	}
	return out
}

// said is what one answer's rate-limit fields say, each a claim to check
// against what the target does.
type said struct {
	// quota and window: the limit declared (RateLimit-Policy's q and w),
	// or the quota alone (a limit field); window is zero when none is.
	quota  int
	window time.Duration
	from   string
	// also are the further policies declared with a window (a limit of a
	// minute beside one of a second), each a claim too.
	also []limiters.Limit
	// remaining: the quota the answer says is left.
	remaining    int
	hasRemaining bool
	// reset: when the field says the quota is back in full, or the next
	// request is, from the answer (RateLimit's t, a reset field).
	reset     time.Duration
	resetFrom string
	// wait: when a refusal says to come back: Retry-After, else the reset.
	wait     time.Duration
	waitFrom string
	// malformed are fields present that do not parse: "RateLimit: text
	// (why)".
	malformed []string
}

// read reads h, an answer received at at.
func read(h http.Header, at time.Time) said {
	var s said
	bad := func(name, why string) {
		s.malformed = append(s.malformed, fmt.Sprintf("%s: %q (%s)", name, strings.Join(h.Values(name), ", "), why))
	}
	if v := h.Values("RateLimit-Policy"); len(v) > 0 {
		if l, err := httpsfv.UnmarshalList(v); err != nil {
			bad("RateLimit-Policy", err.Error())
		} else {
			s.readPolicy(l)
		}
	}
	if v := h.Values("RateLimit"); len(v) > 0 {
		if l, err := httpsfv.UnmarshalList(v); err == nil && s.readRateLimit(l) {
		} else if d, derr := httpsfv.UnmarshalDictionary(v); derr == nil && s.readDraft7(d) {
		} else if err != nil {
			bad("RateLimit", err.Error())
		} else {
			bad("RateLimit", "no r or t parameter, and no limit, remaining or reset member")
		}
	}
	for _, prefix := range []string{"RateLimit-", "X-RateLimit-"} {
		s.readPlain(h, prefix, at, bad)
		s.readUnits(h, prefix, bad)
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 && !math.IsInf(n, 0) {
			s.wait, s.waitFrom = seconds(n), "Retry-After"
		} else if t, err := http.ParseTime(v); err == nil {
			s.wait, s.waitFrom = max(t.Sub(at), 0), "Retry-After"
		} else {
			bad("Retry-After", "neither seconds nor an HTTP date")
		}
	}
	if s.waitFrom == "" && s.resetFrom != "" {
		s.wait, s.waitFrom = s.reset, s.resetFrom
	}
	return s
}

// readPolicy reads RateLimit-Policy: the first policy's quota (q, or an
// older draft's bare integer) and window (w, seconds).
func (s *said) readPolicy(l httpsfv.List) {
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		q, okq := intParam(it.Params, "q")
		if !okq {
			if n, ok := it.Value.(int64); ok {
				q, okq = int(n), true
			}
		}
		w, okw := intParam(it.Params, "w")
		switch {
		case okq && q > 0 && s.quota == 0:
			s.quota, s.from = q, "RateLimit-Policy"
			if okw && w > 0 {
				s.window = time.Duration(w) * time.Second
			}
		case okq && q > 0 && okw && w > 0:
			s.also = append(s.also, limiters.Limit{N: q, Per: time.Duration(w) * time.Second})
		}
	}
}

// readRateLimit reads the current draft's RateLimit, a List: the first
// item's r (remaining) and t (seconds until the quota is back).
func (s *said) readRateLimit(l httpsfv.List) bool {
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		r, okr := intParam(it.Params, "r")
		t, okt := intParam(it.Params, "t")
		if !okr && !okt {
			continue
		}
		if okr {
			s.remaining, s.hasRemaining = r, true
		}
		if okt {
			s.reset, s.resetFrom = time.Duration(t)*time.Second, "RateLimit"
		}
		return true
	}
	return false
}

// readDraft7 reads an older draft's RateLimit, a Dictionary: limit,
// remaining and reset (seconds).
func (s *said) readDraft7(d *httpsfv.Dictionary) bool {
	get := func(k string) (int, bool) {
		m, ok := d.Get(k)
		if !ok {
			return 0, false
		}
		it, ok := m.(httpsfv.Item)
		if !ok {
			return 0, false
		}
		n, ok := it.Value.(int64)
		return int(n), ok
	}
	limit, okl := get("limit")
	r, okr := get("remaining")
	t, okt := get("reset")
	if okl && s.quota == 0 && limit > 0 {
		s.quota, s.from = limit, "RateLimit"
	}
	if okr {
		s.remaining, s.hasRemaining = r, true
	}
	if okt {
		s.reset, s.resetFrom = time.Duration(t)*time.Second, "RateLimit"
	}
	return okl || okr || okt
}

// readPlain reads prefix's Limit, Remaining and Reset fields: integers;
// a reset in seconds from now, or as a Unix time in seconds or in
// milliseconds (so large it cannot be a delay), received at at.
func (s *said) readPlain(h http.Header, prefix string, at time.Time, bad func(name, why string)) {
	num := func(name string) (float64, bool) {
		v := strings.TrimSpace(h.Get(prefix + name))
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			bad(prefix+name, "not a number")
			return 0, false
		}
		return n, true
	}
	if v := strings.TrimSpace(h.Get(prefix + "Limit")); strings.ContainsAny(v, ",;") {
		s.readQuotaPolicies(prefix+"Limit", v, bad)
	} else if n, ok := num("Limit"); ok && s.quota == 0 && n >= 1 {
		s.quota, s.from = int(n), prefix+"Limit"
	}
	if n, ok := num("Remaining"); ok && !s.hasRemaining {
		s.remaining, s.hasRemaining = int(n), true
	}
	if n, ok := num("Reset"); ok && s.resetFrom == "" {
		s.reset, s.resetFrom = resetOf(n, at), prefix+"Reset"
	}
}

// readQuotaPolicies reads a limit field of several values, as an older
// draft wrote it and servers still do: the quota now, then each policy,
// "N;w=SECONDS" ("10, 10;w=1, 1000;w=3600"), each a claim.
func (s *said) readQuotaPolicies(name, v string, bad func(name, why string)) {
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		bad(name, err.Error())
		return
	}
	quota := 0
	var policies []limiters.Limit
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		n, ok := it.Value.(int64)
		if !ok || n < 1 {
			continue
		}
		if w, ok := intParam(it.Params, "w"); ok && w > 0 {
			policies = append(policies, limiters.Limit{N: int(n), Per: time.Duration(w) * time.Second})
		} else if quota == 0 {
			quota = int(n)
		}
	}
	if quota == 0 && len(policies) == 0 {
		bad(name, "no quota")
		return
	}
	s.declare(name, quota, policies)
}

// unitFields are the limit fields of one window each, as Kong writes
// them (X-RateLimit-Limit-Second: 5, X-RateLimit-Limit-Hour: 1000).
var unitFields = []struct {
	unit string
	per  time.Duration
}{{"Second", time.Second}, {"Minute", time.Minute}, {"Hour", time.Hour}, {"Day", 24 * time.Hour}, {"Month", 30 * 24 * time.Hour}, {"Year", 365 * 24 * time.Hour}}

// readUnits reads the limit fields of one window each, under prefix.
func (s *said) readUnits(h http.Header, prefix string, bad func(name, why string)) {
	var policies []limiters.Limit
	from := ""
	for _, u := range unitFields {
		name := prefix + "Limit-" + u.unit
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad(name, "not a count")
			continue
		}
		policies = append(policies, limiters.Limit{N: n, Per: u.per})
		if from == "" {
			from = name
		}
	}
	if len(policies) > 0 {
		s.declare(from, 0, policies)
	}
}

// declare takes the policies a field declares (and the quota it says is
// now, 0 when it says none): the policy of that quota, else the shortest,
// is the limit declared, unless a field read before declared one; the
// others are further claims.
func (s *said) declare(from string, quota int, policies []limiters.Limit) {
	slices.SortStableFunc(policies, func(a, b limiters.Limit) int { return cmp.Compare(a.Per, b.Per) })
	first := -1
	if s.quota == 0 || s.window == 0 {
		want := cmp.Or(s.quota, quota)
		for i, p := range policies {
			if want == 0 || p.N == want {
				first = i
				break
			}
		}
		switch {
		case first >= 0 && (s.quota == 0 || s.quota == policies[first].N):
			s.quota, s.window = policies[first].N, policies[first].Per
			if s.from == "" || s.from == from {
				s.from = from
			}
		case s.quota == 0 && quota > 0:
			s.quota, s.from = quota, from
		}
	}
	for i, p := range policies {
		if i != first && p.Per > s.window && !slices.Contains(s.also, p) {
			s.also = append(s.also, p)
		}
	}
}

// resetOf reads a reset field's number: a Unix time in milliseconds or in
// seconds when it is too large to be a delay, else seconds from at.
func resetOf(n float64, at time.Time) time.Duration {
	switch {
	case n > 1e12:
		return max(time.UnixMilli(int64(n)).Sub(at), 0)
	case n > 1e9:
		return max(time.Unix(0, int64(n*1e9)).Sub(at), 0)
	}
	return seconds(n)
}

func intParam(p *httpsfv.Params, k string) (int, bool) {
	if p == nil {
		return 0, false
	}
	v, ok := p.Get(k)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	return int(n), ok
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// Claims is what the target's fields declare of its limit, read off a
// fresh key's first answer: claims the probe checks, never the frame it
// fits in.
type Claims struct {
	// Policy is the limit declared: RateLimit-Policy's q per w, or a
	// limit field's quota over the reset a fresh key was given, whole
	// seconds and rounded up by most servers (so "about").
	Policy     limiters.Limit `json:"-"`
	PolicyText string         `json:"policy,omitempty"`
	PolicyFrom string         `json:"from,omitempty"`
	// Exact: the window was declared (RateLimit-Policy's w), not read off
	// a reset.
	Exact bool `json:"exact,omitempty"`
	// Also are further limits declared (RateLimit-Policy's other
	// policies), each a claim too.
	Also []limiters.Limit `json:"-"`
	// Fields names the rate-limit fields on that answer.
	Fields []string `json:"fields"`
	// Malformed are fields that did not parse, with their text.
	Malformed []string `json:"malformed,omitempty"`
}

// claimsOf reads the claims of a fresh key's first answer.
func claimsOf(a answer) Claims {
	s := read(a.Header, a.Received)
	c := Claims{Fields: fieldsOf(a.Header), Malformed: s.malformed, PolicyFrom: s.from}
	switch {
	case s.quota < 1:
	case s.window > 0:
		c.Policy = limiters.Limit{N: s.quota, Per: s.window}
		c.PolicyText, c.Exact = c.Policy.String(), true
		for _, l := range s.also {
			c.Also = append(c.Also, l)
			c.PolicyText += ", " + l.String()
		}
	case s.reset > 0:
		// The reset a fresh key is given is its window, whole seconds,
		// most often rounded up: about it.
		w := max(s.reset.Round(time.Second), time.Second)
		c.Policy = limiters.Limit{N: s.quota, Per: w}
		c.PolicyText = fmt.Sprintf("%d per about %v (%s, and %s on a fresh key)", s.quota, w, s.from, s.resetFrom)
	default:
		c.PolicyText = fmt.Sprintf("a quota of %d, no window (%s)", s.quota, s.from)
		c.Policy = limiters.Limit{N: s.quota}
	}
	return c
}
