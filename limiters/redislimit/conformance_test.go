package redislimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/limitertest"
)

func TestConformance(t *testing.T) {
	c := server(t)
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) { conformance(t, c, a) })
	}
}

// TestConformanceBatching is TestConformance with decisions gathered
// into pipelines.
func TestConformanceBatching(t *testing.T) {
	c := server(t)
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			conformance(t, c, a, WithBatching(Batching{Pipelines: 3, MaxBatch: 16}))
		})
	}
}

func conformance(t *testing.T, c *redis.Client, a limiters.Algorithm, opts ...Option) {
	limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.AtLimiter {
		s := limiters.Spec{Algorithm: a, Window: limiters.Window{Limit: quota, Length: period}}
		if a.IsBucket() {
			s.Bucket = limiters.Bucket{Capacity: quota, Rate: float64(quota) / period.Seconds()}
		}
		l, err := New(c, s, append(opts, WithPrefix(prefix(t, c)))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}, limitertest.Options{})
}
