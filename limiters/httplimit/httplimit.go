// Package httplimit is net/http middleware that rate-limits requests with
// any limiters.Limiter: in memory, on Redis, several limits at once
// (package composite) or per-user tiers (package tiers).
//
// For each request the middleware finds a key (the client's IP address by
// default; a header such as an API key; any function of the request) and
// a cost (1 by default), asks the limiter, and writes what it decided in
// the response's header fields:
//
//	X-RateLimit-Limit: 10
//	X-RateLimit-Remaining: 7
//	X-RateLimit-Reset: 1
//	RateLimit-Policy: "10/s";q=10;w=1, "hourly";q=1000;w=3600
//	RateLimit: "10/s";r=7;t=1, "hourly";r=997;t=3600
//
// The first three are the legacy fields most clients read (Reset is a delay
// in seconds, rounded up, not a Unix time); the last two are the IETF
// draft's structured fields (draft-ietf-httpapi-ratelimit-headers,
// RFC 9651 syntax), one item per limit when the limiter can tell its
// limits apart (see LimitDecider, EachDecider and KeyLimits), one item
// otherwise. WithHeaders chooses which sets are sent.
//
// An admitted request goes on to the next handler. A denied one is
// answered 429 Too Many Requests with Retry-After (the decision's
// RetryAfter in whole seconds, rounded up, so a client that waits that
// long is admitted; none when the request costs more than the limit and
// will never be admitted) and an RFC 9457 problem body of the draft's
// quota-exceeded type naming the policies it violated:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Request cannot be satisfied as assigned quota has been exceeded",
//	 "status":429,"detail":"Retry in 1 second.","violated-policies":["10/s"]}
//
// In shadow mode (WithShadow) nothing is denied: the decision is made and
// its headers sent, and what would have been denied is counted (Stats)
// and reported to the Denied hook.
//
// When the key or cost function fails, or the limiter returns an error
// (its backend did not decide), the request follows a failure mode:
// served unmetered (FailOpen) or refused (FailClosed): 400 for a request
// without a key, 503 with Retry-After and the draft's
// temporary-reduced-capacity problem for a limiter that failed. Either
// way it is counted (Stats) and reported to the Error hook, never
// silently admitted or denied. By default a request without a key is
// refused, since serving it would let any client skip the limit by
// leaving out its key, and a limiter failure is served: an outage of the
// limiter's store is not an outage of the API.
//
// A request whose cost is known only once it is done (an LLM call's
// tokens, a download's bytes) is decided at an estimate and settled after
// (WithSettle): the middleware reserves the estimate the cost function
// gives, and once the handler has returned, settles the reservation at the
// actual cost the handler reported (SetCost) or wrote in a response header
// or trailer, so that the next request's headers show it.
//
// Hooks (WithHooks) report each decision to metrics; an unset hook costs a
// nil check, and the clock is read for the latency hook only when it is
// set.
//
// A Middleware is safe for concurrent use.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// FailureMode is what a request whose key or decision failed gets.
type FailureMode int

const (
	// FailOpen serves the request unmetered.
	FailOpen FailureMode = iota
	// FailClosed refuses it: 400 for a request without a key, 503 for a
	// limiter that did not decide.
	FailClosed
	// FailWithDecision, for the limiter only, serves or refuses the
	// request by the Decision the limiter returned with its error, as if
	// it had decided: for a limiter that falls back on its own (a
	// redislimit Limiter with the Fallback failure mode decides in memory
	// while Redis does not, and fills its per-limit decision too). The
	// error still goes to the Error hook.
	FailWithDecision
)

func (f FailureMode) String() string {
	switch f {
	case FailOpen:
		return "fail open"
	case FailClosed:
		return "fail closed"
	case FailWithDecision:
		return "fail with the limiter's decision"
	}
	return fmt.Sprintf("FailureMode(%d)", int(f))
}

