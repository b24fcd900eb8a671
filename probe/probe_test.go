package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// probeSlots is how many probes the tests run at once: three, each beside
// two others, as a busy CI host runs them; every fit must hold so.
var probeSlots = make(chan struct{}, 3)

// probeOf probes target with no policy, as a user who does not know it
// would, three probes at once at most; it logs what the probe said and
// what it found.
func probeOf(t *testing.T, target Target) (*Report, error) {
	t.Helper()
	return probeWithin(t, target, 2*time.Minute)
}

// probeWithin is probeOf within most of time.
func probeWithin(t *testing.T, target Target, most time.Duration) (*Report, error) {
	t.Helper()
	probeSlots <- struct{}{}
	defer func() { <-probeSlots }()
	return probeRun(t, target, most)
}

// looking holds how long a probe of a target (by URL) looks for a second
// limit: none, unless a test stores it.
var looking sync.Map

// alone is held by a probe that takes every slot, so that two such never
// hold some each.
var alone sync.Mutex

// probeChecked probes target as probeWithin does and judges its report
// with check. A probe is a measurement on a shared host, three at once
// on two cores: now and then one misnames a target that its next run
// names (a tie within a busy host's noise, a bucket's quota read with a
// second's refill in it: 3 of 41 probes in one CI run, none of the 3
// again). When the probe fails or check does, what failed is logged, the
// target probed again, alone, on fresh keys, and check judges that
// probe: a probe wrong three times fails the test (the planted httprate
// counter, its phase blurred, missed about one probe in three here, and
// two in a row one run in nine).
func probeChecked(t *testing.T, target Target, most time.Duration, check func(t testing.TB, r *Report)) {
	t.Helper()
	r, err := probeWithin(t, target, most)
	var missed []string
	switch {
	case err != nil:
		missed = []string{err.Error()}
	default:
		missed = failures(t, r, check)
	}
	if len(missed) == 0 {
		return
	}
	var second []string
	for try := 1; try <= 2; try++ {
		last := missed
		if len(second) > 0 {
			last = second
		}
		t.Logf("the probe missed: %s; probing again, alone (%d of 2)", strings.Join(last, "; "), try)
		alone.Lock()
		for range cap(probeSlots) {
			probeSlots <- struct{}{}
		}
		r, err = probeRun(t, target, most)
		for range cap(probeSlots) {
			<-probeSlots
		}
		alone.Unlock()
		if err != nil {
			second = []string{"failed: " + err.Error()}
		} else {
			second = failures(t, r, check)
		}
		again(t, missed, strings.Join(second, "; "))
		if len(second) == 0 {
			return
		}
	}
	for _, s := range second {
		t.Errorf("%s, probed again twice: %s", target.URL, s)
	}
}

// again appends to the file PROBE_AGAIN_LOG names, if any, a line of a
// probe probed again: the test, what its first probe missed, and what the
// second did ("" for nothing). make test-clocked prints it: go test shows
// a passing test's log to no one, and a miss the second probe made good
// is what says how near its budget a fit is on a busy host.
func again(t *testing.T, missed []string, second string) {
	path := os.Getenv("PROBE_AGAIN_LOG")
	if path == "" {
		return
	}
	cut := func(s string) string {
		if len(s) > 300 {
			return strings.ToValidUTF8(s[:300], "") + "…"
		}
		return s
	}
	line := fmt.Sprintf("%s: first missed: %s\n", t.Name(), cut(strings.Join(missed, "; ")))
	if second == "" {
		line += "    probed again: passed\n"
	} else {
		line += "    probed again: MISSED too: " + cut(second) + "\n"
	}
	againMu.Lock()
	defer againMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Error(err)
	}
}

var againMu sync.Mutex

// failures runs check on r and returns what it reported, failing
// nothing.
func failures(t *testing.T, r *Report, check func(t testing.TB, r *Report)) (said []string) {
	k := &keeper{TB: t}
	defer func() {
		if v := recover(); v != nil && v != k {
			panic(v)
		}
		said = k.said
	}()
	check(k, r)
	return k.said
}

// keeper is a testing.TB that keeps what a check reports rather than
// failing the test; its Fatal ends the check alone.
type keeper struct {
	testing.TB
	said []string
}

