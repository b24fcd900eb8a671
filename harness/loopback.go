package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// keyHeader carries the user's key to the server.
const keyHeader = "X-User"

// A loopback is ratelab serve's server for a subject, in this process on a
// free loopback port, and vegeta attacks of it at a rate over one
// transport, kept for its runs: each run has an attacker of its own, since
// vegeta's cannot be reused. The http and outage modes attack one.
type loopback struct {
	srv    *server.Server
	url    string // the server's root: http://127.0.0.1:port/
	served chan error
	rate   float64
	tr     *http.Transport
	client *http.Client
}

// serveLoopback serves cfg's server, keyed by keyHeader and sending every
// rate-limit header field, on a free loopback port, and warms it up for
// attacks at rate lasting d: an attack of warmUp(d) on a key of its own,
// which no measured request shares, opens the connections the attacks
// then use (otherwise the first run's tail is their set-up).
func serveLoopback(ctx context.Context, cfg server.Config, rate float64, d time.Duration) (*loopback, error) {
	cfg.KeyHeader, cfg.Headers = keyHeader, httplimit.AllHeaders
	srv, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("harness: %w", err)
	}
	tr := &http.Transport{DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext, MaxIdleConnsPerHost: 256}
	lb := &loopback{srv: srv, url: "http://" + ln.Addr().String() + "/", served: make(chan error, 1),
		rate: rate, tr: tr, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
	go func() { lb.served <- srv.Serve(ln) }()
	warm := vegeta.Target{Method: http.MethodGet, URL: lb.url, Header: http.Header{keyHeader: []string{"warm-up"}}}
	lb.run(ctx, vegeta.NewStaticTargeter(warm), warmUp(d), "warm-up", func(*vegeta.Result) {})
	return lb, nil
}

// warmUp is how long an attack of d warms up: a tenth of it, at least
// 50ms and at most 200ms.
func warmUp(d time.Duration) time.Duration {
	return min(max(d/10, 50*time.Millisecond), 200*time.Millisecond)
}

// run attacks tg for d, handing each result to each, and stops early when
// ctx is done.
func (lb *loopback) run(ctx context.Context, tg vegeta.Targeter, d time.Duration, name string, each func(*vegeta.Result)) {
	at := vegeta.NewAttacker(vegeta.Client(lb.client), vegeta.Workers(64), vegeta.MaxWorkers(1024), vegeta.MaxBody(0))
	defer at.Stop()
	for res := range at.Attack(tg, vegeta.Rate{Freq: int(lb.rate), Per: time.Second}, d, name) {
		each(res)
		if ctx.Err() != nil {
			at.Stop()
		}
	}
}

// close closes the attacks' connections, and the server at once rather
// than wait for them: every answer is in by then.
func (lb *loopback) close() {
	lb.tr.CloseIdleConnections()
	lb.srv.Close()
	<-lb.served
}
