package slidinglog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/slidinglog"
)

// Five a minute, exactly: five just before a minute turns, and the five
// just after are denied until the first leave the window, a minute after
// they came.
func Example() {
	l, err := slidinglog.New(limiters.PerMinute(5))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	edge := time.Date(2026, 1, 1, 12, 1, 0, 0, time.UTC)
	l.Decide(ctx, limiters.Request{Key: "mallory", N: 5, At: edge.Add(-time.Second)})
	d, _ := l.Decide(ctx, limiters.Request{Key: "mallory", N: 1, At: edge.Add(time.Second)})
	fmt.Println("after the edge:", d.Allowed, "retry after", d.RetryAfter)
	by, _ := d.DeniedBy()
	fmt.Println("denied by", by.Name)
	// Output:
	// after the edge: false retry after 58s
	// denied by 5/min
}