func (k *keeper) Helper()           {}
func (k *keeper) Fail()             { k.said = append(k.said, "failed") }
func (k *keeper) Failed() bool      { return len(k.said) > 0 }
func (k *keeper) FailNow()          { k.Fail(); panic(k) }
func (k *keeper) Error(args ...any) { k.said = append(k.said, fmt.Sprint(args...)) }
func (k *keeper) Errorf(format string, args ...any) {
	k.said = append(k.said, fmt.Sprintf(format, args...))
}
func (k *keeper) Fatal(args ...any)                 { k.Error(args...); panic(k) }
func (k *keeper) Fatalf(format string, args ...any) { k.Errorf(format, args...); panic(k) }

// probeRun probes target with no policy within most, and logs what the
// probe said and what it found.
func probeRun(t *testing.T, target Target, most time.Duration) (*Report, error) {
	t.Helper()
	c := Config{Target: target, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: most}
	if d, ok := looking.Load(target.URL); ok {
		c.Look = d.(time.Duration)
	}
	began := time.Now()
	r, err := Run(context.Background(), c, func(s string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), s) })
	if r != nil {
		t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, r.Verdict.Text)
		for _, f := range r.Fit {
			t.Logf("  %s %s %v: %.1f%% of %d", f.Algorithm, f.Limit, f.Variants, 100*f.Share, f.Decisions)
		}
		for _, u := range r.Verdict.Unresolved {
			t.Logf("  not told apart: %s", u)
		}
	}
	return r, err
}

