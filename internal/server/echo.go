package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// Echo is a decision as ratelab writes it in JSON: the body of a served
// request, and a line of ratelab replay (harness.Replay). It holds the key
// and cost the request was decided for and the decision, times in
// seconds. RetryAfter is null when the request could never be admitted
// (its cost is above the limit: shadow mode serves it). Tier is the key's
// tier under a configuration file, absent for a user with an override or
// when the limits are one for every key.
type Echo struct {
	// T is the request's time in a replay, from the trace's start; the
	// server's echo has none.
	T          *float64 `json:"t,omitempty"`
	Key        string   `json:"key"`
	N          int      `json:"n"`
	Allowed    bool     `json:"allowed"`
	Limit      int      `json:"limit"`
	Remaining  int      `json:"remaining"`
	RetryAfter *float64 `json:"retry_after"`
	ResetAfter float64  `json:"reset_after"`
	Tier       string   `json:"tier,omitempty"`
	// DeniedBy is, in a replay that explains, the name of the limit that
	// denied the request.
	DeniedBy string `json:"denied_by,omitempty"`
	// Unmetered is true when the limiter did not decide and its failure
	// policy served the request unmetered (fail open); the decision's
	// fields are then zero (why is the server's log's business, not the
	// client's).
	Unmetered bool `json:"unmetered,omitempty"`
	// Actual is the request's actual cost, for a settle: the one the echo
	// reported (see Config.EchoCost), or the one a replayed trace's line
	// gave; absent when there is none.
	Actual *int `json:"actual,omitempty"`
}

// EchoOf is the echo of d, the decision of a request for key at cost n.
func EchoOf(key string, n int, d limiters.Decision) Echo {
	e := Echo{Key: key, N: n, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter.Seconds()}
	if d.RetryAfter != limiters.Never {
		ra := d.RetryAfter.Seconds()
		e.RetryAfter = &ra
	}
	return e
}

// middlewareOptions are the httplimit options cfg asks for, with hooks
// that hand each decision to the echo.
func (s *Server) middlewareOptions() ([]httplimit.Option, error) {
	c := s.cfg
	var key httplimit.KeyFunc
	var err error
	switch {
	case c.ClientIP && c.KeyHeader != "":
		return nil, errors.New("server: a key header and the client IP: requests are keyed by one")
	case c.ClientIP:
		key, err = httplimit.ClientIP(httplimit.IPConfig{TrustedProxies: c.TrustedProxies})
	case len(c.TrustedProxies) > 0:
		return nil, errors.New("server: trusted proxies are for keying by client IP")
	case c.KeyHeader == "":
		key, err = httplimit.HeaderKey("X-API-Key")
	default:
		key, err = httplimit.HeaderKey(c.KeyHeader)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	opts := []httplimit.Option{
		httplimit.WithKey(keyed(key)),
		httplimit.WithHeaders(c.Headers),
		httplimit.WithHooks(httplimit.Hooks{
			Allowed: func(r *http.Request, key string, d limiters.Decision) {
				decided(r, key, d)
				s.metrics.decided(s, key, "allowed")
			},
			Denied: func(r *http.Request, key string, d limiters.Decision) {
				decided(r, key, d) // in shadow mode, served
				s.metrics.decided(s, key, "denied")
			},
			Error: func(r *http.Request, err error) {
				if sl := slotOf(r); sl != nil {
					sl.err = err
				}
				s.metrics.failed(err)
			},
			Latency: func(_ *http.Request, took time.Duration) { s.metrics.took(took) },
		}),
	}
	if c.Shadow {
		opts = append(opts, httplimit.WithShadow())
	}
	if c.CostHeader != "" {
		cost, err := costHeader(c.CostHeader)
		if err != nil {
			return nil, err
		}
		opts = append(opts, httplimit.WithCost(cost))
	}
	if c.SettleHeader != "" {
		opts = append(opts, httplimit.WithSettle(c.SettleHeader))
	}
	return opts, nil
}

// costHeader prices a request by the header called name: 1 without it.
func costHeader(name string) (httplimit.CostFunc, error) {
	if _, err := httplimit.HeaderKey(name); err != nil { // the same check of the name
		return nil, fmt.Errorf("server: cost header: %w", err)
	}
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (int, error) {
		n := 1
		if v := r.Header.Get(canon); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				return 0, fmt.Errorf("%s %q: want a positive integer", canon, v)
			}
		}
		if sl := slotOf(r); sl != nil {
			sl.n = n
		}
		return n, nil
	}, nil
}

// keyed is key, recording each request's key in its slot for the echo,
// decided or not.
func keyed(key httplimit.KeyFunc) httplimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		k, err := key(r)
		if sl := slotOf(r); sl != nil && err == nil {
			sl.key = k
		}
		return k, err
	}
}

// slot carries a request's decision from the middleware's hooks to the
// echo, through the request's context.
type slot struct {
	key     string
	n       int
	d       limiters.Decision
	decided bool
	err     error
}

type slotKey struct{}

func slotOf(r *http.Request) *slot {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	return sl
}

func decided(r *http.Request, key string, d limiters.Decision) {
	if sl := slotOf(r); sl != nil {
		sl.key, sl.d, sl.decided = key, d, true
	}
}

// ServeHTTP serves r: decided by the limiter, and echoed if served.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sl := &slot{n: 1}
	s.limited.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
}

// echo answers a request the middleware served with its decision.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	sl := slotOf(r)
	e := Echo{Key: sl.key, N: sl.n}
	switch {
	case sl.decided:
		e = EchoOf(sl.key, sl.n, sl.d)
		if s.tiers != nil {
			// The tier now: a reload between the decision and this
			// line may have moved the user.
			e.Tier = s.tiers.TierOf(sl.key)
		}
	case sl.err != nil:
		e.Allowed, e.Unmetered = true, true
		zero := 0.0
		e.RetryAfter = &zero
	}
	if s.cfg.SettleHeader != "" && e.Allowed {
		actual, err := s.actual(r, sl.n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if actual >= 0 {
			e.Actual = &actual
			w.Header().Set(s.cfg.SettleHeader, strconv.Itoa(actual))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(e)
}

// actual is the actual cost the echo reports for r, estimated at n: the
// request's actual=N, else as Config.EchoCost says; -1 for none.
func (s *Server) actual(r *http.Request, n int) (int, error) {
	if v := r.URL.Query().Get("actual"); v != "" {
		a, err := strconv.Atoi(v)
		if err != nil || a < 0 {
			return -1, fmt.Errorf("actual=%q: want a number, 0 or more", v)
		}
		return a, nil
	}
	switch s.cfg.EchoCost {
	case "":
		return -1, nil
	case "random":
		return rand.IntN(2*n + 1), nil
	}
	return strconv.Atoi(s.cfg.EchoCost) // checked by New
}
