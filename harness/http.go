package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// httpConfig is how the http mode attacks: at Rate requests a second for
// Time, each run.
type httpConfig struct {
	Rate float64
	Time time.Duration
}

func (h httpConfig) defaults(quick bool) httpConfig {
	set(&h.Rate, 10_000)
	set(&h.Time, pick(quick, time.Second, 150*time.Millisecond))
	return h
}

// flags declares the http mode's settings on fs.
func (h *httpConfig) flags(fs *flag.FlagSet) {
	fs.Float64Var(&h.Rate, "http-rate", h.Rate, "the rate vegeta attacks the server at in the http runs, per second (default 10000)")
	fs.DurationVar(&h.Time, "http-time", h.Time, "how long each http run lasts (default 1s, quick 150ms)")
}

func (h httpConfig) validate() error {
	if !(h.Rate > 0 && h.Rate <= 1e6) || h.Time <= 0 {
		return fmt.Errorf("harness: the http runs take a rate from 0 to 1,000,000 a second and a positive time, got %v and %v", h.Rate, h.Time)
	}
	return nil
}

// httpMode puts each subject that can live in ratelab serve's server
// behind it, on loopback, and attacks it with vegeta: the 200s and 429s
// against what the limit admits, and the latency end to end.
const httpModeName = "http"

var httpMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:  httpModeName,
			About: "over HTTP: ratelab serve on loopback attacked by vegeta, its 200s and 429s against the ideal's, and latency end to end",
			Order: 50,
		},
		Heading: "Over HTTP",
		Tables: []report.TableSpec{{
			Name:  "http",
			Title: "Over HTTP: ratelab serve on loopback, attacked by vegeta",
			Note: "The server of ratelab serve (package server: the middleware, limiters/httplimit, in front of a tiny JSON handler) runs in the lab's process on a loopback port, " +
				"each algorithm in memory; vegeta sends the workload's users in turn at the offered rate, the key in a header, after a warm-up on a key of its own that opens the connections (a tenth of the run). " +
				"The limit's window is scaled so that each key is asked for the workload's multiple of its limit. " +
				"Ideal 200s: the same requests, at the times vegeta sent them, through the same algorithm in memory; the server decides when it reads them, a little later. " +
				"Offered: 80% of the rate this machine sustains, found first (the knee: runs from 1,000 a second, doubling up to the rate asked, until vegeta sends under 95% of it or the median latency passes twice the first's and a millisecond), " +
				"so that the latency is the server's, not a queue's. " +
				"Sent: the requests a second vegeta achieved; BEHIND when under 95% of the offered rate, QUEUED when the median latency passed the knee's bound: that row's latency is a queue's, and not comparable. Latency runs from send to the end of the response.",
			Header: []string{"workload", "limiter", "offered, sent", "200", "429", "ideal 200s", "other", "errors", "p50", "p99", "max"},
			Left:   2,
			Cells: func(r results.Row) []string {
				l, _ := r.LatencyOf(results.Latency)
				sent := report.Rate(r.Get(results.Throughput))
				offered := r.SettingFloat(results.Offered)
				if v, ok := r.Value(runRate); ok {
					offered = v
				}
				switch q, _ := r.Value(queuedAbove); {
				case r.Get(achieved) < 0.95:
					sent += " BEHIND"
				case q > 0 && l.P50 > q:
					sent += " QUEUED"
				}
				return []string{
					r.Workload, r.Limiter, report.Rate(offered) + "\n" + sent,
					results.Count(r.Count(answeredOK)), results.Count(r.Count(answeredLimited)), results.Count(r.Count(idealOK)),
					results.Count(r.Count(answeredOther)), results.Count(r.Count(unanswered)),
					report.Nanos(l.P50), report.Nanos(l.P99), report.Nanos(l.Max),
				}
			},
		}},
	},
	steps: func(c Config, subjects []Subject) int {
		n := 0
		for _, s := range subjects {
			if s.Serve {
				n += 2
			}
		}
		return n
	},
	measure: measureHTTP,
	flags:   func(c *Config, fs *flag.FlagSet) { c.HTTP.flags(fs) },
}