// named checks that r names want (a model as its String writes it, the
// bucket as gcra): its family, its quota, its rate within 2% and its
// variants; and that the probe kept within budget, requests and seconds.
func named(t testing.TB, r *Report, want string, budget time.Duration) {
	t.Helper()
	if strings.HasPrefix(want, string(InFlight)+" ") {
		// A limit in flight: its K and its variant, as written.
		if !r.Verdict.Named || r.Verdict.Model != want {
			t.Errorf("named %q (%s), want %s", r.Verdict.Model, r.Verdict.Text, want)
		}
		if r.Requests > 2000 || r.Elapsed > budget.Seconds() {
			t.Errorf("%d requests in %.1fs: want at most 2,000 within %v", r.Requests, r.Elapsed, budget)
		}
		return
	}
	// A bucket with a queue: "gcra 5/s burst 1 queue 10", b at once and
	// q held, a bucket of b+q as decisions go.
	held := 0
	if w, q, ok := strings.Cut(want, " queue "); ok {
		n, err := strconv.Atoi(q)
		if err != nil {
			t.Fatal(err)
		}
		want, held = w, n
	}
	m, err := parseModelString(want)
	if err != nil {
		t.Fatal(err)
	}
	if held > 0 {
		if q := r.Queue; q == nil || q.AtOnce != m.Limit.Burst || q.Held != held || q.Checked == 0 || float64(q.OnSchedule) < 0.9*float64(q.Checked) {
			t.Errorf("queue %+v (%s), want %d at once, %d held, 90%% on schedule", q, r.Verdict.Text, m.Limit.Burst, held)
		}
		m.Limit.Burst += held
	} else if r.Queue != nil {
		t.Errorf("a queue named, %+v (%s): want none", *r.Queue, r.Verdict.Text)
	}
	if !r.Verdict.Named {
		t.Errorf("named nothing (%s), want %s", r.Verdict.Text, want)
		return
	}
	got, err := parseModel(r.Fit[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Family() != m.Family() || got.quota() != m.quota() || differs(got, m) || strings.Join(got.variants(), ", ") != strings.Join(m.variants(), ", ") {
		t.Errorf("named %s, want %s", got, m)
	}
	if r.Requests > 2000 || r.Elapsed > budget.Seconds() {
		t.Errorf("%d requests in %.1fs: want at most 2,000 within %v", r.Requests, r.Elapsed, budget)
	}
}

// parseModelString reads a model as its String writes it.
func parseModelString(s string) (model, error) {
	alg, rest, _ := strings.Cut(s, " ")
	lim, vars, _ := strings.Cut(rest, ", ")
	var variants []string
	if vars != "" {
		variants = strings.Split(vars, ", ")
	}
	return parseModel(Fit{Algorithm: limiters.Algorithm(alg), Limit: lim, Variants: variants})
}

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

var byUser = Key{Kind: "header", Name: "X-User"}

// The probe of ratelab serve, each algorithm in memory and on Redis, with
// no policy given: the fit names the algorithm's family at its limit; no
// more than the quota is admitted of 2N requests at once; the wait a
// refusal advertises is honest or longer than needed (whole seconds); the
// remaining quota it advertises is exact; its fields declare what it
// does.
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
	var wg sync.WaitGroup
	for _, backend := range []string{"memory", "redis"} {
		for _, a := range limiters.Algorithms() {
			cfg := server.Config{Algorithm: a, Limit: limiters.Limit{N: 20, Per: time.Second}, KeyHeader: "X-User", Headers: httplimit.AllHeaders, Backend: backend}
			if a.IsBucket() {
				cfg.Limit.Burst = 10
			}
			if backend == "redis" {
				cfg.Redis, cfg.RedisPrefix = opts, redistest.Prefix(t, client)
			}
			wg.Go(func() { probeServe(t, cfg) })
		}
	}
	wg.Wait()
}

// Limits of the size APIs publish: ratelab serve at 600 a minute, a
// sliding log and a bucket of 10/s burst 600, each declaring its policy,
// named with no --limit within the command's defaults, 2,000 requests and
// 3 minutes (the lean fingerprint), every check the budget leaves no room
// for said as not run.
func TestProbeServeLarge(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for _, cfg := range []server.Config{
		{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 600, Per: time.Minute}},
		{Algorithm: limiters.TokenBucket, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 600}},
	} {
		cfg.KeyHeader, cfg.Headers, cfg.Backend = "X-User", httplimit.AllHeaders, "memory"
		wg.Go(func() {
			url := serveWith(t, cfg)
			if url == "" {
				return
			}
			probeChecked(t, Target{URL: url, Key: byUser}, 3*time.Minute, func(t testing.TB, r *Report) {
				want := model{Algorithm: cfg.Algorithm, Limit: cfg.Limit}
				if want.Algorithm.IsBucket() {
					want.Algorithm = limiters.GCRA
				}
				got, err := parseModel(r.Fit[0])
				if err != nil || !r.Verdict.Named || !r.Calibration.Lean || got.Family() != want.Family() || got.quota() != want.quota() || differs(got, want) || len(got.variants()) != 0 {
					t.Errorf("%s: named %v (%s; lean %v), want %s", cfg.Algorithm, got, r.Verdict.Text, r.Calibration.Lean, want)
				}
				if r.Requests > 2000 || r.Elapsed > 180 {
					t.Errorf("%s: %d requests in %.1fs, want at most 2,000 within 3 minutes", cfg.Algorithm, r.Requests, r.Elapsed)
				}
				if len(r.Skipped) == 0 || !r.Keys.Isolated || r.Remaining.Verdict != "exact" {
					t.Errorf("%s: skipped %q, keys %+v, remaining %+v: want the checks over budget said, keys apart, remaining exact", cfg.Algorithm, r.Skipped, r.Keys, r.Remaining)
				}
			})
		})
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
	name := string(a) + " in " + cfg.Backend
	probeChecked(t, Target{URL: url, Key: byUser}, 2*time.Minute, func(t testing.TB, r *Report) {
		want := model{Algorithm: a, Limit: limit}
		if a.IsBucket() {
			want.Algorithm = limiters.GCRA
		}
		if got, err := parseModel(r.Fit[0]); err != nil || !r.Verdict.Named || got.Family() != want.Family() || got.quota() != want.quota() || differs(got, want) || len(got.variants()) != 0 {
			t.Errorf("%s: named %v (%s), want %s", name, got, r.Verdict.Text, want)
		}
		if r.Requests > 2000 || r.Elapsed > 60 {
			t.Errorf("%s: %d requests in %.1fs, want at most 2,000 within 60s", name, r.Requests, r.Elapsed)
		}
		if r.Concurrency.OverAdmits() || r.Concurrency.Admitted == 0 || r.Concurrency.Undecided != 0 {
			t.Errorf("%s: concurrency %+v: want at most what the policy allows admitted, and every request decided", name, r.Concurrency)
		}
		for _, ra := range r.RetryAfter {
			if !strings.HasPrefix(ra.Verdict, "honest") {
				t.Errorf("%s: Retry-After: %+v", name, ra)
			}
		}
		if r.Remaining.Verdict != "exact" || r.Verdict.Declared != "" || declaredVerdict(r) != "agrees" || len(r.Headers.Malformed) != 0 {
			t.Errorf("%s: remaining %+v, declared %q (%s), malformed %q: want exact, agreeing, none", name, r.Remaining, r.Claims.PolicyText, r.Verdict.Declared, r.Headers.Malformed)
		}
		if r.Undecided != 0 {
			t.Errorf("%s: %d requests undecided", name, r.Undecided)
		}
		// The accuracy of each workload, as the lab judges: the sliding log is
		// exact, the fixed window gives about 2N to the edge attack, a bucket
		// keeps its promise.
		if len(r.Accuracy) != len(workloadOf) {
			t.Errorf("%s: accuracy of %d workloads, want %d: %+v", name, len(r.Accuracy), len(workloadOf), r.Accuracy)
		}
		for _, acc := range r.Accuracy {
			switch {
			case acc.Requests == 0 || acc.Admitted == 0:
				t.Errorf("%s: %+v: nothing decided or admitted", name, acc)
			case a == limiters.SlidingLog && (acc.FalseAllows != 0 || acc.MaxWindowRatio > 1):
				t.Errorf("%s: %+v: want exact", name, acc)
			case a == limiters.FixedWindow && acc.Workload == "boundary-attack" && r.interval() != limit.Interval() && !strings.HasPrefix(acc.Note, "sent again"):
				// The fingerprint was planned for the calibration's guess,
				// not the limit the rounds then named (a spent key of a 1s
				// window came back 100ms on, the burst having been sent at
				// the end of a second): its edges were not this window's,
				// and the attack goes again at the named window's edges.
				t.Errorf("%s: the edge attack was planned for a refill every %v, not %v, and not sent again: %+v", name, r.interval(), limit.Interval(), acc)
			case a == limiters.FixedWindow && acc.Workload == "boundary-attack" && acc.MaxWindowRatio < 1.8:
				t.Errorf("%s: %+v: want about 2N across the edge", name, acc)
			case a.IsBucket() && (acc.MostOverPromise > 1 || acc.FalseAllows > acc.Requests/50):
				// Over its promise is surely over; a false allow, judged on
				// each request's interval, a busy host makes now and then
				// (one of 51, once in six runs of the twelve servers).
				t.Errorf("%s: %+v: a bucket keeps its promise", name, acc)
			}
		}
		if s := r.Strays(Expect{Algorithm: a, Limit: limit, Tolerance: 0.02}); len(s) != 0 {
			t.Errorf("%s: strays from %s: %q", name, limit, s)
		}
		// ratelab serve answers a request without its key 400.
		if !r.Keys.Isolated || r.Keys.Keyless != "refused (400)" {
			t.Errorf("%s: keys %+v: want isolated, and a request without a key refused 400", name, r.Keys)
		}
	})
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
// in two steps: of 2N requests at once, it admits more than N. (Every
// other target of these tests is its counterpart: ok.)
func TestProbeCatchesLostUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	srv := httptest.NewServer(&racy{counts: map[string]int{}, n: 10})
	defer srv.Close()
	probeSlots <- struct{}{}
	defer func() { <-probeSlots }()
	c := Config{Target: Target{URL: srv.URL, Key: byUser}, Policy: limiters.PerSecond(10), Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; concurrency %+v", r.Verdict.Text, r.Concurrency)
	if !r.Concurrency.OverAdmits() {
		t.Errorf("concurrency %+v: the lost updates were not caught", r.Concurrency)
	}
	if !r.Keys.Isolated {
		t.Errorf("keys %+v: want isolated", r.Keys)
	}
}

// A limiter keyed by the client's address, probed with --key source and
// no --source: each user sends from its own loopback address, of those
// the probe picks itself, and the probe finds the policy and the users
// kept apart.
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
	src, chose, err := ParseSources("", url)
	if err != nil || !strings.HasPrefix(chose, "127.0.0.2-127.0.0.254") {
		t.Fatalf("the sources for %s: %q, %v", url, chose, err)
	}
	r, err := probeOf(t, Target{URL: url, Key: Key{Kind: "source"}, Sources: src})
	if err != nil {
		t.Fatal(err)
	}
	named(t, r, "gcra 10/s burst 6", time.Minute)
	if !r.Keys.Isolated || len(src.of) < sourcesNeeded/2 {
		t.Errorf("keys %+v, %d addresses used: want isolated, one address a user", r.Keys, len(src.of))
	}
	// One address, and too few for the probe's users: refused before a
	// request is sent.
	one, chose, err := ParseSources("127.0.0.2", url)
	if err != nil || chose != "" {
		t.Fatalf("--source 127.0.0.2: %q, %v; want it taken as given", chose, err)
	}
	c := Config{Target: Target{URL: url, Key: Key{Kind: "source"}, Sources: one}, Timeout: time.Second, MaxRequests: 10, MaxRate: 10, MaxTime: time.Minute}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--source has 1 addresses") {
		t.Errorf("one source address: %v", err)
	}
	if _, _, err := ParseSources("", "http://192.0.2.1/"); err == nil || !strings.Contains(err.Error(), "not on loopback") {
		t.Errorf("a target off loopback: %v, want --source asked for", err)
	}
	for _, bad := range []string{" ", "127.0.0.9-127.0.0.2", "localhost", "127.0.0.1-::1"} {
		if _, _, err := ParseSources(bad, url); err == nil {
			t.Errorf("--source %q: no error", bad)
		}
	}
}

