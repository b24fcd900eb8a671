package leakybucket_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/leakybucket"
)

// As a meter, the leaky bucket decides as the token bucket does: a bucket
// of three draining two a second fills with a burst of three, and has room
// for one more half a second later.
func Example() {
	l, err := leakybucket.New(limiters.Limit{N: 2, Per: time.Second, Burst: 3})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, ms := range []int{0, 0, 0, 0, 500} {
		d, _ := l.Decide(ctx, limiters.Request{Key: "bob", N: 1, At: t0.Add(time.Duration(ms) * time.Millisecond)})
		fmt.Printf("t=%3dms allowed=%-5v retry after %v\n", ms, d.Allowed, d.RetryAfter)
	}
	// Output:
	// t=  0ms allowed=true  retry after 0s
	// t=  0ms allowed=true  retry after 0s
	// t=  0ms allowed=true  retry after 0s
	// t=  0ms allowed=false retry after 500ms
	// t=500ms allowed=true  retry after 0s
}