// The metrics of an http row: its answers (200, 429, another status, and
// none at all), and how many the limit admits.
const (
	answeredOK      = "ok"
	answeredLimited = "limited"
	answeredOther   = "other"
	unanswered      = "errors"
	idealOK         = "ideal_ok"
)

func measureHTTP(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	if l.httpRate == 0 {
		l.p.step(fmt.Sprintf("the rate this machine sustains over HTTP, up to %s/s", strconv.FormatFloat(l.c.HTTP.Rate, 'f', -1, 64)), 0)
		rate, queued, err := knee(ctx, l.c.HTTP, w)
		if err != nil {
			return nil, fmt.Errorf("harness: the http mode's knee: %w", err)
		}
		l.httpRate, l.httpQueued = rate, queued
	}
	var out []results.Row
	for _, s := range subjects {
		if !s.Serve || s.OwnLimits != "" {
			continue // only a limit the server can decide
		}
		l.p.step(fmt.Sprintf("%s on %s over HTTP, %s/s", s.Name, w.Name, strconv.FormatFloat(l.httpRate, 'f', -1, 64)), 2)
		h := httpAttack{Algorithm: s.Algorithm, Limit: pacedLimit(l.c.Limit, w, l.httpRate), Workload: w, Rate: l.httpRate, Duration: l.c.HTTP.Time}
		res, err := h.Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("harness: %s on %s over HTTP: %w", s.Name, w.Name, err)
		}
		r := httpResult(row(s, w.Name, httpModeName), h, res)
		// The rate asked is the row's setting, as before the knee: the
		// rate run at depends on the machine, and is a measurement.
		r.SetFloat(results.Offered, l.c.HTTP.Rate)
		r.Add(runRate, results.UnitPerS, l.httpRate)
		r.Add(queuedAbove, results.UnitNS, l.httpQueued)
		out = append(out, r)
	}
	return out, nil
}

// runRate is the rate an http row was run at, below the knee,
// queuedAbove the median latency above which its requests waited in a
// queue (the knee's bound), and scaledWindow the limit's window at that
// rate: metrics of its rows.
const (
	runRate      = "run_rate"
	queuedAbove  = "queued_above"
	scaledWindow = "window"
)

// kneeMargin is how far below the knee the http runs go: a step of the
// knee keeps pace, and a run at its rate, twice as long, sometimes not.
const kneeMargin = 0.8

// knee finds the rate the sender and the server sustain on this machine,
// up to h.Rate: attacks as long as a run, at 1,000 a second and doubling,
// on a limit that admits everything, until vegeta sends under 95% of the
// rate asked or the median latency passes queued: twice the first's and a
// millisecond (the requests wait in a queue, and a latency measured there
// is the queue's). The runs go at kneeMargin of the last rate that kept
// pace (h.Rate, at most; and not under 1,000 a second, or h.Rate when
// that is less), and a run whose median passes queued is marked.
func knee(ctx context.Context, h httpConfig, w *workloads.Workload) (rate, queued float64, err error) {
	open := limiters.Limit{N: 1_000_000, Per: time.Second} // admits all
	floor := min(1000, h.Rate)
	best := 0.0
	for r := floor; ; r = min(2*r, h.Rate) {
		res, err := httpAttack{Algorithm: limiters.GCRA, Limit: open, Workload: w, Rate: r, Duration: h.Time}.Run(ctx)
		if err != nil {
			return 0, 0, err
		}
		if queued == 0 {
			queued = max(2*res.LatencyNS.P50, res.LatencyNS.P50+float64(time.Millisecond))
		}
		if !res.KeptPace() || res.LatencyNS.P50 > queued {
			break
		}
		best = r
		if r == h.Rate {
			break
		}
	}
	return max(math.Round(kneeMargin*best), floor), queued, nil
}

