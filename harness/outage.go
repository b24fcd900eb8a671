package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redistest"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// OutageConfig is how the outage mode runs: Users users, each asking for
// twice its limit per Window, attack ratelab serve's server at Rate
// requests a second for Before, while its Redis is away for Away, and for
// After once it is back; Fleet is the fleet size the fallback declares (it
// decides at the limit divided by it, rounded up).
type OutageConfig struct {
	Rate                float64
	Users               int
	Window              time.Duration
	Fleet               int
	Before, Away, After time.Duration
}

func (o OutageConfig) defaults(quick bool) OutageConfig {
	set(&o.Rate, 2000)
	set(&o.Users, 25)
	// Windows short against the run, so that the quotas the keys start
	// with are spent long before Redis goes away.
	set(&o.Window, 100*time.Millisecond)
	set(&o.Fleet, 2)
	set(&o.Before, pick(quick, time.Second, 500*time.Millisecond))
	// Not a whole number of the server's breaker cool-downs (1s): Redis
	// comes back between two of its probes, not with one.
	set(&o.Away, pick(quick, 2500*time.Millisecond, 1500*time.Millisecond))
	set(&o.After, pick(quick, 2*time.Second, 1500*time.Millisecond))
	return o
}

func (o OutageConfig) validate() error {
	if !(o.Rate > 0 && o.Rate <= 20_000) || o.Users < 1 || o.Fleet < 1 || o.Window <= 0 || o.Before <= 0 || o.Away <= 0 || o.After <= 0 {
		return fmt.Errorf("harness: an outage run takes a rate from 0 to 20,000 a second, positive users, fleet and window, and positive times before, away and after; got %v/s, %d, %d, %v, %v, %v, %v",
			o.Rate, o.Users, o.Fleet, o.Window, o.Before, o.Away, o.After)
	}
	return o.limit().Validate(limiters.GCRA)
}

// limit is the limit of each user: half of what it asks for in a window.
func (o OutageConfig) limit() limiters.Limit {
	return limiters.Limit{N: max(int(o.Rate*o.Window.Seconds()/float64(o.Users)/2+0.5), 1), Per: o.Window}
}

// The ways the outage mode takes a server away (see redistest.Proxy).
var (
	OutageRefused    = redistest.Refused.String()
	OutageUnanswered = redistest.Unanswered.String()
)

// The failure modes of ratelab serve the outage mode runs in turn.
var outageFailures = []string{"open", "closed", "fallback"}

// outageBin is how finely the outage runs count answers over time.
const outageBin = 100 * time.Millisecond

// outageMode serves each subject that can be kept in a server the lab can
// take away (Subject.Outage) from ratelab serve's server, attacks it with
// vegeta at a steady rate, and takes the server away mid-run and gives it
// back: for each way of taking it away and each failure mode, the answers
// over time, the latency before, during and after, and how long the
// server took to decide again once back.
type outageMode struct{}

func (outageMode) name() string { return ModeOutage }
func (outageMode) once() bool   { return true }

func (outageMode) steps(c Config, subjects []Subject) int {
	n := 0
	for _, s := range subjects {
		if s.Outage != nil {
			n += 2 * len(outageFailures)
		}
	}
	return n
}

