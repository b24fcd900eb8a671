package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redistest"
	"github.com/redis/go-redis/v9"
)

// serve starts ratelab serve's server on a free loopback port, deciding
// limit with algorithm a, keyed by the header X-User, and returns its URL,
// or "" with an error reported (it runs on goroutines of its own).
func serve(t *testing.T, a limiters.Algorithm, limit limiters.Limit) string {
	t.Helper()
	return serveWith(t, server.Config{Algorithm: a, Limit: limit, KeyHeader: "X-User", Headers: httplimit.AllHeaders})
}

// serveWith is serve with the server's whole configuration.
func serveWith(t *testing.T, cfg server.Config) string {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Error(err)
		return ""
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Error(err)
		return ""
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return "http://" + ln.Addr().String() + "/"
}

// The probe of ratelab serve, for each algorithm at its declared policy:
// the fit names the algorithm's family, at the declared limit, explaining
// at least 99% of the decisions; no more than the quota is admitted of
// 2N requests at once; and the wait a refusal advertises is honest.
func TestProbeServe(t *testing.T) {
	if testing.Short() {
		t.Skip("probes twelve servers, a few seconds each")
	}
	t.Parallel()
	// On Redis too: the server's decisions then come from Redis's clock
	// and scripts, a round trip away. Each server has a key prefix of its
	// own, made here (the helpers stop the test on failure, which only
	// the test's own goroutine may do).
	opts := &redis.Options{Addr: redistest.Require(t)}
	client := redistest.Client(t, nil)
	// Two at a time, each on a server of its own: a probe mostly waits
	// for its schedule (six seconds of it). Six at once, under the race
	// detector on a busy host, widened the requests' intervals until the
	// windows' fits fell to 92-98% (a host that busy is a poor place to
	// probe from, and the probe's numbers say so).
	var wg sync.WaitGroup
	slots := make(chan struct{}, 2)
	for _, backend := range []string{"memory", "redis"} {
		for _, a := range limiters.Algorithms() {
			cfg := server.Config{Algorithm: a, Limit: limiters.Limit{N: 20, Per: time.Second}, KeyHeader: "X-User", Headers: httplimit.AllHeaders, Backend: backend}
			if a.IsBucket() {
				cfg.Limit.Burst = 10
			}
			if backend == "redis" {
				cfg.Redis, cfg.RedisPrefix = opts, redistest.Prefix(t, client)
			}
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				probeServe(t, cfg)
			})
		}
	}
	wg.Wait()
}

// probeServe is TestProbeServe for one server; it reports with t.Errorf,
// which any goroutine may call.
func probeServe(t *testing.T, cfg server.Config) {
	a, limit := cfg.Algorithm, cfg.Limit
	url := serveWith(t, cfg)
	if url == "" {
		return
	}
	c := Config{
		Target:      Target{URL: url, Key: Key{Kind: "header", Name: "X-User"}},
		Policy:      limit,
		Seed:        1,
		Timeout:     2 * time.Second,
		MaxRequests: 2000,
		MaxRate:     1000,
		MaxTime:     2 * time.Minute,
	}
	name := string(a) + " in " + cfg.Backend
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	t.Logf("%s: %d requests in %.1fs; fit %+v; concurrency %+v; Retry-After %+v", name, r.Requests, r.Elapsed, r.Fit, r.Concurrency, r.RetryAfter)
	best := r.Fit[0]
	if family(best.Algorithm) != family(a) || best.Share < 0.99 || best.Limit != limit.String() {
		t.Errorf("%s: fitted %s %s (%.1f%%), want %s %s explaining 99%%", name, best.Algorithm, best.Limit, 100*best.Share, a, limit)
	}
	if r.Concurrency.OverAdmits() || r.Concurrency.Admitted == 0 || r.Concurrency.Undecided != 0 {
		t.Errorf("%s: concurrency %+v: want at most what the policy allows admitted, and every request decided", name, r.Concurrency)
	}
	for _, ra := range r.RetryAfter {
		if ra.Verdict != "honest" && ra.Verdict != "longer than needed: admitted at 80% of it" {
			t.Errorf("%s: Retry-After: %+v", name, ra)
		}
	}
	if r.Undecided != 0 {
		t.Errorf("%s: %d requests undecided", name, r.Undecided)
	}
	// The accuracy of each workload, as the lab judges: the sliding log is
	// exact, the fixed window gives about 2N to the edge attack, and no
	// algorithm strays from what it is expected to do.
	if len(r.Accuracy) != len(workloadOf) {
		t.Errorf("%s: accuracy of %d workloads, want %d: %+v", name, len(r.Accuracy), len(workloadOf), r.Accuracy)
	}
	for _, acc := range r.Accuracy {
		switch {
		case acc.Requests == 0 || acc.Admitted == 0:
			t.Errorf("%s: %+v: nothing decided or admitted", name, acc)
		case a == limiters.SlidingLog && (acc.FalseAllows != 0 || acc.MaxWindowRatio > 1):
			t.Errorf("%s: %+v: want exact", name, acc)
		case a == limiters.FixedWindow && acc.Workload == "boundary-attack" && acc.MaxWindowRatio < 1.8:
			t.Errorf("%s: %+v: want about 2N across the edge", name, acc)
		}
	}
	if s := r.Strays(Expect{Algorithm: a, Limit: limit, Tolerance: 0.02}); len(s) != 0 {
		t.Errorf("%s: strays from %s: %q", name, limit, s)
	}
	// ratelab serve answers a request without its key 400.
	if !r.Keys.Isolated || r.Keys.Keyless != "refused (400)" {
		t.Errorf("%s: keys %+v: want isolated, and a request without a key refused 400", name, r.Keys)
	}
}

