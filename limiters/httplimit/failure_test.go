package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// rateLimitFields are every rate-limit field a decided response carries.
var rateLimitFields = []string{httplimit.HeaderLimit, httplimit.HeaderRemaining, httplimit.HeaderReset,
	httplimit.HeaderRateLimit, httplimit.HeaderRateLimitPolicy}

// A limiter whose backend fails: the Decision it returns with its error
// (its failure policy's) decides, and the failure is counted and
// reported. Before, the middleware's own failure mode decided whatever
// came with the error (FailOpen served a zero decision, FailClosed
// refused an admitting one); now the limiter's failure policy does.
func TestLimiterFailure(t *testing.T) {
	down := errors.New("backend down")
	for _, c := range []struct {
		name   string
		d      limiters.Decision // what the broken limiter returns with its error
		status int
		retry  int64 // the 503's Retry-After
	}{
		{"fails open", limiters.Decision{Allowed: true}, 200, 0},
		{"a zero decision denies", limiters.Decision{}, 503, 1},
		{"fails closed", limiters.Decision{RetryAfter: 2500 * time.Millisecond}, 503, 3}, // rounded up
		{"fails closed, never", limiters.Decision{RetryAfter: limiters.Never}, 503, 1},   // a failure is not forever
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := decideFunc(func(context.Context, limiters.Request) (limiters.Decision, error) { return c.d, down })
			var got []error
			m := newMiddleware(t, broken, httplimit.WithHooks(httplimit.Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }}))
			w := serve(m.Wrap(ok), "")
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			for _, h := range rateLimitFields {
				if v := w.Header().Get(h); v != "" {
					t.Errorf("%s: %q on a request the limiter did not decide", h, v)
				}
			}
			if s := m.Stats(); s.LimiterErrors != 1 || s.KeyErrors != 0 || s.CostErrors != 0 {
				t.Errorf("Stats() = %+v, want one limiter error", s)
			}
			if len(got) != 1 || !errors.Is(got[0], httplimit.ErrLimiter) || !errors.Is(got[0], down) {
				t.Errorf("the Error hook got %v, want one error wrapping ErrLimiter and the backend's", got)
			}
			if c.status == 503 {
				p := readProblem(t, w.Header(), w.Body.Bytes())
				if p.Type != "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity" || p.Status != 503 {
					t.Errorf("problem %+v, want temporary-reduced-capacity", p)
				}
				if got := seconds(t, w.Header(), httplimit.HeaderRetryAfter); got != c.retry {
					t.Errorf("Retry-After %d, want %d", got, c.retry)
				}
				if !strings.Contains(p.Detail, "could not decide") {
					t.Errorf("detail %q, want it to say the limiter could not decide", p.Detail)
				}
			} else if w.Body.String() != "ok" {
				t.Errorf("body %q, want the handler's", w.Body)
			}
		})
	}
	// In shadow mode nothing is denied, a failure's denial neither.
	broken := decideFunc(func(context.Context, limiters.Request) (limiters.Decision, error) { return limiters.Decision{}, down })
	m := newMiddleware(t, broken, httplimit.WithShadow())
	if w := serve(m.Wrap(ok), ""); w.Code != 200 || m.Stats().LimiterErrors != 1 {
		t.Errorf("shadow mode, a failure that denies: %d, %+v; want 200 and one limiter error", w.Code, m.Stats())
	}
}

