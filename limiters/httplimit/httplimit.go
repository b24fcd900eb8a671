// Package httplimit is net/http middleware that rate-limits requests with
// any limiters.Limiter: in memory, on Redis, several limits at once
// (package composite) or per-user tiers (package tiers).
//
// For each request it finds a key (the client's address by default) and a
// cost (1 by default), asks the limiter to Decide, and writes the Decision
// in the response's header fields: the legacy X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset, and the IETF draft's
// RateLimit-Policy (every limit the decision was made under) and RateLimit
// (the decision's quota). An admitted request goes on to the next handler;
// a denied one is answered 429 with Retry-After and an RFC 9457 problem
// naming the limits it violated. All of it comes from the Decision alone.
//
// A request without a key, or whose cost is malformed, is answered 400
// (WithUnmetered serves it instead). When the limiter returns an error,
// the Decision that came with it, its own failure policy's, decides: an
// admitted request is served unmetered, without rate-limit fields; a
// denied one is answered 503 with Retry-After. The Error hook hears every
// such failure and Stats counts it.
//
// WithSettle decides a request at an estimate and settles it at the
// actual cost the handler reports. A Middleware is safe for concurrent
// use.
package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// CostFunc returns what a request costs, at least 1. An error, or a cost
// below 1, means the cost is malformed: the request is answered 400, or
// served unmetered (WithUnmetered).
type CostFunc func(r *http.Request) (int, error)

var (
	// ErrKey reports that the key function failed: the request has nothing
	// to be limited by. The Error hook's error wraps it and the function's.
	ErrKey = errors.New("httplimit: no key for the request")
	// ErrCost reports that the cost function failed or returned a cost
	// below 1. The Error hook's error wraps it and the function's.
	ErrCost = errors.New("httplimit: the request's cost is malformed")
	// ErrLimiter reports that the limiter returned an error: its backend
	// did not decide. The Error hook's error wraps it and the limiter's.
	ErrLimiter = errors.New("httplimit: the limiter did not decide")
)

// DefaultPolicy names the one policy of a decision that names none (from
// a limiter whose Decision has no Policy).
const DefaultPolicy = "default"

// Hooks report decisions, to metrics for instance. Each may be nil. They
// run on the request's goroutine, before the next handler: they should be
// quick.
type Hooks struct {
	// Allowed is called for every request the limiter admitted.
	Allowed func(r *http.Request, key string, d limiters.Decision)
	// Denied is called for every request the limiter denied, in shadow
	// mode too (where it is served).
	Denied func(r *http.Request, key string, d limiters.Decision)
	// Error is called when the key function failed (the error wraps
	// ErrKey), the cost function did (ErrCost), the limiter did
	// (ErrLimiter), or a request could not be settled (ErrSettle).
	Error func(r *http.Request, err error)
	// Latency is called with the time the limiter took to decide (errors
	// included). When it is nil the clock is not read.
	Latency func(r *http.Request, took time.Duration)
}

// Stats counts what the middleware did not simply decide.
type Stats struct {
	// ShadowDenied is how many requests shadow mode served that the
	// limiter denied.
	ShadowDenied int64
	// KeyErrors is how many requests had no key.
	KeyErrors int64
	// CostErrors is how many requests had a malformed cost.
	CostErrors int64
	// LimiterErrors is how many decisions the limiter failed to make.
	LimiterErrors int64
}

// Middleware rate-limits the handlers it wraps.
type Middleware struct {
	lim     limiters.Limiter
	settler limiters.Settler // non-nil: requests are reserved, then settled
	settings
	// policy is the RateLimit-Policy value of the last Policy seen: a
	// limiter's Policy is shared by its decisions and never changes.
	policy atomic.Pointer[policyValue]

	shadowDenied, keyErrors, costErrors, limiterErrors atomic.Int64
}

type policyValue struct {
	p *limiters.Policy
	v string
}

