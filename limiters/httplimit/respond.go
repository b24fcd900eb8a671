package httplimit

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// respond writes decision d's header fields, reports it to the hooks, and
// reports whether the request is to be served; if not, it has answered
// it 429.
func (m *Middleware) respond(w http.ResponseWriter, r *http.Request, key string, n int, d limiters.Decision) (serve bool) {
	deny := !d.Allowed && !m.shadow
	if d.Allowed {
		if m.hooks.Allowed != nil {
			m.hooks.Allowed(r, key, d)
		}
	} else {
		if m.shadow {
			m.shadowDenied.Add(1)
		}
		if m.hooks.Denied != nil {
			m.hooks.Denied(r, key, d)
		}
	}
	retry := int64(-1) // the Retry-After sent, if any
	if deny {
		retry = retrySeconds(d)
	}
	var buf [512]byte
	b := buf[:0]
	var v values
	if m.headers&LegacyHeaders != 0 {
		b = appendInt(b, int64(d.Limit))
		v.add(keyLimit, len(b))
		b = appendInt(b, int64(d.Remaining))
		v.add(keyRemaining, len(b))
		b = appendInt(b, ceilSeconds(d.ResetAfter))
		v.add(keyReset, len(b))
	}
	if m.headers&DraftHeaders != 0 {
		b = m.appendPolicies(b, d)
		v.add(keyPolicy, len(b))
		b = appendItem(b, d, retry)
		v.add(keyRateLimit, len(b))
	}
	if !deny {
		v.set(w.Header(), b)
		return true
	}
	if retry >= 0 {
		b = appendInt(b, retry)
		v.add(keyRetryAfter, len(b))
	}
	b = append(b, problemJSON...)
	v.add(keyContentType, len(b))
	body := v.set(w.Header(), appendExceeded(b, n, d, retry))
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, quotaExceeded)
	io.WriteString(w, body)
	return false
}

// values are the header fields of a response, gathered before they are
// set: each one's key, and where its value ends in the buffer they are
// appended to. (The keys are not kept with the buffer, which would then
// escape to the heap with them.)
type values struct {
	keys [7]string
	ends [7]int
	n    int
}

func (v *values) add(key string, end int) {
	v.keys[v.n], v.ends[v.n] = key, end
	v.n++
}

// set sets the values, the bytes of b up to the last end, in h: one string
// and its substrings, each in a slice of one []string, so that a response
// costs two allocations, not two a field. It returns the rest of b, a
// body, as a string.
func (v *values) set(h http.Header, b []byte) string {
	s := string(b)
	vals := make([]string, v.n)
	start := 0
	for i, end := range v.ends[:v.n] {
		vals[i] = s[start:end]
		h[v.keys[i]] = vals[i : i+1 : i+1] // capacity 1: an Add does not write into the next
		start = end
	}
	return s[start:]
}

// item returns the index in d's Policy of the limit the one RateLimit item
// is named after: the first whose quota is d's, else the first; -1 when
// the decision names no limit.
func item(d limiters.Decision) int {
	if d.Policy == nil || len(d.Policy.Limits) == 0 {
		return -1
	}
	for i, l := range d.Policy.Limits {
		if l.Quota() == d.Limit {
			return i
		}
	}
	return 0
}

// appendItem appends decision d as the RateLimit item named after limit
// item(d) of its Policy, or DefaultPolicy. Its t is at most that limit's
// window when the limit is the decision's quota: the limit it names is
// full again within its window, whatever the others hold.
func appendItem(b []byte, d limiters.Decision, retry int64) []byte {
	i := item(d)
	if i < 0 {
		return appendLimit(append(b, quotedDefault...), d, retry)
	}
	l := d.Policy.Limits[i]
	if l.Quota() == d.Limit && l.Window() > 0 {
		d.ResetAfter = min(d.ResetAfter, l.Window())
	}
	return appendLimit(appendName(b, l), d, retry)
}

