package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// TestDenyThenAllow: through a real server on loopback, a key is served
// until its quota is spent, denied with 429 and Retry-After, and served
// again once Retry-After has passed. The limits run on a clock the test
// moves.
func TestDenyThenAllow(t *testing.T) {
	clk := newClock()
	s := start(t, server.Config{
		Algorithm: limiters.TokenBucket, Limit: bucket(2, 0.5),
		Headers: httplimit.AllHeaders,
		Clock:   clk,
	})
	for i, want := range []int{200, 200, 429} {
		if got := s.get(t, "alice"); got.status != want {
			t.Fatalf("request %d: status %d, want %d: %s", i+1, got.status, want, got.body)
		}
	}
	denied := s.get(t, "alice")
	if denied.status != http.StatusTooManyRequests {
		t.Fatalf("request 4: status %d, want 429", denied.status)
	}
	if ct := denied.header.Get("Content-Type"); ct != "application/problem+json" || !strings.Contains(string(denied.body), "quota-exceeded") {
		t.Errorf("429: Content-Type %q, body %s: want httplimit's quota-exceeded problem", ct, denied.body)
	}
	retry, err := strconv.Atoi(denied.header.Get("Retry-After"))
	if err != nil || retry != 2 { // one token at 0.5/s
		t.Fatalf("Retry-After %q, want 2", denied.header.Get("Retry-After"))
	}
	if got := s.get(t, "bob"); got.status != 200 {
		t.Errorf("bob: status %d, want 200: alice's quota is hers", got.status)
	}
	clk.Add(time.Duration(retry)*time.Second - time.Nanosecond)
	if got := s.get(t, "alice"); got.status != 429 {
		t.Errorf("a nanosecond before Retry-After: status %d, want 429", got.status)
	}
	clk.Add(time.Nanosecond)
	if got := s.get(t, "alice"); got.status != 200 || got.echo.Remaining != 0 {
		t.Errorf("at Retry-After: status %d, remaining %d, want 200 and 0", got.status, got.echo.Remaining)
	}
}

// TestEcho checks the echo against the decision of an identical limiter
// on the same clock, and against the header fields.
func TestEcho(t *testing.T) {
	clk := newClock()
	limit := limiters.Limit{N: 10, Per: 1500 * time.Millisecond}
	s := start(t, server.Config{Algorithm: limiters.SlidingLog, Limit: limit, Headers: httplimit.AllHeaders, Clock: clk, CostHeader: "X-Cost"})
	twin, err := composite.New(limiters.SlidingLog, []limiters.Limit{limit}, limiters.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer twin.Close()
	for step, cost := range []int{1, 3, 1, 4, 1} {
		clk.Add(100 * time.Millisecond)
		got := s.get(t, "alice", "X-Cost", strconv.Itoa(cost))
		want, _ := twin.Decide(t.Context(), limiters.Request{Key: "alice", N: cost, At: clk.Now()})
		e := got.echo
		if got.status != 200 {
			t.Fatalf("step %d: status %d, want 200", step, got.status)
		}
		if e.Key != "alice" || e.N != cost || e.Allowed != want.Allowed || e.Limit != want.Limit || e.Remaining != want.Remaining ||
			e.RetryAfter == nil || *e.RetryAfter != want.RetryAfter.Seconds() || e.ResetAfter != want.ResetAfter.Seconds() || e.Tier != "" {
			t.Errorf("step %d: echo %s, want the decision %+v for alice, cost %d", step, got.body, want, cost)
		}
		for field, v := range map[string]int{
			httplimit.HeaderLimit:     e.Limit,
			httplimit.HeaderRemaining: e.Remaining,
			httplimit.HeaderReset:     int(math.Ceil(e.ResetAfter)),
		} {
			if h := got.header.Get(field); h != strconv.Itoa(v) {
				t.Errorf("step %d: %s: %q, want %d as the echo says", step, field, h, v)
			}
		}
		// The one limit is named after its rate, as it was written.
		if h, w := got.header.Get(httplimit.HeaderRateLimit), fmt.Sprintf(`"10/1500ms";r=%d;t=%d`, e.Remaining, int(math.Ceil(e.ResetAfter))); h != w {
			t.Errorf("step %d: RateLimit %q, want %q", step, h, w)
		}
	}
	if got := s.get(t, "alice"); got.status != http.StatusTooManyRequests {
		t.Errorf("the quota spent (1+3+1+4+1 = 10): status %d, want 429", got.status)
	}
	// A malformed cost is not a missing key: the answer says which.
	if got := s.get(t, "alice", "X-Cost", "zero"); got.status != http.StatusBadRequest ||
		!strings.Contains(string(got.body), "cost") || !strings.Contains(string(got.body), `X-Cost \"zero\"`) || strings.Contains(string(got.body), "nothing to rate-limit") {
		t.Errorf("a malformed cost: status %d, body %s; want 400 saying the cost X-Cost \"zero\" is wrong", got.status, got.body)
	}
	if got := s.get(t, ""); got.status != http.StatusBadRequest || !strings.Contains(string(got.body), "nothing to rate-limit it by") {
		t.Errorf("no key: status %d, body %s; want 400 saying there is nothing to rate-limit it by", got.status, got.body)
	}
}

// TestShadow: shadow mode serves what it would deny, and says so.
func TestShadow(t *testing.T) {
	s := start(t, server.Config{
		Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 1, Per: time.Hour},
		Shadow: true, Clock: newClock(),
	})
	s.get(t, "alice")
	got := s.get(t, "alice")
	if got.status != 200 || got.echo.Allowed || got.echo.RetryAfter == nil || *got.echo.RetryAfter <= 0 {
		t.Errorf("shadow, over the limit: status %d, echo %s: want 200, allowed false, a retry time", got.status, got.body)
	}
	if got := s.get(t, "alice", "X-API-Key", "alice"); len(got.header[http.CanonicalHeaderKey(httplimit.HeaderLimit)]) != 0 {
		t.Errorf("Headers zero: sent %v, want no rate-limit fields", got.header)
	}
	if n := s.Stats().ShadowDenied; n != 2 {
		t.Errorf("Stats().ShadowDenied = %d, want 2", n)
	}
}

