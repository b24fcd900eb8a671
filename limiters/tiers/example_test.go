package tiers_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Free users get 2 a minute, premium ones 100; paula is premium, anyone
// else free. A decision says the user's tier.
func Example() {
	l, err := tiers.New(tiers.Config{
		Algorithm: limiters.SlidingCounter,
		Tiers: map[string][]limiters.Limit{
			"free":    {limiters.PerMinute(2)},
			"premium": {limiters.PerMinute(100)},
		},
		Default: "free",
		Users:   map[string]string{"paula": "premium"},
	})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, user := range []string{"paula", "frank", "frank", "frank"} {
		d, _ := l.Decide(ctx, limiters.Request{Key: user, N: 1, At: t0})
		fmt.Printf("%s (%s): allowed=%v remaining=%d\n", user, d.Tier(), d.Allowed, d.Remaining)
	}
	// Output:
	// paula (premium): allowed=true remaining=99
	// frank (free): allowed=true remaining=1
	// frank (free): allowed=true remaining=0
	// frank (free): allowed=false remaining=0
}
