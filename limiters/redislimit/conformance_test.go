package redislimit

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/limitertest"
)

func TestConformance(t *testing.T) {
	c := server(t)
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.AtLimiter {
				s := limiters.Spec{Algorithm: a, Window: limiters.Window{Limit: quota, Length: period}}
				if a.IsBucket() {
					s.Bucket = limiters.Bucket{Capacity: quota, Rate: float64(quota) / period.Seconds()}
				}
				l, err := New(c, s, WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, limitertest.Options{})
		})
	}
}
