package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// The allocations of a request, counted. Was 0 for a decision by a
// header key (and 1 by client IP, its string): a slab of unsafe.Strings
// and a sync.Pool saved them. Now 2, on purpose: the header values (and a
// 429's body) are formatted into a stack buffer and set as substrings of
// one string, each in a slice of one []string: one allocation for the
// string, one for the slices, however many fields. A key from the
// client's address adds its string, as before.
func TestAllocs(t *testing.T) {
	policy := limiters.NewPolicy(limiters.Limit{Name: "minute", N: 100, Per: time.Minute})
	admit := allowAll
	admit.Policy = policy
	deny := limiters.Decision{Limit: 100, RetryAfter: time.Second, ResetAfter: time.Minute, Policy: policy, Denied: limiters.Denials(0).Deny(0, true)}
	header := httplimit.WithHeaderKey("X-User")
	for _, c := range []struct {
		name string
		d    limiters.Decision
		opts []httplimit.Option
		want float64
	}{
		{"allowed, header key", admit, []httplimit.Option{header}, 2},
		{"denied, header key", deny, []httplimit.Option{header}, 2},
		{"allowed, client IP", admit, []httplimit.Option{httplimit.WithClientIP(httplimit.IPConfig{})}, 3},
		{"allowed, no policy", allowAll, []httplimit.Option{header}, 2},
		{"allowed, no header fields", admit, []httplimit.Option{header, httplimit.WithHeaders(httplimit.NoHeaders)}, 0},
	} {
		h := newMiddleware(t, fixed(c.d), c.opts...).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		got := testing.AllocsPerRun(1000, func() {
			clear(w.Header())
			w.Body.Reset()
			h.ServeHTTP(w, r)
		})
		if got != c.want {
			t.Errorf("%s: %v allocations a request, want %v", c.name, got, c.want)
		}
	}
}