// httpResult is base with what an HTTP attack measured.
func httpResult(base results.Row, h httpAttack, res httpOutcome) results.Row {
	r := base
	r.SetFloat(results.Offered, h.Rate)
	// The limit's window, scaled to the rate run at (which the knee
	// sets, machine by machine): a measurement, not the row's identity.
	r.Add(scaledWindow, results.UnitSeconds, h.Limit.Per.Seconds())
	r.Add(results.Decisions, results.UnitCount, float64(res.Requests))
	r.Add(results.Throughput, results.UnitPerS, res.Achieved) // the table's "sent" beside "offered" says when vegeta fell behind
	r.SetLatency(results.Latency, res.LatencyNS)
	r.Add(achieved, results.UnitFraction, res.Achieved/h.Rate)
	if res.Requests > 0 {
		r.Add(admitted, results.UnitFraction, float64(res.OK)/float64(res.Requests))
	}
	for _, m := range []struct {
		name string
		n    int
	}{{answeredOK, res.OK}, {answeredLimited, res.Limited}, {answeredOther, res.Other}, {unanswered, res.Errors}, {idealOK, res.Ideal}} {
		r.Add(m.name, results.UnitCount, float64(m.n))
	}
	if res.FirstError != "" {
		r.Note = fmt.Sprintf("%s on %s: %d requests unanswered, the first with %q.", r.Limiter, r.Workload, res.Errors, res.FirstError)
	}
	return r
}

// httpAttack is one run of the lab's HTTP mode: a `ratelab serve` server
// (package server, in this process, on a free loopback port) deciding
// Limit with Algorithm, attacked by vegeta at Rate requests a second for
// Duration, each request for the next user of the workload's arrivals, in
// turn.
type httpAttack struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	Workload  *workloads.Workload
	Rate      float64
	Duration  time.Duration
}

// httpOutcome is what an httpAttack measured.
type httpOutcome struct {
	// Requests were sent; OK were answered 200, Limited 429, Other any
	// other status, and Errors not answered at all.
	Requests, OK, Limited, Other, Errors int
	// Ideal is how many of the requests the limit admits, decided by the
	// same algorithm in memory at the times vegeta sent them: the server
	// decides at the times it reads them, a little later, so a few may
	// differ near the edge of a window.
	Ideal int
	// Offered and Achieved are the requests a second asked for and sent:
	// vegeta sends fewer when its workers cannot keep up.
	Offered, Achieved float64
	// LatencyNS is the end-to-end latency of the answered requests.
	LatencyNS results.Quantiles
	// FirstError is one of the errors, if any.
	FirstError string
}

// KeptPace reports whether vegeta sent at least 95% of the offered rate.
func (r httpOutcome) KeptPace() bool { return r.Achieved >= 0.95*r.Offered }

