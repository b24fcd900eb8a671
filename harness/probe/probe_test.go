package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// serve starts ratelab serve's server on a free loopback port, deciding
// limit with algorithm a, keyed by the header X-User, and returns its URL.
func serve(t *testing.T, a limiters.Algorithm, limit limiters.Limit) string {
	t.Helper()
	srv, err := server.New(server.Config{Algorithm: a, Limit: limit, KeyHeader: "X-User", Headers: httplimit.AllHeaders})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
		t.Skip("probes six servers, a few seconds each")
	}
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel() // each mostly waits for its schedule
			limit := limiters.Limit{N: 20, Per: time.Second}
			if a.IsBucket() {
				limit.Burst = 10
			}
			c := Config{
				Target:      Target{URL: serve(t, a, limit), Key: Key{Kind: "header", Name: "X-User"}},
				Policy:      limit,
				Seed:        1,
				Timeout:     2 * time.Second,
				MaxRequests: 2000,
			}
			r, err := Run(context.Background(), c, func(s string) { t.Log(s) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %.1fs; fit %+v; concurrency %+v; Retry-After %+v", r.Requests, r.Elapsed, r.Fit, r.Concurrency, r.RetryAfter)
			best := r.Fit[0]
			if family(best.Algorithm) != family(a) || best.Share < 0.99 || best.Limit != limit.String() {
				t.Errorf("fitted %s %s (%.1f%%), want %s %s explaining 99%%", best.Algorithm, best.Limit, 100*best.Share, a, limit)
			}
			if r.Concurrency.OverAdmits() || r.Concurrency.Admitted == 0 || r.Concurrency.Undecided != 0 {
				t.Errorf("concurrency %+v: want at most the quota admitted, and every request decided", r.Concurrency)
			}
			if r.RetryAfter.Verdict != "honest" && r.RetryAfter.Verdict != "longer than needed: admitted at 80% of it" {
				t.Errorf("Retry-After: %+v", r.RetryAfter)
			}
			if r.Undecided != 0 {
				t.Errorf("%d requests undecided", r.Undecided)
			}
		})
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
	srv := httptest.NewServer(&racy{counts: map[string]int{}, n: 10})
	defer srv.Close()
	c := Config{Target: Target{URL: srv.URL, Key: Key{Kind: "header", Name: "X-User"}}, Policy: limiters.PerSecond(10), Seed: 1, Timeout: 2 * time.Second, MaxRequests: 2000}
	r, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit %+v; concurrency %+v", r.Fit[0], r.Concurrency)
	if !r.Concurrency.OverAdmits() {
		t.Errorf("concurrency %+v: the lost updates were not caught", r.Concurrency)
	}
}
