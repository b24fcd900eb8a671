package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// WithSettle settles each admitted request at its actual cost once the
// handler has returned: the cost it was decided at (WithCost, 1 by
// default) is an estimate, reserved (limiters.Settler), and the actual
// cost is what the handler reported with SetCost, else the integer in the
// response header field called from, else in the trailer of that name. A
// response that reports no cost stays charged at its estimate; one that
// reports a malformed cost too, and the Error hook is told (the error
// wraps ErrSettle). A settle that fails (its backend did not answer) is
// reported the same way; the response has gone by then. The limiter must
// be a limiters.Settler.
func WithSettle(from string) Option {
	return func(c *config) {
		if _, err := HeaderKey(from); err != nil { // the same check of the name
			c.fail(fmt.Errorf("httplimit: WithSettle: %w", err))
			return
		}
		c.settleFrom = http.CanonicalHeaderKey(from)
	}
}

// ErrSettle reports that a request could not be settled at its actual
// cost: the cost it reported was malformed, or the limiter failed. The
// Error hook's error wraps it.
var ErrSettle = errors.New("httplimit: the request was not settled")

// SetCost reports the actual cost of r (0 or more), to be settled when
// the handler returns (WithSettle); it overrides a cost in the response's
// header fields. It returns false, and does nothing, when r is not being
// settled.
func SetCost(r *http.Request, n int) bool {
	c, ok := r.Context().Value(costKey{}).(*reported)
	if !ok || n < 0 {
		return false
	}
	c.n, c.set = n, true
	return true
}

// reported is the actual cost a handler reported with SetCost.
type reported struct {
	n   int
	set bool
}

type costKey struct{}

// settle serves r, admitted at the estimate res reserved, and then
// settles res at the actual cost the handler reported, if any.
func (m *Middleware) settle(w http.ResponseWriter, r *http.Request, next http.Handler, res limiters.Reservation) {
	c := &reported{}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), costKey{}, c)))
	actual, err := m.actual(w, c)
	if err == nil && actual >= 0 {
		_, err = m.settler.Settle(context.WithoutCancel(r.Context()), limiters.Settlement{Reservation: res, Actual: actual})
	}
	if err != nil && m.hooks.Error != nil {
		m.hooks.Error(r, fmt.Errorf("%w: %w", ErrSettle, err))
	}
}

// actual is the actual cost a served request reported: with SetCost, in a
// header field, or in a trailer; -1 if none.
func (m *Middleware) actual(w http.ResponseWriter, c *reported) (int, error) {
	if c.set {
		return c.n, nil
	}
	// A trailer declared in the Trailer field is set under its own name;
	// one not declared, under TrailerPrefix and its name.
	h := w.Header()
	v := h.Get(m.settleFrom)
	if v == "" {
		v = h.Get(http.TrailerPrefix + m.settleFrom)
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return -1, fmt.Errorf("%s %q: want an integer, 0 or more", m.settleFrom, v)
	}
	return n, nil
}
