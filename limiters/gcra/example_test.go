package gcra_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
)

// Ten a second with a burst of three: three at once, then one every 100ms.
func Example() {
	l, err := gcra.New(limiters.Limit{N: 10, Per: time.Second, Burst: 3})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, ms := range []int{0, 0, 0, 0, 100} {
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		d, _ := l.Decide(ctx, limiters.Request{Key: "alice", N: 1, At: at})
		fmt.Printf("t=%3dms allowed=%-5v remaining=%d retry after %v\n", ms, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t=  0ms allowed=true  remaining=2 retry after 0s
	// t=  0ms allowed=true  remaining=1 retry after 0s
	// t=  0ms allowed=true  remaining=0 retry after 0s
	// t=  0ms allowed=false remaining=0 retry after 100ms
	// t=100ms allowed=true  remaining=0 retry after 0s
}