// Run attacks a fresh server on loopback (serveLoopback), warmed up, and
// stops it.
func (h httpAttack) Run(ctx context.Context) (httpOutcome, error) {
	switch {
	case h.Rate <= 0 || h.Duration <= 0:
		return httpOutcome{}, fmt.Errorf("harness: an HTTP attack needs a rate and a duration, got %v/s for %v", h.Rate, h.Duration)
	case h.Workload == nil || len(h.Workload.Arrivals) == 0:
		return httpOutcome{}, errors.New("harness: an HTTP attack needs a workload with requests")
	}
	lb, err := serveLoopback(ctx, server.Config{Algorithm: h.Algorithm, Limit: h.Limit}, h.Rate, h.Duration)
	if err != nil {
		return httpOutcome{}, err
	}
	defer lb.close()

	// Each request's key is in its URL too, where vegeta's Result keeps
	// it, so that the ideal can replay the requests as sent.
	base := lb.url + "?u="
	// The keys, made before the attack: Workload.Key is not for
	// concurrent use, and vegeta's workers call the targeter at once.
	keys := make([]string, int(h.Rate*h.Duration.Seconds())+1)
	for i := range keys {
		keys[i] = h.Workload.Key(h.Workload.Arrivals[i%len(h.Workload.Arrivals)].User)
	}
	var next atomic.Int64
	targeter := func(t *vegeta.Target) error {
		key := keys[int((next.Add(1)-1)%int64(len(keys)))]
		t.Method = http.MethodGet
		t.URL = base + url.QueryEscape(key)
		t.Header = http.Header{keyHeader: []string{key}}
		return nil
	}
	var results []vegeta.Result
	var m vegeta.Metrics
	lb.run(ctx, targeter, h.Duration, "ratelab", func(res *vegeta.Result) {
		m.Add(res)
		results = append(results, *res)
	})
	m.Close()
	if err := ctx.Err(); err != nil {
		return httpOutcome{}, err
	}

	r := tally(results)
	r.Offered, r.Achieved = h.Rate, m.Rate
	if r.Ideal, err = ideal(h.Algorithm, h.Limit, results); err != nil {
		return httpOutcome{}, err
	}
	return r, nil
}

// tally counts the answers to an attack's requests, and their latency.
func tally(results []vegeta.Result) httpOutcome {
	r := httpOutcome{Requests: len(results)}
	var lat []time.Duration
	for _, res := range results {
		switch {
		case res.Error != "" && res.Code == 0:
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = res.Error
			}
			continue
		case res.Code == http.StatusOK:
			r.OK++
		case res.Code == http.StatusTooManyRequests:
			r.Limited++
		default:
			r.Other++
		}
		lat = append(lat, res.Latency)
	}
	r.LatencyNS = latencyOf(lat)
	return r
}

// ideal decides the requests of results, in the order they were sent, at
// the times they were sent, with the algorithm in memory, and counts
// those admitted.
func ideal(a limiters.Algorithm, limit limiters.Limit, results []vegeta.Result) (int, error) {
	l, err := composite.New(a, []limiters.Limit{limit}, limiters.WithSweepInterval(-1))
	if err != nil {
		return 0, fmt.Errorf("harness: %w", err)
	}
	defer l.Close()
	slices.SortStableFunc(results, func(a, b vegeta.Result) int { return a.Timestamp.Compare(b.Timestamp) })
	admitted := 0
	for _, res := range results {
		u, err := url.Parse(res.URL)
		if err != nil {
			return 0, fmt.Errorf("harness: vegeta's result has URL %q: %w", res.URL, err)
		}
		if d, _ := l.Decide(context.Background(), limiters.Request{Key: u.Query().Get("u"), N: 1, At: res.Timestamp}); d.Allowed {
			admitted++
		}
	}
	return admitted, nil
}

// latencyOf returns the quantiles of d in nanoseconds (d sorted in place).
func latencyOf(d []time.Duration) results.Quantiles {
	if len(d) == 0 {
		return results.Quantiles{}
	}
	slices.Sort(d)
	q := func(p float64) float64 { return float64(d[min(len(d)-1, int(p*float64(len(d))))]) }
	return results.Quantiles{P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: float64(d[len(d)-1])}
}

// String is the result in one line, for progress and tests.
func (r httpOutcome) String() string {
	pace := "kept pace"
	if !r.KeptPace() {
		pace = "fell behind: the workers could not keep up"
	}
	return fmt.Sprintf("%d requests at %s/s of %s/s offered (%s): %d 200, %d 429 (the limit admits %d), %d other, %d errors; p50 %v, p99 %v",
		r.Requests, strconv.FormatFloat(r.Achieved, 'f', 0, 64), strconv.FormatFloat(r.Offered, 'f', 0, 64), pace,
		r.OK, r.Limited, r.Ideal, r.Other, r.Errors, time.Duration(r.LatencyNS.P50), time.Duration(r.LatencyNS.P99))
}