// appendPolicies appends the RateLimit-Policy value of d: every limit of
// its Policy, or DefaultPolicy of quota d.Limit. A Policy's value is
// formatted once, and kept until another Policy comes.
func (m *Middleware) appendPolicies(b []byte, d limiters.Decision) []byte {
	if d.Policy == nil || len(d.Policy.Limits) == 0 {
		return appendQuota(append(b, quotedDefault...), d.Limit, 0)
	}
	v := m.policy.Load()
	if v == nil || v.p != d.Policy {
		v = &policyValue{p: d.Policy, v: string(appendPolicies(nil, d.Policy.Limits))}
		m.policy.Store(v)
	}
	return append(b, v.v...)
}

// appendExceeded appends the rest of the quota-exceeded problem (RFC
// 9457, the draft's type; quotaExceeded is its start) of a request of cost
// n that d denied: the detail, and the limits that denied it (their names
// are structured-field Strings, which are JSON strings too: printable
// ASCII, with '"' and '\' escaped), else the one its RateLimit item names.
func appendExceeded(b []byte, n int, d limiters.Decision, retry int64) []byte {
	if retry >= 0 {
		b = appendRetry(b, retry)
	} else {
		b = append(b, "The request costs "...)
		b = appendInt(b, int64(n))
		b = append(b, ", more than the limit of "...)
		b = appendInt(b, int64(d.Limit))
		b = append(b, ": it will never be admitted."...)
	}
	b = append(b, `","violated-policies":[`...)
	named := false
	if d.Policy != nil {
		for j, l := range d.Policy.Limits {
			if d.Denied.Has(j) {
				if named {
					b = append(b, ',')
				}
				b, named = appendName(b, l), true
			}
		}
	}
	switch i := item(d); {
	case named:
	case i < 0:
		b = append(b, quotedDefault...)
	default:
		b = appendName(b, d.Policy.Limits[i])
	}
	return append(b, "]}\n"...)
}

// appendRetry appends "Retry in N seconds."
func appendRetry(b []byte, retry int64) []byte {
	b = append(b, "Retry in "...)
	b = appendInt(b, retry)
	b = append(b, " second"...)
	if retry != 1 {
		b = append(b, 's')
	}
	return append(b, '.')
}

// unavailable answers 503 a request the limiter could not decide and
// whose failure policy denied it (d), with the Retry-After d says, at
// least a second (a failure is not forever, so Never is a second too).
func unavailable(w http.ResponseWriter, d limiters.Decision) {
	retry := max(retrySeconds(d), 1)
	var buf [320]byte
	h := w.Header()
	h[keyRetryAfter] = []string{string(appendInt(buf[:0], retry))}
	h[keyContentType] = []string{problemJSON}
	w.WriteHeader(http.StatusServiceUnavailable)
	b := append(buf[:0], reducedCapacity...)
	b = append(appendRetry(b, retry), "\"}\n"...)
	w.Write(b)
}

// badRequest answers 400 a request without a key (kind ErrKey) or whose
// cost is malformed (ErrCost, err why).
func badRequest(w http.ResponseWriter, kind, err error) {
	w.Header()[keyContentType] = []string{problemJSON}
	w.WriteHeader(http.StatusBadRequest)
	if kind == ErrKey {
		io.WriteString(w, noKey)
		return
	}
	detail, _ := json.Marshal("The request's cost is malformed: " + strings.TrimSuffix(err.Error(), ".") + ".")
	w.Write(append(append([]byte(badCost), detail...), "}\n"...))
}

// The problem bodies (RFC 9457): the draft's types, and about:blank.
const (
	problemJSON   = "application/problem+json"
	quotaExceeded = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",` +
		`"title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"`
	reducedCapacity = `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",` +
		`"title":"Request cannot be satisfied due to temporary server capacity constraints","status":503,` +
		`"detail":"The rate limiter could not decide. `
	noKey = `{"type":"about:blank","title":"Bad Request","status":400,` +
		`"detail":"The request carries nothing to rate-limit it by."}` + "\n"
	badCost = `{"type":"about:blank","title":"Bad Request","status":400,"detail":`
)