// A request no wait admits (its cost above the limit), served in shadow
// mode, echoes retry_after null, not a time.
func TestShadowNever(t *testing.T) {
	s := start(t, server.Config{
		Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 1, Per: time.Hour},
		Shadow: true, Clock: newClock(), CostHeader: "X-Cost",
	})
	got := s.get(t, "alice", "X-Cost", "5")
	if got.status != 200 || got.echo.Allowed || got.echo.RetryAfter != nil || !strings.Contains(string(got.body), `"retry_after":null`) {
		t.Errorf("shadow, cost 5 of a limit of 1: status %d, echo %s: want 200, allowed false, retry_after null", got.status, got.body)
	}
}

// An echo in JSON: the server's (no time), and a replay's line (a time,
// the limit that denied, an actual cost), each field in its place; a
// request no wait admits has retry_after null.
func TestEchoJSON(t *testing.T) {
	d := limiters.Decision{Limit: 10, RetryAfter: 1500 * time.Millisecond, ResetAfter: 3 * time.Second}
	at, actual := 2.5, 4
	replay := server.EchoOf("alice", 2, d)
	replay.T, replay.Tier, replay.DeniedBy, replay.Actual = &at, "free", "per-minute", &actual
	never := server.EchoOf("bob", 11, limiters.Decision{Limit: 10, RetryAfter: limiters.Never})
	never.Unmetered = true
	for _, c := range []struct {
		e    server.Echo
		want string
	}{
		{server.EchoOf("alice", 2, d), `{"key":"alice","n":2,"allowed":false,"limit":10,"remaining":0,"retry_after":1.5,"reset_after":3}`},
		{replay, `{"t":2.5,"key":"alice","n":2,"allowed":false,"limit":10,"remaining":0,"retry_after":1.5,"reset_after":3,"tier":"free","denied_by":"per-minute","actual":4}`},
		{never, `{"key":"bob","n":11,"allowed":false,"limit":10,"remaining":0,"retry_after":null,"reset_after":0,"unmetered":true}`},
	} {
		if got, err := json.Marshal(c.e); err != nil || string(got) != c.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", c.e, got, err, c.want)
		}
	}
}

const tiered = `algorithm: sliding-log
default_tier: free
tiers:
  free: [2/min]
  premium: [5/min]
users:
  alice: premium
`

