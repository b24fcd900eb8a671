package redislimit

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

func TestEscape(t *testing.T) {
	for _, key := range []string{"", "a", "%", "%7B", "{", "}", "}{", "a{b}c%d", "%25", "héllo"} {
		e := escape(key)
		if e == "" || strings.ContainsAny(e, "{}") {
			t.Errorf("escape(%q) = %q: not a usable hash tag", key, e)
		}
		if back, ok := unescape(e); !ok || back != key {
			t.Errorf("unescape(escape(%q)) = %q, %v", key, back, ok)
		}
	}
}

// replyLimiter returns a Limiter of quotas, enough to read replies with,
// and, for GCRA with one limit, its emission interval (debt replies).
func replyLimiter(interval int64, quotas ...int) *Limiter {
	l := &Limiter{quota: quotas, interval: interval}
	var limits []limiters.Limit
	for i, q := range quotas {
		l.suffix = append(l.suffix, ":x"+strings.Repeat("x", i))
		limits = append(limits, limiters.Limit{N: q, Per: time.Duration(i+1) * time.Second})
	}
	l.policy = limiters.NewPolicy(limits...)
	return l
}

// read is reply of v to a request of cost n, the decision returned.
func (l *Limiter) read(v any, n int, each []limiters.Decision) (limiters.Decision, error) {
	var d limiters.Decision
	err := l.reply(v, n, each, &d)
	return d, err
}

// TestReplyChecked feeds reply what a server must never send: each is
// refused with an error, never read as a decision (the runner makes the
// error an ErrUnavailable, and the decision the failure mode's:
// TestMalformedReply). What a server sends is read field for field, Policy
// and Denied included.
func TestReplyChecked(t *testing.T) {
	l := replyLimiter(0, 5)
	for _, v := range []any{nil, int64(1), []any{int64(1)}, "", "1 0 5 4 0", "1 0 5 4 0 7 8", "1 0 5 4 0 x", "2 0 5 4 0 1", "0 2 5 4 1 1", "1 0 5 -1 0 1", "1 0 5 4 0 1 ",
		"1 1 5 4 0 1", "0 0 5 4 1 1", "0 -1 5 4 1 1"} {
		if d, err := l.read(v, 1, nil); err == nil || d.Allowed {
			t.Errorf("reply(%#v) = %+v, %v; want refused", v, d, err)
		}
	}
	d, err := l.read("0 1 5 0 250 1000", 1, nil)
	if err != nil || d != (limiters.Decision{Limit: 5, RetryAfter: 250, ResetAfter: 1000, Policy: l.policy, Denied: limiters.Denials(0).Deny(0, true)}) {
		t.Errorf("reply of a denial: %+v, %v", d, err)
	}
	d, err = l.read("0 1 5 0 -1 0", 1, nil)
	if err != nil || d.RetryAfter != limiters.Never {
		t.Errorf("reply of a never: %+v, %v", d, err)
	}

	// GCRA with one limit replies with the debt: C=5, T=100ns, so CT=500.
	g := replyLimiter(100, 5)
	for _, v := range []any{nil, "", "x", "1 0 5 4 0 1", []any{int64(1)}, int64(501), "501", int64(-1), int64(-400)} {
		// -1 and -400 are denials of cost 1 with debts of 0 and 399: one
		// more would fit, so they could not have been denied.
		if d, err := g.read(v, 1, nil); err == nil || d.Allowed {
			t.Errorf("debt: reply(%#v) = %+v, %v; want refused", v, d, err)
		}
	}
	denied := limiters.Denials(0).Deny(0, true)
	for _, tc := range []struct {
		v    any
		n    int
		want limiters.Decision
	}{
		{int64(0), 1, limiters.Decision{Allowed: true, Limit: 5, Remaining: 5}},
		{"250", 1, limiters.Decision{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 250}},
		{int64(500), 1, limiters.Decision{Allowed: true, Limit: 5, ResetAfter: 500}},
		{int64(-451), 1, limiters.Decision{Limit: 5, RetryAfter: 50, ResetAfter: 450, Denied: denied}},
		{"-451", 2, limiters.Decision{Limit: 5, RetryAfter: 150, ResetAfter: 450, Denied: denied}},
		{int64(-1), 6, limiters.Decision{Limit: 5, Remaining: 5, RetryAfter: limiters.Never, Denied: denied}},
	} {
		tc.want.Policy = g.policy
		if d, err := g.read(tc.v, tc.n, nil); err != nil || d != tc.want {
			t.Errorf("debt: reply(%#v, n=%d) = %+v, %v; want %+v", tc.v, tc.n, d, err, tc.want)
		}
	}

	// Two limits: four more integers each, checked as closely.
	l2 := replyLimiter(0, 5, 100)
	for _, v := range []any{"1 0 5 4 0 7", "1 0 5 4 0 7 1 4 0 7", "1 0 5 4 0 7 1 4 0 7 1 99 0", "1 0 5 4 0 7 1 4 0 7 2 99 0 9",
		"1 0 5 4 0 7 1 4 0 7 1 -1 0 9", "1 0 5 4 0 7 1 4 0 7 1 99 0 -9", "1 0 5 4 0 7 1 4 0 7 1 99 0 9 ",
		"1 0 5 4 0 7 1 4 0 7 0 99 0 9", "0 3 5 0 3000 9000 1 0 0 10 0 99 3000 9000", "0 1 5 0 3000 9000 1 0 0 10 0 99 3000 9000"} {
		each := make([]limiters.Decision, 2)
		if d, err := l2.read(v, 1, each); err == nil || d.Allowed {
			t.Errorf("two limits: reply(%#v) = %+v, %v; want refused", v, d, err)
		}
	}
	each := make([]limiters.Decision, 2)
	d, err = l2.read("0 2 5 0 3000 9000 1 0 0 10 0 99 3000 9000", 1, each)
	wantEach := []limiters.Decision{{Allowed: true, Limit: 5, ResetAfter: 10}, {Limit: 100, Remaining: 99, RetryAfter: 3000, ResetAfter: 9000}}
	want := limiters.Decision{Limit: 5, RetryAfter: 3000, ResetAfter: 9000, Policy: l2.policy, Denied: limiters.Denials(0).Deny(1, true)}
	if err != nil || d != want || each[0] != wantEach[0] || each[1] != wantEach[1] {
		t.Errorf("two limits, a denial: %+v, %v, each %+v; want %+v, each %+v", d, err, each, want, wantEach)
	}
}
