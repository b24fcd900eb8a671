package probe

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// The model named, as the verdict writes it for --expect, reads back as
// --expect takes it and expects that model: a bucket of any kind as
// gcra, a window as its algorithm, a queue in front of a bucket.
func TestExpectOfModel(t *testing.T) {
	for _, tt := range []struct {
		m    model
		q    *Queue
		want string
	}{
		{model{Algorithm: limiters.TokenBucket, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 5}}, nil, "gcra 10/s burst 5"},
		{model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 20, Per: 10 * time.Second}}, nil, "sliding-log 20/10s"},
		{model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 100, Per: time.Minute}, Anchored: true}, nil, "fixed-window 100/min"},
		{model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 14}}, &Queue{AtOnce: 10, Held: 4}, "gcra 10/s burst 10 queue 4"},
	} {
		got := expectOf(tt.m, tt.q).String()
		if got != tt.want {
			t.Errorf("%+v: %q; want %q", tt.m, got, tt.want)
			continue
		}
		e, err := ParseExpect(got, 0.02)
		if err != nil || e.String() != got {
			t.Errorf("%q reads back as %v (%v)", got, e, err)
		}
	}
}