// New returns middleware that limits requests with l, as opts say.
func New(l limiters.Limiter, opts ...Option) (*Middleware, error) {
	if l == nil {
		return nil, fmt.Errorf("httplimit: no limiter")
	}
	c := config{settings: settings{headers: AllHeaders}}
	for _, opt := range opts {
		opt(&c)
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.key == nil {
		c.key, _ = ClientIP(IPConfig{}) // the zero config is valid
	}
	if c.headers&^AllHeaders != 0 {
		return nil, fmt.Errorf("httplimit: headers %#x: want a combination of LegacyHeaders and DraftHeaders", uint8(c.headers))
	}
	m := &Middleware{lim: l, settings: c.settings}
	if c.settleFrom != "" {
		s, ok := l.(limiters.Settler)
		if !ok {
			return nil, fmt.Errorf("httplimit: WithSettle: the limiter (%T) cannot settle: want a limiters.Settler", l)
		}
		m.settler = s
	}
	return m, nil
}

// Stats returns the counts so far.
func (m *Middleware) Stats() Stats {
	return Stats{
		ShadowDenied:  m.shadowDenied.Load(),
		KeyErrors:     m.keyErrors.Load(),
		CostErrors:    m.costErrors.Load(),
		LimiterErrors: m.limiterErrors.Load(),
	}
}

// Wrap returns next behind the limit. m.Wrap is a
// func(http.Handler) http.Handler, as routers take middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler { return &handler{m, next} }

type handler struct {
	m    *Middleware
	next http.Handler
}

// ServeHTTP meters r (its key, its cost), has the limiter decide, writes
// the decision's header fields, and answers 429 or serves r.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	key, err := m.key(r)
	if err != nil {
		m.unmetered(w, r, h.next, ErrKey, err)
		return
	}
	n, err := m.costOf(r)
	if err != nil {
		m.unmetered(w, r, h.next, ErrCost, err)
		return
	}
	var res limiters.Reservation // when settling
	d, err := m.decide(r, key, n, &res)
	switch {
	case err != nil:
		m.failed(w, r, h.next, d, err)
	case !m.respond(w, r, key, n, d):
		// denied, and answered
	case res.Allowed():
		m.settle(w, r, h.next, res)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// costOf is what r costs: 1, or what the cost function says.
func (m *Middleware) costOf(r *http.Request) (int, error) {
	if m.cost == nil {
		return 1, nil
	}
	n, err := m.cost(r)
	if err == nil && n < 1 {
		err = fmt.Errorf("cost %d: want at least 1", n)
	}
	return n, err
}

// decide asks the limiter: Reserve when settling, into res, else Decide.
func (m *Middleware) decide(r *http.Request, key string, n int, res *limiters.Reservation) (d limiters.Decision, err error) {
	var start time.Time
	if m.hooks.Latency != nil {
		start = time.Now()
	}
	req := limiters.Request{Key: key, N: n}
	if m.settler != nil {
		*res, err = m.settler.Reserve(r.Context(), req)
		d = res.Decision()
	} else {
		d, err = m.lim.Decide(r.Context(), req)
	}
	if m.hooks.Latency != nil {
		m.hooks.Latency(r, time.Since(start))
	}
	return d, err
}

// unmetered answers a request that could not be metered (kind is ErrKey
// or ErrCost, err why) with 400, or serves it (WithUnmetered).
func (m *Middleware) unmetered(w http.ResponseWriter, r *http.Request, next http.Handler, kind, err error) {
	if kind == ErrKey {
		m.keyErrors.Add(1)
	} else {
		m.costErrors.Add(1)
	}
	if m.hooks.Error != nil {
		m.hooks.Error(r, fmt.Errorf("%w: %w", kind, err))
	}
	if m.serveUnmetered {
		next.ServeHTTP(w, r)
		return
	}
	badRequest(w, kind, err)
}

// failed follows d, the limiter's failure policy's answer to a request it
// could not decide (err): serves the request unmetered if d admits it (or
// in shadow mode), else answers 503.
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, next http.Handler, d limiters.Decision, err error) {
	m.limiterErrors.Add(1)
	if m.hooks.Error != nil {
		m.hooks.Error(r, fmt.Errorf("%w: %w", ErrLimiter, err))
	}
	if d.Allowed || m.shadow {
		next.ServeHTTP(w, r)
		return
	}
	unavailable(w, d)
}