// CostFunc returns what a request costs (at least 1). An error, or a cost
// below 1, means the request cannot be metered; it follows the key
// failure mode.
type CostFunc func(r *http.Request) (int, error)

var (
	// ErrKey reports that the key or the cost function failed: the
	// request could not be metered. The Error hook's error wraps it and
	// the function's error.
	ErrKey = errors.New("httplimit: no key or cost for the request")
	// ErrLimiter reports that the limiter returned an error: its backend
	// did not decide. The Error hook's error wraps it and the limiter's.
	ErrLimiter = errors.New("httplimit: the limiter did not decide")
)

// Hooks report decisions, to metrics for instance. Each may be nil. They
// run on the request's goroutine, before the next handler: they should be
// quick.
type Hooks struct {
	// Allowed is called for every request the limiter admitted.
	Allowed func(r *http.Request, key string, d limiters.Decision)
	// Denied is called for every request the limiter denied, in shadow
	// mode too (where it is served).
	Denied func(r *http.Request, key string, d limiters.Decision)
	// Error is called when the key or cost function failed (the error
	// wraps ErrKey) or the limiter did (ErrLimiter), before the failure
	// mode is applied.
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
	// KeyErrors is how many requests had no key or no cost.
	KeyErrors int64
	// LimiterErrors is how many decisions the limiter failed to make.
	LimiterErrors int64
}

// LimitDecider is a limiter of several limits that decides at an explicit
// time and says what each of its limits decided: *composite.Limiter is
// one. The middleware then sends one RateLimit item per limit, and names
// in a denial only the limits that denied.
type LimitDecider interface {
	limiters.Limiter
	// DecideAt decides for key at t and, when per has room for one
	// Decision a limit, fills it with each limit's own.
	DecideAt(key string, t time.Time, n int, per []limiters.Decision) (d limiters.Decision, denied int)
	// Limits returns the limits, named, in DecideAt's order.
	Limits() []composite.Limit
}

// KeyLimits is a limiter whose limits depend on the key and which says
// what they are: *tiers.Limiter is one (the key is the user). The
// middleware decides with AllowN and sends every limit in
// RateLimit-Policy, and one RateLimit item: the decision's, named after
// the first limit of its quota, its t at most that limit's window. The
// decision's Remaining is the least of all the limits', so the item never
// promises more than the limit it names holds.
type KeyLimits interface {
	limiters.Limiter
	Limits(key string) ([]composite.Limit, string)
}

// EachDecider is a limiter of several limits that says what each of them
// decided, through a context and with an error, as a limiter with a store
// must: *redislimit.Limiter is one. Like a LimitDecider, it gets one
// RateLimit item per limit.
type EachDecider interface {
	limiters.Limiter
	// DecideEach decides for key at t (zero: the limiter's own clock)
	// and, when per has room for one Decision a limit, fills it with each
	// limit's own. An error means the limiter did not decide.
	DecideEach(ctx context.Context, key string, t time.Time, n int, per []limiters.Decision) (d limiters.Decision, denied int, err error)
	// Limits returns the limits, named, in DecideEach's order.
	Limits() []composite.Limit
}

// windowed and bucketed are the single limiters of package limiters:
// their one policy is known without a decision.
type windowed interface{ Window() limiters.Window }
type bucketed interface{ Bucket() limiters.Bucket }

// DefaultPolicy names the one policy of a limiter that does not name its
// limits.
const DefaultPolicy = "default"

// settings are what the options set that a Middleware keeps as set.
type settings struct {
	key       KeyFunc
	cost      CostFunc
	headers   Headers
	shadow    bool
	onKey     FailureMode
	onLimiter FailureMode
	hooks     Hooks
	clock     limiters.Clock
	// settleFrom, when set, is the response field the actual cost is
	// read from (WithSettle).
	settleFrom string
}

// config is what the options set.
type config struct {
	settings
	policies    []Policy
	setPolicies bool
	err         error // the first option that failed
}

