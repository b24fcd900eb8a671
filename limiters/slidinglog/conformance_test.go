package slidinglog_test

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/limitertest"
	"github.com/ratelab/ratelab/limiters/slidinglog"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.Limiter {
		l, err := slidinglog.New(limiters.Limit{N: quota, Per: period})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, limitertest.Options{})
}