// TestTiers: two users in different tiers see their own tier's limits.
func TestTiers(t *testing.T) {
	s := start(t, server.Config{File: writeFile(t, "", tiered), Headers: httplimit.AllHeaders, Clock: newClock()})
	for _, tt := range []struct {
		user, tier, policy string
		limit              int
	}{
		{"alice", "premium", `"5/min";q=5;w=60`, 5},
		{"bob", "free", `"2/min";q=2;w=60`, 2},
	} {
		got := s.get(t, tt.user)
		if got.echo.Tier != tt.tier || got.echo.Limit != tt.limit || got.echo.Remaining != tt.limit-1 {
			t.Errorf("%s: echo %s, want tier %s, limit %d, remaining %d", tt.user, got.body, tt.tier, tt.limit, tt.limit-1)
		}
		if p := got.header.Get(httplimit.HeaderRateLimitPolicy); p != tt.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", tt.user, p, tt.policy)
		}
	}
}

// TestReload: a reload puts a new file in force, keeping the quotas of a
// tier that did not change; an invalid file leaves the old one in force
// and the error names its line.
func TestReload(t *testing.T) {
	path := writeFile(t, "", tiered)
	s := start(t, server.Config{File: path, Clock: newClock()})
	testReload(t, s, path)
}

func testReload(t *testing.T, s *running, path string) {
	t.Helper()
	remaining := func(user string, want int, when string) {
		t.Helper()
		got := s.get(t, user)
		if got.status != 200 || got.echo.Remaining != want {
			t.Errorf("%s, %s: status %d, echo %s; want remaining %d", when, user, got.status, got.body, want)
		}
	}
	remaining("alice", 4, "before")
	remaining("bob", 1, "before")

	writeFile(t, path, strings.Replace(tiered, "free: [2/min]", "free: [3/min]", 1))
	if line := s.reloadBySignal(t); line != "reloaded "+path+"\n" {
		t.Fatalf("SIGHUP: logged %q, want a reload", line)
	}
	remaining("alice", 3, "after a reload that kept premium") // her quota stays
	remaining("bob", 2, "after a reload that changed free")   // a new quota of 3

	writeFile(t, path, strings.Replace(tiered, "premium: [5/min]", "premium: [5/mni]", 1))
	err := s.Reload()
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), path+":5: tiers.premium[0]:") {
		t.Fatalf("Reload of an invalid file: %v, want a *config.Error naming %s:5", err, path)
	}
	if line := s.reloadBySignal(t); !strings.Contains(line, "the configuration in force stays") || !strings.Contains(line, path+":5:") {
		t.Errorf("SIGHUP with an invalid file: logged %q, want the error with its line", line)
	}
	remaining("alice", 2, "after an invalid reload")
	remaining("bob", 1, "after an invalid reload")

	writeFile(t, path, strings.Replace(tiered, "algorithm: sliding-log", "algorithm: sliding-log\nbackend: elsewhere", 1))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), path+":2: backend:") {
		t.Errorf("Reload naming an unknown backend: %v, want an error naming line 2", err)
	}
	remaining("alice", 1, "after another invalid reload")
}

func TestReloadWithoutFile(t *testing.T) {
	s := start(t, server.Config{Algorithm: limiters.GCRA, Limit: bucket(1, 1)})
	if err := s.Reload(); err == nil {
		t.Error("Reload without a file: no error")
	}
}