// racy is a planted bug: a fixed window that reads its count, waits, and
// then writes it back, in two steps, as a limiter over a remote store
// without a script or a transaction does.
type racy struct {
	mu     sync.Mutex
	counts map[string]int
	n      int
}

func (h *racy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("X-User") + "/" + strconv.FormatInt(time.Now().Unix(), 10)
	h.mu.Lock()
	c := h.counts[key] // read
	h.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // the round trip between the two steps
	if c >= h.n {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	h.mu.Lock()
	h.counts[key] = c + 1 // write
	h.mu.Unlock()
}

// The concurrency check catches a limiter that reads and writes its store
// in two steps: of 2N requests at once, it admits more than N.
func TestProbeCatchesLostUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	srv := httptest.NewServer(&racy{counts: map[string]int{}, n: 10})
	defer srv.Close()
	c := Config{Target: Target{URL: srv.URL, Key: Key{Kind: "header", Name: "X-User"}}, Policy: limiters.PerSecond(10), Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit %+v; concurrency %+v", r.Fit[0], r.Concurrency)
	if !r.Concurrency.OverAdmits() {
		t.Errorf("concurrency %+v: the lost updates were not caught", r.Concurrency)
	}
	// Its keys are its users' (the keyless share the empty key, whose
	// burst at once the same lost updates let through).
	if !r.Keys.Isolated {
		t.Errorf("keys %+v: want isolated", r.Keys)
	}
}

// A target whose declaration is off: GCRA at 10 a second with a burst of
// one (nginx's limit_req with no burst), declared as 10/s. The fit finds
// the burst of one from what the fingerprint saw.
func TestProbeFindsTheBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	limit := limiters.Limit{N: 10, Per: time.Second, Burst: 1}
	url := serve(t, limiters.GCRA, limit)
	if url == "" {
		return
	}
	c := Config{Target: Target{URL: url, Key: Key{Kind: "header", Name: "X-User"}}, Policy: limiters.PerSecond(10), Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit %+v", r.Fit)
	if best := r.Fit[0]; !best.Algorithm.IsBucket() || best.Limit != limit.String() || best.Share < 0.99 {
		t.Errorf("fitted %s %s (%.1f%%), want the bucket policy at %s", best.Algorithm, best.Limit, 100*best.Share, limit)
	}
}

// With no policy declared, the probe calibrates: from the target's fields
// when it sends them, else by measuring, and then fits the right family
// at the right limit, within 60 seconds and 2,000 requests (the budget
// it says first). A window too long to settle says what it found.
func TestProbeCalibrates(t *testing.T) {
	if testing.Short() {
		t.Skip("probes servers for up to 25 seconds")
	}
	t.Parallel()
	for _, tt := range []struct {
		a       limiters.Algorithm
		limit   limiters.Limit
		headers httplimit.Headers
		from    string
	}{
		{limiters.GCRA, limiters.Limit{N: 10, Per: time.Second, Burst: 6}, httplimit.NoHeaders, "measured"},
		{limiters.FixedWindow, limiters.Limit{N: 20, Per: 2 * time.Second}, httplimit.NoHeaders, "measured"},
		{limiters.SlidingLog, limiters.Limit{N: 20, Per: time.Second}, httplimit.AllHeaders, "RateLimit-Policy"},
		{limiters.SlidingLog, limiters.Limit{N: 5, Per: time.Hour}, httplimit.NoHeaders, ""},
	} {
		t.Run(string(tt.a)+"/"+tt.from, func(t *testing.T) {
			t.Parallel()
			url := serveWith(t, server.Config{Algorithm: tt.a, Limit: tt.limit, KeyHeader: "X-User", Headers: tt.headers})
			if url == "" {
				return
			}
			c := Config{Target: Target{URL: url, Key: Key{Kind: "header", Name: "X-User"}}, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
			r, err := Run(context.Background(), c, nil)
			if tt.from == "" {
				if err == nil || !strings.Contains(err.Error(), "a quota of 5 at once") || !strings.Contains(err.Error(), "longer than the probe can settle") {
					t.Errorf("a window of an hour: %v, want it said unsettled with the quota found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %.1fs; calibration %+v; fit %+v", r.Requests, r.Elapsed, r.Calibration, r.Fit[0])
			if r.Calibration.From != tt.from || r.Requests > 2000 || r.Elapsed > 60 {
				t.Errorf("calibrated from %q in %d requests and %.1fs: want from %q within 2,000 and 60s", r.Calibration.From, r.Requests, r.Elapsed, tt.from)
			}
			if best := r.Fit[0]; family(best.Algorithm) != family(tt.a) || best.Limit != tt.limit.String() || best.Share < 0.99 {
				t.Errorf("fitted %s %s (%.1f%%), want %s %s", best.Algorithm, best.Limit, 100*best.Share, tt.a, tt.limit)
			}
		})
	}
}

// A limiter keyed by the client's address, probed with --key source: each
// user sends from its own loopback address, and the probe fits the policy
// and finds the users kept apart.
func TestProbeBySource(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	limit := limiters.Limit{N: 10, Per: time.Second, Burst: 6}
	url := serveWith(t, server.Config{Algorithm: limiters.GCRA, Limit: limit, ClientIP: true, Headers: httplimit.AllHeaders})
	if url == "" {
		return
	}
	src, err := ParseSources("127.0.0.2-127.0.0.40")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Target: Target{URL: url, Key: Key{Kind: "source"}, Sources: src}, Policy: limit, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit %+v; keys %+v", r.Fit[0], r.Keys)
	if best := r.Fit[0]; !best.Algorithm.IsBucket() || best.Limit != limit.String() || best.Share < 0.99 {
		t.Errorf("fitted %s %s (%.1f%%), want the bucket policy at %s", best.Algorithm, best.Limit, 100*best.Share, limit)
	}
	if !r.Keys.Isolated || len(src.of) != sourcesNeeded-1 {
		t.Errorf("keys %+v, %d addresses used: want isolated, one address a user", r.Keys, len(src.of))
	}
	// One address, and too few for the probe's users: refused before a
	// request is sent.
	one, err := ParseSources("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	c.Target.Sources = one
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--source has 1 addresses") {
		t.Errorf("one source address: %v", err)
	}
	for _, bad := range []string{"", "127.0.0.9-127.0.0.2", "localhost", "127.0.0.1-::1"} {
		if _, err := ParseSources(bad); err == nil {
			t.Errorf("--source %q: no error", bad)
		}
	}
}

// liar is a planted bug: a fixed window of n a second whose refusals say
// Retry-After: 0, less than the wait they need.
type liar struct {
	mu     sync.Mutex
	counts map[string]int
	n      int
}

func (h *liar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("X-User") + "/" + strconv.FormatInt(time.Now().Unix(), 10)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[key] >= h.n {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	h.counts[key]++
}

// The Retry-After check catches a refusal that advertises less than the
// wait it needs, and --expect names it.
func TestProbeCatchesALyingRetryAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for about 9 seconds")
	}
	t.Parallel()
	srv := httptest.NewServer(&liar{counts: map[string]int{}, n: 10})
	defer srv.Close()
	policy := limiters.PerSecond(10)
	c := Config{Target: Target{URL: srv.URL, Key: Key{Kind: "header", Name: "X-User"}}, Policy: policy, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit %+v; Retry-After %+v", r.Fit[0], r.RetryAfter)
	if ra := r.RetryAfter[0]; !ra.Lies() || ra.Header != "Retry-After" || ra.Advertised != 0 {
		t.Errorf("Retry-After %+v: the lie was not caught", ra)
	}
	if s := strings.Join(r.Strays(Expect{Algorithm: limiters.FixedWindow, Limit: policy, Tolerance: 0.02}), "\n"); !strings.Contains(s, "Retry-After: lies") {
		t.Errorf("strays %q: want the Retry-After named", s)
	}
}

// Stopped part-way through the fingerprint (Ctrl-C), the probe judges what
// was answered and returns that with the error.
func TestProbeStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	limit := limiters.Limit{N: 20, Per: time.Second}
	url := serve(t, limiters.SlidingLog, limit)
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	c := Config{Target: Target{URL: url, Key: Key{Kind: "header", Name: "X-User"}}, Policy: limit, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(ctx, c, nil)
	if !errors.Is(err, context.DeadlineExceeded) || r == nil || len(r.Fit) == 0 || r.Fit[0].Decisions == 0 || r.Fit[0].Decisions >= 418 {
		t.Fatalf("stopped after 4s: %v, %+v: want the error, and a fit of part of the 418 decisions", err, r)
	}
	t.Logf("stopped: fit %+v", r.Fit[0])
	if r.Fit[0].Algorithm != limiters.SlidingLog || r.Fit[0].Share < 0.99 {
		t.Errorf("fit %+v of what was answered: want the sliding log", r.Fit[0])
	}
}
