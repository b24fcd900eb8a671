package fixedwindow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/fixedwindow"
)

// Five a minute, windows aligned to the clock's minutes: five just before
// the minute turns and five just after all pass, ten in two seconds: the
// fixed window's weakness at its edge.
func Example() {
	l, err := fixedwindow.New(limiters.PerMinute(5))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	edge := time.Date(2026, 1, 1, 12, 1, 0, 0, time.UTC)
	admitted := 0
	for _, at := range []time.Time{edge.Add(-time.Second), edge.Add(time.Second)} {
		for range 5 {
			if d, _ := l.Decide(ctx, limiters.Request{Key: "mallory", N: 1, At: at}); d.Allowed {
				admitted++
			}
		}
	}
	fmt.Println(admitted, "admitted in two seconds at a limit of 5 a minute")
	// Output: 10 admitted in two seconds at a limit of 5 a minute
}