// Stopped part-way (Ctrl-C), the probe returns what it found with the
// error.
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c := Config{Target: Target{URL: url, Key: byUser}, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: 2 * time.Minute}
	r, err := Run(ctx, c, nil)
	if !errors.Is(err, context.DeadlineExceeded) || r == nil || r.Requests == 0 {
		t.Fatalf("stopped after 3s: %v, %+v: want the error, and what was sent before", err, r)
	}
	t.Logf("stopped after %d requests: calibration %+v", r.Requests, r.Calibration)
}

// ratelab serve keyed by X-API-Key, probed with the wrong header: every
// answer is 400, which is no admission; the probe stops after five and
// says the key is the likely cause, never "all admitted: no limit".
func TestProbeWrongKey(t *testing.T) {
	url := serveWith(t, server.Config{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 20, Per: time.Second}, KeyHeader: "X-API-Key", Headers: httplimit.AllHeaders})
	if url == "" {
		return
	}
	c := Config{Target: Target{URL: url, Key: byUser}, Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000, MaxRate: 1000, MaxTime: time.Minute}
	r, err := Run(context.Background(), c, nil)
	want := "every answer (5) was 400 Bad Request: is the key right (--key header:X-User)?"
	if !errors.Is(err, errNotDeciding) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v; want %q", err, want)
	}
	if r == nil || r.Requests != 5 || len(r.Fit) != 0 {
		t.Errorf("report %+v; want 5 requests and no fit", r)
	}
}