// An Option configures a Middleware.
type Option func(*config)

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithKey keys requests by f. The default is ClientIP(IPConfig{}): the
// direct peer's address, IPv6 grouped by /64, no proxy trusted.
func WithKey(f KeyFunc) Option {
	var err error
	if f == nil {
		err = fmt.Errorf("httplimit: WithKey(nil)")
	}
	return keyOption(f, err)
}

// WithHeaderKey keys requests by the header called name (see HeaderKey).
func WithHeaderKey(name string) Option { return keyOption(HeaderKey(name)) }

// WithClientIP keys requests by the client's address (see ClientIP).
func WithClientIP(ip IPConfig) Option { return keyOption(ClientIP(ip)) }

// keyOption sets the key function k, or fails New with err.
func keyOption(k KeyFunc, err error) Option {
	return func(c *config) {
		if err != nil {
			c.fail(err)
		}
		c.key = k
	}
}

// WithCost prices requests by f; the default costs every request 1.
func WithCost(f CostFunc) Option { return func(c *config) { c.cost = f } }

// WithHeaders chooses the rate-limit header fields sent; the default is
// AllHeaders.
func WithHeaders(h Headers) Option { return func(c *config) { c.headers = h } }

// WithShadow turns on shadow (dry-run) mode: every request is decided and
// its headers sent, and none is denied; Stats counts those that would
// have been.
func WithShadow() Option { return func(c *config) { c.shadow = true } }

// WithKeyFailure sets what a request without a key (or cost) gets; the
// default is FailClosed: 400 Bad Request.
func WithKeyFailure(m FailureMode) Option { return func(c *config) { c.onKey = m } }

// WithLimiterFailure sets what a request gets when the limiter returns an
// error; the default is FailOpen. The Decision the limiter returns with
// its error is not used: this mode decides.
func WithLimiterFailure(m FailureMode) Option { return func(c *config) { c.onLimiter = m } }

// WithSettle settles each admitted request at its actual cost once the
// handler has returned: the cost it was decided at (WithCost, 1 by
// default) is an estimate, reserved (limiters.Settler), and the actual
// cost is what the handler reported with SetCost, else the integer in the
// response header field called from, else in the trailer of that name. A
// response that reports no cost stays charged at its estimate; one that
// reports a malformed cost too, and the Error hook is told (the error
// wraps ErrSettle). A settle that fails (its backend did not answer) is
// reported the same way; the response has gone by then. The limiter must
// be a limiters.Settler: every limiter of ratelab's is, in memory or on
// Redis (but one that leases or packs its keys: its Reserve says so).
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

// WithHooks sets the hooks.
func WithHooks(h Hooks) Option { return func(c *config) { c.hooks = h } }

// WithPolicies states the limiter's limits for the RateLimit-Policy field,
// for a limiter that cannot say them itself (a Redis limiter), or to
// rename them. The RateLimit item is named after the first policy whose
// Quota is the decision's Limit (the first policy if none is). For a
// LimitDecider they must be as many as its limits, in its order; a
// KeyLimits says its own, per key, and refuses them.
func WithPolicies(ps ...Policy) Option {
	return func(c *config) { c.policies, c.setPolicies = append([]Policy(nil), ps...), true }
}

// WithClock sets the time a LimitDecider decides at; nil, the default,
// means time.Now(). (Other limiters decide at their own clock, in AllowN.)
func WithClock(clk limiters.Clock) Option { return func(c *config) { c.clock = clk } }

// Middleware rate-limits the handlers it wraps.
type Middleware struct {
	lim     limiters.Limiter
	settler limiters.Settler // non-nil: requests are reserved, then settled
	decider LimitDecider     // non-nil: one item per limit,
	each    EachDecider      // or non-nil: one item per limit, from a store
	keyed   KeyLimits        // non-nil: the policies depend on the key
	// policies are the limiter's, when they do not depend on the key
	// (nil when unknown); policyValue is them as RateLimit-Policy, and
	// names their names as structured-field Strings.
	policies    []Policy
	policyValue string
	names       []string

	settings

	_             [64]byte // the counters' writes stay off the fields above
	shadowDenied  counter
	keyErrors     counter
	limiterErrors counter
}