func (outageMode) measure(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	var out []results.Run
	for _, s := range subjects {
		if s.Outage == nil {
			continue
		}
		for _, kind := range []string{OutageRefused, OutageUnanswered} {
			for _, fail := range outageFailures {
				if why := s.failed(); why != "" {
					return append(out, skipped(s, ModeOutage, ModeOutage, why)), nil
				}
				l.p.step(fmt.Sprintf("%s over HTTP, its server %s for %v, failing %s", s.Name, kind, l.c.Outage.Away, fail), 1)
				r, err := l.outage(ctx, s, kind, fail)
				if err != nil {
					return nil, fmt.Errorf("harness: %s, its server %s, failing %s: %w", s.Name, kind, fail, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// fault is the proxy's fault of an outage of kind.
func fault(kind string) redistest.Fault {
	if kind == OutageRefused {
		return redistest.Refused
	}
	return redistest.Unanswered
}

// outage runs s with its server taken away as kind says, failing as fail
// says.
func (l *lab) outage(ctx context.Context, s Subject, kind, fail string) (results.Run, error) {
	oc := l.c.Outage
	limit := oc.limit()
	cfg, done, err := s.Outage(limit)
	if err != nil {
		return results.Run{}, err
	}
	defer done()
	if cfg.Redis == nil {
		return results.Run{}, errors.New("the subject names no Redis server")
	}
	cut, err := redistest.NewProxy(cfg.Redis.Addr)
	if err != nil {
		return results.Run{}, err
	}
	defer cut.Close()
	opt := *cfg.Redis
	opt.Addr = cut.Addr()
	cfg.Redis = &opt
	switch fail {
	case "closed":
		cfg.FailClosed = true
	case "fallback":
		cfg.Fallback = oc.Fleet
	}
	cfg.KeyHeader, cfg.Headers = keyHeader, httplimit.AllHeaders
	srv, err := server.New(cfg)
	if err != nil {
		return results.Run{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return results.Run{}, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-served
	}()

	base := "http://" + ln.Addr().String() + "/"
	keys := make([]string, oc.Users)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	var mu sync.Mutex
	next := 0
	targeter := func(t *vegeta.Target) error {
		mu.Lock()
		key := keys[next%len(keys)]
		next++
		mu.Unlock()
		t.Method, t.URL, t.Header = http.MethodGet, base, http.Header{keyHeader: []string{key}}
		return nil
	}
	a := newLoopbackAttack(oc.Rate)
	defer a.close()
	warm := vegeta.Target{Method: http.MethodGet, URL: base, Header: http.Header{keyHeader: []string{"warm-up"}}}
	a.run(ctx, vegeta.NewStaticTargeter(warm), warmUp(oc.Before), "warm-up", func(*vegeta.Result) {})

	total := oc.Before + oc.Away + oc.After
	var sent []vegeta.Result
	begin := time.Now()
	failures := scrapeFailures(srv.Metrics(), begin)
	away := time.AfterFunc(oc.Before, func() { cut.Set(fault(kind)) })
	back := time.AfterFunc(oc.Before+oc.Away, func() { cut.Set(redistest.Pass) })
	defer away.Stop()
	defer back.Stop()
	a.run(ctx, vegeta.Targeter(targeter), total, "outage", func(res *vegeta.Result) { sent = append(sent, *res) })
	if err := ctx.Err(); err != nil {
		return results.Run{}, err
	}
	failed, err := failures()
	if err != nil {
		return results.Run{}, err
	}
	cutAt, backAt := cut.Times()
	if cutAt.IsZero() || backAt.IsZero() {
		return results.Run{}, errors.New("the attack ended before the server was taken away and given back")
	}
	r := run(s, ModeOutage, ModeOutage)
	o := outageOf(sent, failed, begin, cutAt, backAt, total)
	o.Kind, o.Failure, o.Rate, o.Users = kind, fail, oc.Rate, oc.Users
	o.Limit, o.Window = limit.N, results.Seconds(limit.Per.Seconds())
	if fail == "fallback" {
		o.Fleet = oc.Fleet
	}
	r.Outage, r.Decisions, r.OfferedRate = &o, int64(len(sent)), oc.Rate
	return r, nil
}

// outageOf counts the answers to sent, in bins of outageBin from begin,
// and before cutAt, from cutAt to backAt, and after; and the failed
// decisions of the server, and when the last came.
func outageOf(sent []vegeta.Result, failed []failure, begin, cutAt, backAt time.Time, total time.Duration) results.Outage {
	o := results.Outage{Bin: results.Seconds(outageBin.Seconds()), Away: results.Seconds(cutAt.Sub(begin).Seconds()),
		Back: results.Seconds(backAt.Sub(begin).Seconds())}
	o.Bins = make([]results.Answers, int((total+outageBin-1)/outageBin))
	o.Failed = make([]int64, len(o.Bins))
	for i, f := range failed {
		if i > 0 && f.n != failed[i-1].n {
			o.Failed[min(max(int(f.at/outageBin), 0), len(o.Bins)-1)] += f.n - failed[i-1].n
		}
	}
	o.Recovery = recovery(failed, begin, backAt)
	var lat [3][]time.Duration
	for _, res := range sent {
		span := &o.Before
		i := 0
		switch {
		case res.Timestamp.Before(cutAt):
		case res.Timestamp.Before(backAt):
			span, i = &o.During, 1
		default:
			span, i = &o.After, 2
		}
		bin := &o.Bins[min(max(int(res.Timestamp.Sub(begin)/outageBin), 0), len(o.Bins)-1)]
		for _, a := range []*results.Answers{&span.Answers, bin} {
			a.Count(res.Code, res.Error)
		}
		if res.Code != 0 {
			lat[i] = append(lat[i], res.Latency)
		}
	}
	o.Before.LatencyNS, o.During.LatencyNS, o.After.LatencyNS = latencyOf(lat[0]), latencyOf(lat[1]), latencyOf(lat[2])
	return o
}

// recovery is how long after backAt the server's decisions stopped failing:
// the last failure before the first outageBin with none (0 if none came
// after backAt); nil if decisions were failing until the end. A failure
// after that quiet stretch (a decision that timed out on a busy machine)
// is not the outage's.
func recovery(failed []failure, begin, backAt time.Time) *results.Seconds {
	last := backAt
	for i := 1; i < len(failed); i++ {
		at := begin.Add(failed[i].at)
		if !at.After(backAt) {
			continue
		}
		if failed[i].n != failed[i-1].n {
			last = at
		} else if at.Sub(last) >= outageBin {
			rec := results.Seconds(last.Sub(backAt).Seconds())
			return &rec
		}
	}
	return nil
}

// A failure is how many decisions the server had failed at a time from the
// run's start.
type failure struct {
	at time.Duration
	n  int64
}

// failureScrape is how often the outage runs read the server's metrics.
const failureScrape = 10 * time.Millisecond

// scrapeFailures reads the failed decisions off the server's metrics (the
// Prometheus exposition of ratelab serve, read in the process) every
// failureScrape from now until the function it returns is called, which
// returns them.
func scrapeFailures(metrics http.Handler, begin time.Time) func() ([]failure, error) {
	stop := make(chan struct{})
	done := make(chan error, 1)
	var out []failure
	read := func() error {
		rec := httptest.NewRecorder()
		metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		n, err := failedDecisions(rec.Body.String())
		out = append(out, failure{time.Since(begin), n})
		return err
	}
	go func() {
		t := time.NewTicker(failureScrape)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- read()
				return
			case <-t.C:
				if err := read(); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	return func() ([]failure, error) {
		close(stop)
		err := <-done
		return out, err
	}
}

// failedDecisions reads ratelab_decision_errors_total{kind="limiter"}
// from a Prometheus text exposition: 0 if it is not there (no decision
// has failed yet).
func failedDecisions(exposition string) (int64, error) {
	const name = `ratelab_decision_errors_total{kind="limiter"} `
	for line := range strings.Lines(exposition) {
		if v, ok := strings.CutPrefix(line, name); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("the server's metrics: %q: %w", line, err)
			}
			return int64(f), nil
		}
	}
	return 0, nil
}

// loopbackAttack sends vegeta attacks at a rate over one transport, kept
// for its runs: each run has an attacker of its own, since vegeta's
// cannot be reused.
type loopbackAttack struct {
	rate   float64
	tr     *http.Transport
	client *http.Client
}

func newLoopbackAttack(rate float64) *loopbackAttack {
	tr := &http.Transport{DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext, MaxIdleConnsPerHost: 256}
	return &loopbackAttack{rate: rate, tr: tr, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

// run attacks tg for d, handing each result to each, and stops early when
// ctx is done.
func (a *loopbackAttack) run(ctx context.Context, tg vegeta.Targeter, d time.Duration, name string, each func(*vegeta.Result)) {
	at := vegeta.NewAttacker(vegeta.Client(a.client), vegeta.Workers(64), vegeta.MaxWorkers(1024), vegeta.MaxBody(0))
	defer at.Stop()
	for res := range at.Attack(tg, vegeta.Rate{Freq: int(a.rate), Per: time.Second}, d, name) {
		each(res)
		if ctx.Err() != nil {
			at.Stop()
		}
	}
}

func (a *loopbackAttack) close() { a.tr.CloseIdleConnections() }