func TestNewErrors(t *testing.T) {
	// one is a Config of one limit, with what f sets.
	one := func(f func(*server.Config)) server.Config {
		c := server.Config{Algorithm: limiters.GCRA, Limit: limiters.PerSecond(1)}
		f(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no limits", server.Config{}, "server: "},
		{"both", one(func(c *server.Config) { c.File = "x.yaml" }), "one or the other"},
		{"bad file", server.Config{File: writeFile(t, "", "algorithm: gcra\ntiers: {free: [1/s]}\ndefault_tier: paid\n")}, ":3: default_tier:"},
		{"backend against the file", server.Config{File: writeFile(t, "", tiered), Backend: "redis"}, "but"},
		{"unknown backend", one(func(c *server.Config) { c.Backend = "etcd" }), `backend "etcd"`},
		{"bad proxy", one(func(c *server.Config) { c.ClientIP = true; c.TrustedProxies = []string{"10.0.0.0/33"} }), "trusted proxy"},
		{"proxies without ip", one(func(c *server.Config) { c.TrustedProxies = []string{"10.0.0.0/8"} }), "client IP"},
		{"bad key header", one(func(c *server.Config) { c.KeyHeader = "X Key" }), "not a header name"},
		{"bad cost header", one(func(c *server.Config) { c.CostHeader = "X:Cost" }), "cost header"},
		{"echo cost without a settle header", one(func(c *server.Config) { c.EchoCost = "3" }), "set SettleHeader"},
		{"bad echo cost", one(func(c *server.Config) { c.SettleHeader = "X-Tokens"; c.EchoCost = "-3" }), `echo cost "-3"`},
		{"bad settle header", one(func(c *server.Config) { c.SettleHeader = "X Tokens" }), "WithSettle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := server.New(tt.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("New: no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want it to contain %q", err, tt.want)
			}
		})
	}
	_, err := server.New(one(func(c *server.Config) { c.Backend = "redis"; c.Redis = &redis.Options{Addr: "127.0.0.1:1"} }))
	if !errors.Is(err, server.ErrNoRedis) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("New with Redis down: %v, want ErrNoRedis naming the address", err)
	}
}

// TestClientIP keys by the peer's address; a forged X-Forwarded-For from
// an untrusted peer changes nothing.
func TestClientIP(t *testing.T) {
	s := start(t, server.Config{
		Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 5, Per: time.Hour},
		ClientIP: true, TrustedProxies: []string{"10.0.0.0/8"}, Clock: newClock(),
	})
	if got := s.get(t, "", "X-Forwarded-For", "203.0.113.9"); got.echo.Key != "127.0.0.1" || got.echo.Remaining != 4 {
		t.Errorf("echo %s, want key 127.0.0.1 (the forged header ignored), remaining 4", got.body)
	}
}

// TestShutdownFinishesInFlight: Shutdown stops accepting connections but
// lets a request in flight finish, and Run returns cleanly.
func TestShutdownFinishesInFlight(t *testing.T) {
	s, err := server.New(server.Config{Algorithm: limiters.GCRA, Limit: bucket(5, 1)})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	s.SetNext(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.Write([]byte("finished"))
	}))
	ln, err := netListen(t)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, ln, nil) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Header.Set("X-API-Key", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		_, err = copyAll(b, resp)
		got <- result{resp.StatusCode, b.String(), err}
	}()
	<-entered
	cancel() // as SIGTERM would
	// The listener closes while the request is still running.
	for {
		c, err := netDial(addr)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-ran:
		t.Fatalf("Run returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	if r := <-got; r.err != nil || r.status != 200 || r.body != "finished" {
		t.Errorf("the request in flight: status %d, body %q, error %v; want 200 finished", r.status, r.body, r.err)
	}
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestShutdownBound: a request that does not finish within the bound is
// cut off, and Shutdown says so.
func TestShutdownBound(t *testing.T) {
	s, err := server.New(server.Config{Algorithm: limiters.GCRA, Limit: bucket(5, 1)})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s.SetNext(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	ln, err := netListen(t)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("X-API-Key", "alice")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the bound has passed
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a request stuck: %v, want context.Canceled", err)
	}
}

// The Prometheus metrics count what the middleware decided, by result,
// the requests it could not key, and the time decisions took.
func TestMetrics(t *testing.T) {
	r := start(t, server.Config{Algorithm: limiters.GCRA, Limit: bucket(3, 0.001)})
	for range 5 {
		r.get(t, "alice")
	}
	r.get(t, "")
	w := httptest.NewRecorder()
	r.Metrics().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`ratelab_decisions_total{result="allowed",tier=""} 3`,
		`ratelab_decisions_total{result="denied",tier=""} 2`,
		`ratelab_decision_errors_total{kind="key"} 1`,
		`ratelab_decision_duration_seconds_count 5`,
		`ratelab_fallback_decisions_total 0`,
		"\ngo_goroutines ", "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the metrics lack %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "alice") {
		t.Error("a metric names a key")
	}
	if n := r.RedisFailures(); n != 0 {
		t.Errorf("in memory: RedisFailures() = %d, want 0", n)
	}
}

