package httplimit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// randomDecision is a decision a limiter could make: remaining within the
// limit, a retry only on a denial (Never now and then), durations that
// fall on, just before and just after whole seconds.
func randomDecision(rng *rand.Rand) limiters.Decision {
	dur := func() time.Duration {
		s := time.Duration(rng.IntN(100)) * time.Second
		switch rng.IntN(5) {
		case 0:
			return s
		case 1:
			return s + 1
		case 2:
			return max(s-1, 0)
		case 3:
			return time.Duration(rng.Int64N(int64(10 * 365 * 24 * time.Hour)))
		}
		return time.Duration(rng.Int64N(int64(100 * time.Second)))
	}
	d := limiters.Decision{Allowed: rng.IntN(2) == 0, Limit: rng.IntN(limiters.MaxLimit) + 1}
	if rng.IntN(4) == 0 {
		d.Limit = rng.IntN(10) + 1
	}
	d.Remaining = rng.IntN(d.Limit + 1)
	d.ResetAfter = dur()
	if !d.Allowed {
		if rng.IntN(10) == 0 {
			d.RetryAfter = limiters.Never
		} else {
			d.RetryAfter = min(dur(), d.ResetAfter)
		}
	}
	return d
}

// Every header, read back as a client reads it, against the decision it
// reports; Retry-After never earlier than the real retry time, and never
// earlier than the end of an effective window.
func TestHeadersAgainstDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d limiters.Decision
	h := newMiddleware(t, current(&d), httplimit.WithHeaderKey("X-User")).Wrap(ok)
	for i := range 20000 {
		d = randomDecision(rng)
		w := serve(h, "alice")
		res := w.Result()
		if want := map[bool]int{true: 200, false: 429}[d.Allowed]; res.StatusCode != want {
			t.Fatalf("decision %d %+v: status %d, want %d", i, d, res.StatusCode, want)
		}
		hdr := res.Header
		if got := integer(t, hdr, httplimit.HeaderLimit); got != d.Limit {
			t.Fatalf("decision %d %+v: %s = %d, want %d", i, d, httplimit.HeaderLimit, got, d.Limit)
		}
		if got := integer(t, hdr, httplimit.HeaderRemaining); got != d.Remaining {
			t.Fatalf("decision %d %+v: %s = %d, want %d", i, d, httplimit.HeaderRemaining, got, d.Remaining)
		}
		reset := seconds(t, hdr, httplimit.HeaderReset)
		if time.Duration(reset)*time.Second < d.ResetAfter || reset > 0 && time.Duration(reset-1)*time.Second >= d.ResetAfter {
			t.Fatalf("decision %d %+v: %s = %d, want ResetAfter rounded up", i, d, httplimit.HeaderReset, reset)
		}
		policies, limits := draft(t, hdr)
		if len(policies) != 1 || policies[0].name != httplimit.DefaultPolicy || policies[0].params["q"] != int64(d.Limit) {
			t.Fatalf("decision %d %+v: RateLimit-Policy %q, want one %q with q=%d", i, d, hdr.Get(httplimit.HeaderRateLimitPolicy), httplimit.DefaultPolicy, d.Limit)
		}
		if len(limits) != 1 || limits[0].name != httplimit.DefaultPolicy || limits[0].params["r"] != int64(d.Remaining) {
			t.Fatalf("decision %d %+v: RateLimit %q, want one %q with r=%d", i, d, hdr.Get(httplimit.HeaderRateLimit), httplimit.DefaultPolicy, d.Remaining)
		}
		tt, hasT := limits[0].params["t"]
		if !hasT || tt > reset {
			t.Fatalf("decision %d %+v: RateLimit %q: t should be there and at most the reset, %d", i, d, hdr.Get(httplimit.HeaderRateLimit), reset)
		}
		hasRetry := has(hdr, httplimit.HeaderRetryAfter)
		switch {
		case d.Allowed:
			if hasRetry {
				t.Fatalf("decision %d %+v: an admitted request has Retry-After %q", i, d, hdr.Get(httplimit.HeaderRetryAfter))
			}
			if tt != reset {
				t.Fatalf("decision %d %+v: t=%d, want the reset, %d", i, d, tt, reset)
			}
		case d.RetryAfter == limiters.Never:
			if hasRetry {
				t.Fatalf("decision %d %+v: a request never admitted has Retry-After %q", i, d, hdr.Get(httplimit.HeaderRetryAfter))
			}
		default:
			retry := seconds(t, hdr, httplimit.HeaderRetryAfter)
			if time.Duration(retry)*time.Second < d.RetryAfter {
				t.Fatalf("decision %d %+v: Retry-After %d is earlier than the retry time", i, d, retry)
			}
			if retry > 0 && time.Duration(retry-1)*time.Second >= d.RetryAfter {
				t.Fatalf("decision %d %+v: Retry-After %d, want the retry time rounded up", i, d, retry)
			}
			if tt > retry {
				t.Fatalf("decision %d %+v: RateLimit t=%d ends after Retry-After %d", i, d, tt, retry)
			}
		}
		if !d.Allowed {
			p := readProblem(t, hdr, w.Body.Bytes())
			if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || p.Status != 429 ||
				len(p.Violated) != 1 || p.Violated[0] != httplimit.DefaultPolicy {
				t.Fatalf("decision %d %+v: problem %+v", i, d, p)
			}
		}
	}
}