// A check's failures, Fatal's too, are kept by failures and fail nothing;
// a panic of the check's own goes on.
func TestFailuresKept(t *testing.T) {
	said := failures(t, &Report{}, func(t testing.TB, r *Report) {
		t.Errorf("named %d", 1)
		t.Fatal("stops", "here")
		t.Error("never")
	})
	if want := []string{"named 1", "stopshere"}; strings.Join(said, "|") != strings.Join(want, "|") || t.Failed() {
		t.Errorf("kept %q (failed %v), want %q and the test not failed", said, t.Failed(), want)
	}
	if said := failures(t, &Report{}, func(testing.TB, *Report) {}); len(said) != 0 {
		t.Errorf("kept %q of a check that passed", said)
	}
	defer func() {
		if v := recover(); v != "its own" {
			t.Errorf("recovered %v, want the check's own panic", v)
		}
	}()
	failures(t, &Report{}, func(testing.TB, *Report) { panic("its own") })
}

// Two limits at once on one key, probed with no hint but a minute to
// look for a second: ratelab serve's tier of a second's and a minute's
// sliding logs (its RateLimit-Policy declares both); nginx's two zones
// on one location are TestProbeNginx's. Named with both limits, the
// second within 2%.
func TestProbeTwoLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("probes two limits for about 80 seconds")
	}
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "tiers.yaml")
	if err := os.WriteFile(conf, []byte("algorithm: sliding-log\ndefault_tier: both\ntiers:\n  both: [5/s, 40/min]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := serveWith(t, server.Config{File: conf, KeyHeader: "X-User", Headers: httplimit.AllHeaders})
	if url == "" {
		return
	}
	looking.Store(url, time.Minute)
	probeChecked(t, Target{URL: url, Key: byUser}, 3*time.Minute, func(t testing.TB, r *Report) {
		twoNamed(t, r, "sliding-log 5/s", "sliding-log 40/min")
	})
}

// twoNamed checks that r names first (as named does) and beside it the
// second limit, its family, quota within 2% and its rate; and that
// --expect the pair passes.
func twoNamed(t testing.TB, r *Report, first, second string) {
	t.Helper()
	named(t, r, first, 3*time.Minute)
	if r.Longer == nil || r.Longer.Second == "" {
		t.Errorf("second limit: %+v, want %s", r.Longer, second)
		return
	}
	got, err := parseModelString(r.Longer.Second)
	want, err2 := parseModelString(second)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if got.Family() != want.Family() || math.Abs(float64(got.Limit.Quota()-want.Limit.Quota())) > 0.02*float64(want.Limit.Quota()) || differs(got, want) {
		t.Errorf("second limit %s, want %s", got, want)
	}
	e, err := ParseExpect(first+", "+second, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Strays(e); len(s) != 0 {
		t.Errorf("--expect %q: strays %q", e, s)
	}
}
