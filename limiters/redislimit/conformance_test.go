package redislimit_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/limitertest"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// TestConformance runs the suite every limiter passes against every
// algorithm on Redis: decisions sent alone, gathered into batches, and
// GCRA's keys packed in hashes.
func TestConformance(t *testing.T) {
	c := server(t)
	for _, tc := range []struct {
		name string
		algs []limiters.Algorithm
		opts []redislimit.Option
	}{
		{"alone", limiters.Algorithms(), nil},
		{"batched", limiters.Algorithms(), []redislimit.Option{redislimit.WithBatching(redislimit.Batching{Pipelines: 3, MaxBatch: 16})}},
		{"packed", []limiters.Algorithm{limiters.GCRA}, []redislimit.Option{redislimit.WithPacking(4)}},
	} {
		for _, a := range tc.algs {
			t.Run(tc.name+"/"+string(a), func(t *testing.T) { conformance(t, c, a, tc.opts...) })
		}
	}
}

// conformance runs the suite on algorithm a, its limiters patient: once,
// 64 goroutines under the race detector beside two other packages' tests
// passed the default 250ms, and the failure mode's admission made a key
// admit 6 of 5.
func conformance(t *testing.T, c *redis.Client, a limiters.Algorithm, opts ...redislimit.Option) {
	limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.Limiter {
		opts := append([]redislimit.Option{patient, redislimit.WithPrefix(prefix(t, c))}, opts...)
		l, err := redislimit.New(c, a, []limiters.Limit{{N: quota, Per: period}}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, limitertest.Options{})
}
