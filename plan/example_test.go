package plan_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A plan of a log of two clients: alice sends four requests in one
// second (the server refused her fourth), bob one a second. Which limit
// spares them both, by algorithm?
func ExampleRun() {
	log := `10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 1 "-" "alice"
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET /b HTTP/1.1" 200 1 "-" "alice"
10.0.0.2 - - [28/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 1 "-" "bob"
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET /c HTTP/1.1" 200 1 "-" "alice"
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET /d HTTP/1.1" 429 0 "-" "alice"
10.0.0.2 - - [28/Nov/2026:10:00:01 +0000] "GET /a HTTP/1.1" 200 1 "-" "bob"
`
	r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.log", R: strings.NewReader(log)}}, accesslog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := plan.Run(context.Background(), r, plan.Config{
		Algorithms: []limiters.Algorithm{limiters.SlidingLog, limiters.TokenBucket},
		Limits:     []limiters.Limit{limiters.PerSecond(1), limiters.PerSecond(2), limiters.PerSecond(4)},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d requests of %d clients, %d refused by the server already; peaks p50 %v, max %v\n",
		p.Requests, p.Clients, p.Logged429, p.Peaks.P50, p.Peaks.Max)
	for _, s := range p.Suggestions {
		fmt.Printf("%s: %s, refusing %d requests of %d clients\n", s.Algorithm, s.Point.Limit, s.Point.Refused, s.Point.Clients)
	}
	// Output:
	// 6 requests of 2 clients, 1 refused by the server already; peaks p50 1, max 4
	// sliding-log: 4/s, refusing 0 requests of 0 clients
	// token-bucket: 4/s, refusing 0 requests of 0 clients
}