// counter is a count alone on its cache line: shadow denials can be as
// frequent as requests, and should not slow the others' counting.
type counter struct {
	atomic.Int64
	_ [56]byte
}

// New returns middleware that limits requests with l, as opts say.
func New(l limiters.Limiter, opts ...Option) (*Middleware, error) {
	if l == nil {
		return nil, fmt.Errorf("httplimit: no limiter")
	}
	c := config{settings: settings{headers: AllHeaders, onKey: FailClosed, onLimiter: FailOpen}}
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
	for _, f := range []struct {
		what string
		m    FailureMode
	}{{"key", c.onKey}, {"limiter", c.onLimiter}} {
		if f.m != FailOpen && f.m != FailClosed && (f.m != FailWithDecision || f.what != "limiter") {
			return nil, fmt.Errorf("httplimit: %s failure mode %v: want FailOpen or FailClosed (or, for the limiter, FailWithDecision)", f.what, f.m)
		}
	}
	m := &Middleware{lim: l, settings: c.settings}
	if c.settleFrom != "" {
		s, ok := l.(limiters.Settler)
		if !ok {
			return nil, fmt.Errorf("httplimit: WithSettle: the limiter (%T) cannot settle: want a limiters.Settler", l)
		}
		m.settler = s
	}
	switch l := l.(type) {
	case LimitDecider:
		m.decider = l
		m.policies = perLimit(l.Limits())
	case EachDecider:
		m.each = l
		m.policies = perLimit(l.Limits())
	case KeyLimits:
		if c.setPolicies {
			return nil, fmt.Errorf("httplimit: WithPolicies for a limiter that says its limits per key (%T)", l)
		}
		m.keyed = l
	case windowed:
		w := l.Window()
		m.policies = []Policy{{Name: DefaultPolicy, Quota: w.Limit, Window: w.Length}}
	case bucketed:
		b := l.Bucket()
		m.policies = []Policy{{Name: DefaultPolicy, Quota: b.Capacity, Window: fillTime(b)}}
	}
	if (m.decider != nil || m.each != nil) && len(m.policies) == 0 { // nothing to say per limit
		m.decider, m.each = nil, nil
	}
	if c.setPolicies && (m.decider != nil || m.each != nil) && len(c.policies) != len(m.policies) {
		return nil, fmt.Errorf("httplimit: %d policies for a limiter of %d limits", len(c.policies), len(m.policies))
	}
	if c.setPolicies {
		if len(c.policies) == 0 {
			return nil, fmt.Errorf("httplimit: WithPolicies with no policy")
		}
		seen := map[string]int{}
		for i, p := range c.policies {
			switch j, dup := seen[p.Name]; {
			case p.Name == "":
				return nil, fmt.Errorf("httplimit: policy %d has no name", i+1)
			case dup:
				return nil, fmt.Errorf("httplimit: policies %d and %d are both named %q", j+1, i+1, p.Name)
			case p.Quota < 0 || p.Window < 0:
				return nil, fmt.Errorf("httplimit: policy %q: quota %d and window %v must not be negative", p.Name, p.Quota, p.Window)
			}
			seen[p.Name] = i
		}
		m.policies = c.policies
	}
	if m.policies != nil {
		m.policyValue = string(appendPolicies(nil, m.policies))
		for _, p := range m.policies {
			m.names = append(m.names, string(appendString(nil, p.Name)))
		}
	}
	return m, nil
}

// perLimit states limits as policies, one a limit.
func perLimit(limits []composite.Limit) []Policy {
	var ps []Policy
	for _, lim := range limits {
		ps = append(ps, policyOf(lim))
	}
	return ps
}

