package slidingcounter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/slidingcounter"
)

// Ten a minute, five spent at 0:50: at 1:15 the counter weighs the last
// minute's five by the three quarters of that minute still in the sliding
// window, so 3.75 count, and seven more would be too many; at 1:24 the
// five weigh 3, and seven fit.
func Example() {
	l, err := slidingcounter.New(limiters.PerMinute(10))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	l.Decide(ctx, limiters.Request{Key: "carol", N: 5, At: t0.Add(50 * time.Second)})
	d, _ := l.Decide(ctx, limiters.Request{Key: "carol", N: 7, At: t0.Add(75 * time.Second)})
	fmt.Println("7 at 1:15:", d.Allowed, "retry after", d.RetryAfter)
	d, _ = l.Decide(ctx, limiters.Request{Key: "carol", N: 7, At: t0.Add(84 * time.Second)})
	fmt.Println("7 at 1:24:", d.Allowed)
	// Output:
	// 7 at 1:15: false retry after 9s
	// 7 at 1:24: true
}