// A limiter that falls back on its own (a redislimit Limiter deciding in
// memory while Redis does not) returns its decision with a nil error: an
// ordinary decision, with its headers, served or 429. (This was
// FailWithDecision, which followed a decision that came with an error:
// there is no such mode now, and an error's admission is served without
// headers, its denial 503, as TestLimiterFailure shows.)
func TestLimiterFallback(t *testing.T) {
	policy := limiters.NewPolicy(limiters.Limit{Name: "fallback", N: 5, Per: time.Second})
	for _, c := range []struct {
		d      limiters.Decision
		status int
	}{
		{limiters.Decision{Allowed: true, Limit: 5, Remaining: 4, Policy: policy}, 200},
		{limiters.Decision{Limit: 5, RetryAfter: 2 * time.Second, ResetAfter: 2 * time.Second, Policy: policy, Denied: limiters.Denials(0).Deny(0, true)}, 429},
	} {
		var got []error
		m := newMiddleware(t, fixed(c.d), httplimit.WithHooks(httplimit.Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }}))
		w := serve(m.Wrap(ok), "")
		if w.Code != c.status {
			t.Fatalf("%+v: status %d, want %d", c.d, w.Code, c.status)
		}
		if v := w.Header().Get(httplimit.HeaderLimit); v != "5" {
			t.Errorf("%s: %q, want the fallback's limit, 5", httplimit.HeaderLimit, v)
		}
		if v := w.Header().Get(httplimit.HeaderRateLimitPolicy); v != `"fallback";q=5;w=1` {
			t.Errorf("RateLimit-Policy %q, want the fallback's limit", v)
		}
		// Was: the error counted and reported once; the fallback reports
		// none now, so there is none to count.
		if s := m.Stats(); s.LimiterErrors != 0 || len(got) != 0 {
			t.Errorf("Stats() = %+v, hook got %v: want no error", s, got)
		}
	}
}

// A request without a key, or whose cost is malformed, is answered 400 by
// default and served with WithUnmetered (was WithKeyFailure(FailOpen));
// the limiter is not asked either way.
func TestKeyFailure(t *testing.T) {
	failingCost := func(*http.Request) (int, error) { return 0, errors.New(`X-Cost "abc": want a positive integer`) }
	zeroCost := func(*http.Request) (int, error) { return 0, nil }
	for _, c := range []struct {
		name   string
		opts   []httplimit.Option
		status int
		detail string // of a 400
	}{
		{"no key, by default", nil, 400, "The request carries nothing to rate-limit it by."},
		{"no key, unmetered", []httplimit.Option{httplimit.WithUnmetered()}, 200, ""},
		{"a cost that fails", []httplimit.Option{httplimit.WithCost(failingCost)}, 400,
			`The request's cost is malformed: X-Cost "abc": want a positive integer.`},
		{"a cost below 1", []httplimit.Option{httplimit.WithCost(zeroCost)}, 400,
			"The request's cost is malformed: cost 0: want at least 1."},
		{"a cost below 1, unmetered", []httplimit.Option{httplimit.WithCost(zeroCost), httplimit.WithUnmetered()}, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked atomic.Int64
			l := decideFunc(func(context.Context, limiters.Request) (limiters.Decision, error) {
				asked.Add(1)
				return allowAll, nil
			})
			var got []error
			key := "alice"
			if strings.HasPrefix(c.name, "no key") {
				key = ""
			}
			opts := append([]httplimit.Option{httplimit.WithHeaderKey("X-User"),
				httplimit.WithHooks(httplimit.Hooks{Error: func(_ *http.Request, err error) { got = append(got, err) }})}, c.opts...)
			m := newMiddleware(t, l, opts...)
			w := serve(m.Wrap(ok), key)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			if asked.Load() != 0 {
				t.Errorf("the limiter was asked %d times, want 0", asked.Load())
			}
			// Was: one key error for a key or a cost that failed; a cost is
			// counted (and wrapped) apart now, as ErrCost.
			want, wantErr := httplimit.Stats{KeyErrors: 1}, httplimit.ErrKey
			if key != "" {
				want, wantErr = httplimit.Stats{CostErrors: 1}, httplimit.ErrCost
			}
			if s := m.Stats(); s != want {
				t.Errorf("Stats() = %+v, want %+v", s, want)
			}
			if len(got) != 1 || !errors.Is(got[0], wantErr) {
				t.Errorf("the Error hook got %v, want one error wrapping %v", got, wantErr)
			}
			if c.status == 400 {
				if p := readProblem(t, w.Header(), w.Body.Bytes()); p.Status != 400 || p.Detail != c.detail {
					t.Errorf("problem %+v, want status 400 and detail %q", p, c.detail)
				}
				if raw := `X-Cost \"abc\"`; strings.Contains(c.detail, "abc") && !strings.Contains(w.Body.String(), raw) {
					t.Errorf("body %s: want the cost function's error in it, JSON-escaped (%s)", w.Body, raw)
				}
			} else if w.Body.String() != "ok" {
				t.Errorf("body %q, want the handler's", w.Body)
			}
		})
	}
}