// Stats returns the counts so far.
func (m *Middleware) Stats() Stats {
	return Stats{
		ShadowDenied:  m.shadowDenied.Load(),
		KeyErrors:     m.keyErrors.Load(),
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

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	key, err := m.key(r)
	n := 1
	if err == nil && m.cost != nil {
		if n, err = m.cost(r); err == nil && n < 1 {
			err = fmt.Errorf("httplimit: cost %d: want at least 1", n)
		}
	}
	if err != nil {
		m.keyErrors.Add(1)
		m.failed(w, r, h.next, fmt.Errorf("%w: %w", ErrKey, err), m.onKey, http.StatusBadRequest)
		return
	}
	var serve bool
	if m.settler != nil {
		m.reserve(w, r, h.next, key, n)
		return
	}
	if m.decider != nil || m.each != nil {
		serve, err = m.decidePer(w, r, key, n)
	} else {
		var start time.Time
		if m.hooks.Latency != nil {
			start = time.Now()
		}
		var d limiters.Decision
		d, err = m.lim.AllowN(r.Context(), key, n)
		m.took(r, start)
		if err != nil && m.decidesAnyway(r, err) {
			err = nil
		}
		if err == nil {
			serve = m.respond(w, r, key, n, d, nil)
		}
	}
	if err != nil {
		m.limiterErrors.Add(1)
		m.failed(w, r, h.next, fmt.Errorf("%w: %w", ErrLimiter, err), m.onLimiter, http.StatusServiceUnavailable)
		return
	}
	if serve {
		h.next.ServeHTTP(w, r)
	}
}

// reserve decides a request at its estimated cost n, serves it if
// admitted, and settles it at its actual cost when next has returned.
func (m *Middleware) reserve(w http.ResponseWriter, r *http.Request, next http.Handler, key string, n int) {
	var start time.Time
	if m.hooks.Latency != nil {
		start = time.Now()
	}
	res, err := m.settler.Reserve(r.Context(), key, n)
	m.took(r, start)
	if err != nil && !m.decidesAnyway(r, err) {
		m.limiterErrors.Add(1)
		m.failed(w, r, next, fmt.Errorf("%w: %w", ErrLimiter, err), m.onLimiter, http.StatusServiceUnavailable)
		return
	}
	var per []limiters.Decision
	if len(res.Per) == len(m.policies) && (m.decider != nil || m.each != nil) {
		per = res.Per
	}
	if !m.respond(w, r, key, n, res.Decision, per) {
		return
	}
	if err != nil || !res.Allowed { // decided without the limiter, or served in shadow mode: nothing reserved
		next.ServeHTTP(w, r)
		return
	}
	c := &reported{}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), costKey{}, c)))
	actual, err := m.actual(w, c)
	if err == nil && actual >= 0 {
		_, err = m.settler.Settle(context.WithoutCancel(r.Context()), res, actual)
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

// perPool holds the per-limit decisions of a LimitDecider's decision: a
// slice handed to an interface method lives on the heap.
var perPool = sync.Pool{New: func() any { return new([composite.MaxLimits]limiters.Decision) }}

// decidePer decides with a LimitDecider or an EachDecider, each limit's
// decision kept, and responds as respond does, unless the limiter
// failed.
func (m *Middleware) decidePer(w http.ResponseWriter, r *http.Request, key string, n int) (serve bool, err error) {
	var per []limiters.Decision
	if len(m.policies) <= composite.MaxLimits {
		buf := perPool.Get().(*[composite.MaxLimits]limiters.Decision)
		defer perPool.Put(buf) // before the next handler runs, which may take long
		per = buf[:len(m.policies)]
	} else {
		per = make([]limiters.Decision, len(m.policies))
	}
	start, now := m.times(m.decider != nil)
	var d limiters.Decision
	if m.decider != nil {
		d, _ = m.decider.DecideAt(key, now, n, per)
	} else {
		clear(per) // filled by a limiter that decides, or falls back
		d, _, err = m.each.DecideEach(r.Context(), key, now, n, per)
	}
	m.took(r, start)
	if err != nil && !m.decidesAnyway(r, err) {
		return false, err
	}
	return m.respond(w, r, key, n, d, per), nil
}

// times returns when a decision starts, for the Latency hook (zero
// without one), and the time to decide at: the clock's (WithClock), else
// time.Now() when local, else zero (the limiter's own clock). The clock
// is read once for both when it can be.
func (m *Middleware) times(local bool) (start, now time.Time) {
	if m.hooks.Latency != nil || (m.clock == nil && local) {
		start = time.Now()
	}
	switch {
	case m.clock != nil:
		now = m.clock.Now()
	case local:
		now = start
	}
	return start, now
}

// took reports the time since start to the Latency hook, if set.
func (m *Middleware) took(r *http.Request, start time.Time) {
	if m.hooks.Latency != nil {
		m.hooks.Latency(r, time.Since(start))
	}
}

// respond sets decision d's headers and reports whether the request is to
// be served; if not, it has answered it. per, when not nil, is what each
// of m.policies decided.
func (m *Middleware) respond(w http.ResponseWriter, r *http.Request, key string, n int, d limiters.Decision, per []limiters.Decision) (serve bool) {
	deny := !d.Allowed && !m.shadow
	retry := int64(-1) // the Retry-After sent, if any
	if deny {
		retry = retrySeconds(d)
	}
	sl := slabs.Get().(*slab)
	f := fields{b: sl.room()}
	f.start = len(f.b)
	if m.headers&LegacyHeaders != 0 {
		f.b = appendInt(f.b, int64(d.Limit))
		f.add(fieldLimit)
		f.b = appendInt(f.b, int64(d.Remaining))
		f.add(fieldRemaining)
		f.b = appendInt(f.b, ceilSeconds(d.ResetAfter))
		f.add(fieldReset)
	}
	// The policies of this key, and the name of the one RateLimit item
	// when there is one.
	policies, names := m.policies, m.names
	if m.keyed != nil && (m.headers&DraftHeaders != 0 || deny) {
		policies, names = m.keyPolicies(key)
	}
	// Without one decision a limit, the one item is the decision's,
	// named after the first policy of its quota and its effective window
	// at most that policy's: the limit that policy states is full again
	// within its window, whatever the others hold.
	name := quotedDefault
	item := d
	if per == nil && len(policies) > 0 {
		i, found := pick(policies, d.Limit)
		name = names[i]
		if found && policies[i].Window > 0 {
			item.ResetAfter = min(item.ResetAfter, policies[i].Window)
		}
	}
	if m.headers&DraftHeaders != 0 {
		switch {
		case m.policyValue != "":
			f.b = append(f.b, m.policyValue...)
		case len(policies) > 0:
			f.b = appendPolicies(f.b, policies)
		default: // a limiter that does not say its limit: the decision does
			f.b = append(f.b, quotedDefault...)
			f.b = appendQuota(f.b, Policy{Quota: d.Limit})
		}
		f.add(fieldPolicy)
		if per != nil {
			for i, p := range per {
				if i > 0 {
					f.b = append(f.b, ", "...)
				}
				f.b = append(f.b, names[i]...)
				f.b = appendLimit(f.b, p, retry)
			}
		} else {
			f.b = append(f.b, name...)
			f.b = appendLimit(f.b, item, retry)
		}
		f.add(fieldRateLimit)
	}
	if !deny {
		f.set(w.Header(), sl)
		slabs.Put(sl)
		if d.Allowed {
			if m.hooks.Allowed != nil {
				m.hooks.Allowed(r, key, d)
			}
		} else {
			m.shadowDenied.Add(1)
			if m.hooks.Denied != nil {
				m.hooks.Denied(r, key, d)
			}
		}
		return true
	}
	if m.hooks.Denied != nil {
		m.hooks.Denied(r, key, d)
	}
	deny429(w, &f, sl, n, d, retry, per, names, name)
	slabs.Put(sl)
	return false
}

// deny429 answers a denied request: 429 with f's fields, Retry-After
// (retry seconds, when retry >= 0) and a quota-exceeded problem naming the
// policies violated: the denying limits' of per (whose names are names),
// or name. The names are structured-field Strings, which are JSON strings
// too: printable ASCII, with '"' and '\' escaped. The body is written
// from sl's room past the values, which the next response may overwrite:
// a Write does not keep what it is given.
func deny429(w http.ResponseWriter, f *fields, sl *slab, n int, d limiters.Decision, retry int64, per []limiters.Decision, names []string, name string) {
	if retry >= 0 {
		f.b = appendInt(f.b, retry)
		f.add(fieldRetryAfter)
	}
	f.b = append(f.b, problemJSON...)
	f.add(fieldContentType)
	f.set(w.Header(), sl)
	w.WriteHeader(http.StatusTooManyRequests)

	b := append(sl.b, quotaExceeded...)
	start := len(sl.b)
	if retry >= 0 {
		b = append(b, "Retry in "...)
		b = appendInt(b, retry)
		b = append(b, " second"...)
		if retry != 1 {
			b = append(b, 's')
		}
		b = append(b, '.')
	} else {
		b = append(b, "The request costs "...)
		b = appendInt(b, int64(n))
		b = append(b, ", more than the limit of "...)
		b = appendInt(b, int64(d.Limit))
		b = append(b, ": it will never be admitted."...)
	}
	b = append(b, `","violated-policies":[`...)
	if per != nil {
		first := true
		for i, p := range per {
			if !p.Allowed {
				if !first {
					b = append(b, ',')
				}
				b, first = append(b, names[i]...), false
			}
		}
	} else {
		b = append(b, name...)
	}
	b = append(b, "]}\n"...)
	w.Write(b[start:])
}

// keyPolicies returns the policies of key's limits, for a KeyLimits, and
// their names as structured-field Strings.
func (m *Middleware) keyPolicies(key string) ([]Policy, []string) {
	limits, _ := m.keyed.Limits(key)
	ps := make([]Policy, len(limits))
	names := make([]string, len(limits))
	for i, lim := range limits {
		ps[i] = policyOf(lim)
		names[i] = string(appendString(nil, ps[i].Name))
	}
	return ps, names
}

// pick returns the index of the policy that names the item of a decision
// of quota limit: the first policy of that quota (found), else the first.
func pick(ps []Policy, limit int) (i int, found bool) {
	for i, p := range ps {
		if p.Quota == limit {
			return i, true
		}
	}
	return 0, false
}

// decidesAnyway reports whether a request the limiter failed on follows
// the Decision returned with the error (FailWithDecision), after counting
// the failure and handing it to the Error hook.
func (m *Middleware) decidesAnyway(r *http.Request, err error) bool {
	if m.onLimiter != FailWithDecision {
		return false
	}
	m.limiterErrors.Add(1)
	if m.hooks.Error != nil {
		m.hooks.Error(r, fmt.Errorf("%w: %w", ErrLimiter, err))
	}
	return true
}

// failed applies failure mode mode to a request that could not be
// decided, after counting it (the caller has) and reporting err.
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, next http.Handler, err error, mode FailureMode, status int) {
	if m.hooks.Error != nil {
		m.hooks.Error(r, err)
	}
	if mode == FailOpen {
		next.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h[keyContentType] = []string{problemJSON}
	if status == http.StatusServiceUnavailable {
		h[keyRetryAfter] = []string{"1"}
		w.WriteHeader(status)
		io.WriteString(w, reducedCapacity)
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, noKey)
}

// The problem bodies (RFC 9457): the draft's types, and about:blank.
const (
	problemJSON   = "application/problem+json"
	quotaExceeded = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",` +
		`"title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"`
	reducedCapacity = `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",` +
		`"title":"Request cannot be satisfied due to temporary server capacity constraints","status":503,` +
		`"detail":"The rate limiter could not decide. Retry in 1 second."}` + "\n"
	noKey = `{"type":"about:blank","title":"Bad Request","status":400,` +
		`"detail":"The request carries nothing to rate-limit it by."}` + "\n"
)

// fields gathers a response's header values in a slab's room (see set):
// b[start:] are the values.
type fields struct {
	b     []byte
	start int
	n     int
	keys  [8]field // not the names: a string of f's in h would move b's array to the heap
	ends  [8]int
}

// field indexes fieldKeys.
type field uint8

const (
	fieldLimit field = iota
	fieldRemaining
	fieldReset
	fieldPolicy
	fieldRateLimit
	fieldRetryAfter
	fieldContentType
)

var fieldKeys = [...]string{
	fieldLimit:       keyLimit,
	fieldRemaining:   keyRemaining,
	fieldReset:       keyReset,
	fieldPolicy:      keyPolicy,
	fieldRateLimit:   keyRateLimit,
	fieldRetryAfter:  keyRetryAfter,
	fieldContentType: keyContentType,
}

// add ends the value appended since the last add: it is key's.
func (f *fields) add(key field) {
	f.keys[f.n], f.ends[f.n] = key, len(f.b)
	f.n++
}

// set sets every value in h, each a slice of its own (capacity 1, so that
// an Add later does not write into its neighbour), and gives them to sl
// for good.
func (f *fields) set(h http.Header, sl *slab) {
	if f.n == 0 {
		return
	}
	s, vals := sl.cut(f.b, f.start, f.n)
	start := f.start
	for i := range f.n {
		vals[i] = s[start-f.start : f.ends[i]-f.start]
		start = f.ends[i]
		h[fieldKeys[f.keys[i]]] = vals[i : i+1 : i+1]
	}
}

// A slab hands out header values without an allocation each: the values
// are written into one byte array and cut from it as strings, and the
// slices that hold them are cut from one []string, each array allocated
// once for some forty responses. Two allocations a response cost more
// than the rest of the middleware put together (less the allocating than
// the collections they bring on), and a header value is a few bytes that
// die with its response.
//
// A slab hands out only bytes it holds, and writes only past them; it
// drops an array when it is full rather than reuse it. So a string it
// gave never changes: what unsafe.String requires. The price: a value a
// handler keeps keeps its whole array (4 KiB) alive.
type slab struct {
	b    []byte // b[:len(b)] are handed out; the room past them is free
	vals []string
}

const (
	slabBytes   = 4096
	slabStrings = 256
	// slabRoom is the room a response starts with: a denial's fields and
	// body, with three limits. A response that needs more moves to a new
	// array as it appends; more room would leave more of each array
	// unused.
	slabRoom = 512
)

var slabs = sync.Pool{New: func() any { return new(slab) }}

// room returns sl.b with at least slabRoom bytes of room past it.
func (sl *slab) room() []byte {
	if cap(sl.b)-len(sl.b) < slabRoom {
		sl.b = make([]byte, 0, slabBytes)
	}
	return sl.b
}

// cut takes b[start:], which b appended to sl's room (or to a copy of sl.b
// in a new array, when it ran out of room), as a string, and n strings to
// set.
func (sl *slab) cut(b []byte, start, n int) (string, []string) {
	sl.b = b // handed out
	if cap(sl.vals)-len(sl.vals) < n {
		sl.vals = make([]string, 0, slabStrings)
	}
	k := len(sl.vals)
	sl.vals = sl.vals[:k+n]
	return unsafe.String(unsafe.SliceData(b[start:]), len(b)-start), sl.vals[k : k+n : k+n]
}
