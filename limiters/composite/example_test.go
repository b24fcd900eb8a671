package composite_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// Two a second and three a minute, all or nothing: the minute runs out
// first, and a denial names the limit that denied and charges neither.
func Example() {
	l, err := composite.New(limiters.SlidingLog, []limiters.Limit{
		limiters.PerSecond(2),
		{Name: "minute", N: 3, Per: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, s := range []int{0, 0, 0, 1, 2} {
		d, _ := l.Decide(ctx, limiters.Request{Key: "olga", N: 1, At: t0.Add(time.Duration(s) * time.Second)})
		by, _ := d.DeniedBy()
		fmt.Printf("t=%ds allowed=%-5v remaining=%d denied by %q, retry after %v\n", s, d.Allowed, d.Remaining, by.Name, d.RetryAfter)
	}
	// Output:
	// t=0s allowed=true  remaining=1 denied by "", retry after 0s
	// t=0s allowed=true  remaining=0 denied by "", retry after 0s
	// t=0s allowed=false remaining=0 denied by "2/s", retry after 1s
	// t=1s allowed=true  remaining=0 denied by "", retry after 0s
	// t=2s allowed=false remaining=0 denied by "minute", retry after 58s
}
