package server

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// metrics are the server's Prometheus metrics, fed by the middleware's
// hooks (the library itself imports nothing for them), on a registry of
// the server's own. No label names a key: keys are unbounded.
type metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	errors    *prometheus.CounterVec
	fallback  prometheus.Counter
	latency   prometheus.Histogram
	// redisFailures is what errors counts of kind limiter, for a reader
	// in the process (RedisFailures).
	redisFailures atomic.Int64
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelab_decisions_total",
			Help: "Requests the limiter decided, by result (allowed or denied; denied in shadow mode too) and tier (empty without tiers).",
		}, []string{"result", "tier"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelab_decision_errors_total",
			Help: "Requests not decided as asked: kind key (no key), cost (a malformed cost) or limiter (Redis did not answer; whatever --fail made of it).",
		}, []string{"kind"}),
		fallback: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelab_fallback_decisions_total",
			Help: "Decisions made in memory while Redis did not decide (--fail fallback).",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ratelab_decision_duration_seconds",
			Help:    "Time the limiter took to decide a request, failures included.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 11), // 1µs to about 1s
		}),
	}
	m.reg.MustRegister(m.decisions, m.errors, m.fallback, m.latency)
	// The process's own, by their usual names (go_goroutines,
	// process_resident_memory_bytes, process_open_fds...): what a long
	// run watches for leaks.
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if l, ok := s.lim.(*redislimit.Limiter); ok {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelab_redis_breaker_open",
			Help: "1 while the circuit breaker in front of Redis is open (decisions fail fast), else 0.",
		}, func() float64 {
			if l.BreakerOpen() {
				return 1
			}
			return 0
		}))
	}
	return m
}

// decided counts a decision for key.
func (m *metrics) decided(s *Server, key, result string) {
	tier := ""
	if s.tiers != nil {
		tier = s.tiers.TierOf(key)
	}
	m.decisions.WithLabelValues(result, tier).Inc()
}

// failed counts err, an error of the middleware's Error hook, when it is
// about the request: a limiter's failure is counted where it happens
// (unavailable).
func (m *metrics) failed(err error) {
	switch {
	case errors.Is(err, httplimit.ErrKey):
		m.errors.WithLabelValues("key").Inc()
	case errors.Is(err, httplimit.ErrCost):
		m.errors.WithLabelValues("cost").Inc()
	}
}

// unavailable counts err, a call Redis did not answer: a decision that
// failed open or closed, or that the fallback made in memory.
func (m *metrics) unavailable(s *Server, err error) {
	m.errors.WithLabelValues("limiter").Inc()
	m.redisFailures.Add(1)
	if s.cfg.Fallback > 0 {
		m.fallback.Inc()
	}
}

func (m *metrics) took(d time.Duration) { m.latency.Observe(d.Seconds()) }

// Metrics is the handler of the server's Prometheus metrics (text
// exposition), for a listener of its own.
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// RedisFailures is how many calls Redis did not answer (down, too slow, or
// the breaker open): the decisions made without it, whatever the failure
// policy made of them. The metric ratelab_decision_errors_total{kind="limiter"}
// counts the same; in memory it stays 0.
func (s *Server) RedisFailures() int64 { return s.metrics.redisFailures.Load() }
