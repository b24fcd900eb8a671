package leakybucket_test

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/leakybucket"
	"github.com/ratelab/ratelab/limiters/limitertest"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.Limiter {
		l, err := leakybucket.New(limiters.Limit{N: quota, Per: period})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, limitertest.Options{})
}
