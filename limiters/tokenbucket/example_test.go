package tokenbucket_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tokenbucket"
)

// A bucket of five tokens refilled at one a second: a burst of five, then
// the bucket refills at its rate, and a request of cost three waits for
// three tokens.
func Example() {
	l, err := tokenbucket.New(limiters.Limit{N: 1, Per: time.Second, Burst: 5})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d, _ := l.Decide(ctx, limiters.Request{Key: "alice", N: 5, At: t0})
	fmt.Println("a burst of 5:", d.Allowed, "remaining", d.Remaining)
	d, _ = l.Decide(ctx, limiters.Request{Key: "alice", N: 3, At: t0.Add(time.Second)})
	fmt.Println("3 more a second later:", d.Allowed, "retry after", d.RetryAfter)
	d, _ = l.Decide(ctx, limiters.Request{Key: "alice", N: 3, At: t0.Add(3 * time.Second)})
	fmt.Println("3 more at 3s:", d.Allowed, "remaining", d.Remaining)
	// Output:
	// a burst of 5: true remaining 0
	// 3 more a second later: false retry after 2s
	// 3 more at 3s: true remaining 0
}