// A served request is settled at the cost the echo reports: the next
// response's headers show the refund or the debt; a fixed echo cost
// settles every request at it; a malformed one asked for is a 400 that
// leaves the estimate charged.
func TestSettle(t *testing.T) {
	clk := newClock()
	spec := server.Config{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 1000}}
	with := func(f func(*server.Config)) server.Config { c := spec; f(&c); return c }
	s := start(t, with(func(c *server.Config) {
		c.Clock = clk
		c.CostHeader = "X-Estimate"
		c.SettleHeader = "X-Tokens"
		c.Headers = httplimit.AllHeaders
	}))
	getAt := func(path, estimate string) reply {
		t.Helper()
		req, err := http.NewRequest("GET", s.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", "alice")
		req.Header.Set("X-Estimate", estimate)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		rep := reply{status: resp.StatusCode, header: resp.Header, body: body}
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &rep.echo); err != nil {
				t.Fatal(err)
			}
		}
		return rep
	}
	r := getAt("/v1/chat?actual=120", "500")
	if r.status != 200 || r.header.Get("X-Tokens") != "120" || r.echo.Actual == nil || *r.echo.Actual != 120 || r.header.Get("X-RateLimit-Remaining") != "500" {
		t.Fatalf("reserved 500, reported 120: %d %v %+v", r.status, r.header, r.echo)
	}
	if r := getAt("/", "1"); r.header.Get("X-RateLimit-Remaining") != "879" || r.echo.Actual != nil {
		t.Errorf("after a settle at 120: %v remaining, actual %v; want 879, none", r.header.Get("X-RateLimit-Remaining"), r.echo.Actual)
	}
	getAt("/?actual=1500", "100") // 1,400 past the estimate: debt
	if r := getAt("/", "1"); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "63" {
		t.Errorf("in debt: %d, Retry-After %q; want 429 and 63", r.status, r.header.Get("Retry-After"))
	}
	clk.Add(70 * time.Second)
	if r := getAt("/?actual=lots", "5"); r.status != http.StatusBadRequest {
		t.Errorf("actual=lots: %d, want 400", r.status)
	}
	if r := getAt("/", "1"); r.header.Get("X-RateLimit-Remaining") != "73" {
		t.Errorf("after a 400 that reported nothing: %s remaining, want 73 (the estimate of 5 kept; 78 without it)", r.header.Get("X-RateLimit-Remaining"))
	}

	fixed := start(t, with(func(c *server.Config) {
		c.Clock = newClock()
		c.CostHeader = "X-Estimate"
		c.SettleHeader = "X-Tokens"
		c.EchoCost = "2"
		c.Headers = httplimit.AllHeaders
	}))
	s = fixed
	getAt("/", "300")
	if r := getAt("/", "1"); r.header.Get("X-RateLimit-Remaining") != "997" || r.echo.Actual == nil || *r.echo.Actual != 2 {
		t.Errorf("an echo cost of 2: %s remaining, actual %v; want 997 and 2", r.header.Get("X-RateLimit-Remaining"), r.echo.Actual)
	}
}

// TestMaxKeys: a flood of new keys, one a request, as an attacker sends
// them. Under a cap the limiter forgets the key closest to a full quota
// to make room, and that key's next request starts fresh; without one,
// every key is kept and the spent key stays refused.
func TestMaxKeys(t *testing.T) {
	for _, capped := range []bool{true, false} {
		cfg := server.Config{Algorithm: limiters.SlidingLog, Limit: limiters.PerHour(1)}
		if capped {
			cfg.MaxKeys = 64
		}
		s, err := server.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		status := func(key string) int {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-API-Key", key)
			s.ServeHTTP(w, r)
			return w.Code
		}
		if a, b := status("victim"), status("victim"); a != 200 || b != 429 {
			t.Fatalf("fixture: victim answered %d then %d, want 200 then 429", a, b)
		}
		forgotten := 0
		for i := 0; i < 5000 && forgotten == 0; i++ {
			if got := status(fmt.Sprint("flood-", i)); got != 200 {
				t.Fatalf("flood key %d: %d, want 200 (a new key)", i, got)
			}
			if i%100 == 99 && status("victim") == 200 {
				forgotten = i + 1
			}
		}
		s.Close()
		switch {
		case capped && forgotten == 0:
			t.Errorf("a cap of 64: victim still refused after 5,000 new keys")
		case !capped && forgotten != 0:
			t.Errorf("no cap: victim forgotten after %d new keys", forgotten)
		}
		t.Logf("capped %v: victim admitted again after %d new keys", capped, forgotten)
	}
}
