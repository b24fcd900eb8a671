package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// estimate prices a request by its X-Estimate header: the cost reserved.
func estimate(r *http.Request) (int, error) { return strconv.Atoi(r.Header.Get("X-Estimate")) }

// reporting answers with the cost its request asks it to report, as the
// handler of an LLM endpoint reports the tokens a call used: in the
// X-Tokens header, in a trailer of that name, with httplimit.SetCost, or not at all.
var reporting = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	cost := r.URL.Query().Get("cost")
	switch r.URL.Query().Get("how") {
	case "header":
		w.Header().Set("X-Tokens", cost)
		w.Write([]byte("ok"))
	case "trailer":
		w.Header().Set("Trailer", "X-Tokens")
		w.Write([]byte("ok"))
		w.Header().Set("X-Tokens", cost)
	case "undeclared-trailer":
		w.Write([]byte("ok"))
		w.Header().Set(http.TrailerPrefix+"X-Tokens", cost)
	case "set":
		n, _ := strconv.Atoi(cost)
		w.Header().Set("X-Tokens", "999") // httplimit.SetCost wins
		httplimit.SetCost(r, n)
		w.Write([]byte("ok"))
	default:
		w.Write([]byte("ok"))
	}
})

func settleRequest(h http.Handler, est int, how, cost string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/?how="+how+"&cost="+cost, nil)
	r.Header.Set("X-User", "alice")
	r.Header.Set("X-Estimate", strconv.Itoa(est))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Each way of reporting the actual cost settles the request: the next
// response's Remaining shows the refund or the charge; a response that
// reports nothing stays charged at its estimate; a malformed cost is
// reported to the Error hook and charges the estimate too.
func TestSettle(t *testing.T) {
	for _, c := range []struct {
		how, cost string
		remaining int // of 100, after a reservation of 10 and its settle
		err       bool
	}{
		{"header", "3", 97, false},
		{"trailer", "4", 96, false},
		{"undeclared-trailer", "25", 75, false},
		{"set", "0", 100, false},
		{"none", "", 90, false},
		{"header", "lots", 90, true},
		{"header", "-3", 90, true},
	} {
		l, err := gcra.New(limiters.Limit{N: 1, Per: 1000 * time.Second, Burst: 100}, limiters.WithClock(stopped(t0))) // 1e-3 a second
		if err != nil {
			t.Fatal(err)
		}
		var hookErr error
		m := newMiddleware(t, l, httplimit.WithHeaderKey("X-User"), httplimit.WithCost(estimate), httplimit.WithSettle("x-tokens"),
			httplimit.WithHooks(httplimit.Hooks{Error: func(_ *http.Request, err error) { hookErr = err }}))
		h := m.Wrap(reporting)
		w := settleRequest(h, 10, c.how, c.cost)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "90" {
			t.Fatalf("%s %s: %d, remaining %s; want 200 and the estimate's 90", c.how, c.cost, w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
		next := settleRequest(h, 1, "none", "")
		if got := next.Header().Get("X-RateLimit-Remaining"); got != strconv.Itoa(c.remaining-1) {
			t.Errorf("%s %s: the next request sees %s remaining, want %d", c.how, c.cost, got, c.remaining-1)
		}
		if (hookErr != nil) != c.err || c.err && !errors.Is(hookErr, httplimit.ErrSettle) {
			t.Errorf("%s %s: the Error hook got %v", c.how, c.cost, hookErr)
		}
		l.Close()
	}
}

// A charge past the limit puts the key in debt: the next request is
// denied, with the Retry-After the debt takes to pay.
func TestSettleDebt(t *testing.T) {
	l, err := gcra.New(limiters.PerSecond(10), limiters.WithClock(stopped(t0)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := newMiddleware(t, l, httplimit.WithHeaderKey("X-User"), httplimit.WithCost(estimate), httplimit.WithSettle("X-Tokens")).Wrap(reporting)
	if w := settleRequest(h, 2, "header", "25"); w.Code != 200 {
		t.Fatalf("reserved 2: %d", w.Code)
	}
	// 25 spent of 10, refilled at 10 a second: 16 units past what a unit
	// request needs, 1.6s.
	w := settleRequest(h, 1, "none", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("after the debt: %d, Retry-After %q, remaining %q; want 429, 2 and 0", w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Remaining"))
	}
}

// Under several limits the RateLimit item shows the settle; a denied
// request is not settled; a limiter that cannot settle is refused when the
// middleware is made.
func TestSettleComposite(t *testing.T) {
	c := newComposite(t, limiters.GCRA, limiters.Limit{Name: "minute", N: 100, Per: time.Minute}, limiters.Limit{Name: "hour", N: 1000, Per: time.Hour})
	h := newMiddleware(t, c, httplimit.WithHeaderKey("X-User"), httplimit.WithCost(estimate), httplimit.WithSettle("X-Tokens"),
		httplimit.WithHeaders(httplimit.DraftHeaders)).Wrap(reporting)
	settleRequest(h, 50, "header", "20")
	if w := settleRequest(h, 90, "header", "1"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("90 more of the minute's 80: %d", w.Code)
	}
	// Was one item a limit, 79 and 979 remaining: the one item now is the
	// limit of least room's, the minute's 79 (the hour's 979 is in no
	// decision).
	w := settleRequest(h, 1, "none", "")
	_, items := draft(t, w.Header())
	if len(items) != 1 || items[0].name != "minute" || items[0].params["r"] != 79 {
		t.Errorf("after a settle at 20 and a denial: %q, want minute with 79 remaining", w.Header().Get(httplimit.HeaderRateLimit))
	}
	if _, err := httplimit.New(fixed(allowAll), httplimit.WithSettle("X-Tokens")); err == nil {
		t.Error("a limiter that cannot settle was taken")
	}
	if _, err := httplimit.New(c, httplimit.WithSettle("bad header")); err == nil {
		t.Error("a malformed field name was taken")
	}
	r := httptest.NewRequest("GET", "/", nil)
	if httplimit.SetCost(r, 3) {
		t.Error("SetCost on a request not being settled reported success")
	}
}
