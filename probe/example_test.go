package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/httplimit"
	"github.com/ratelab/ratelab/probe"
)

// Your limiter in go test: the handler and its middleware behind an
// httptest.Server, probed as ratelab probe probes a deployed one, with no
// hint of the policy, then held to the one the team meant (Strays, what
// --expect checks in CI). Here the middleware is ratelab's own, a GCRA of
// 10 a second with a burst of 5 per X-User; a test of your own would
// wrap your handler and middleware alike.
func Example() {
	l, err := gcra.New(limiters.Limit{N: 10, Per: time.Second, Burst: 5})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	mw, err := httplimit.New(l, httplimit.WithHeaderKey("X-User"), httplimit.WithHeaders(httplimit.AllHeaders))
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})))
	defer srv.Close()

	r, err := probe.Run(context.Background(), probe.Config{
		Target:      probe.Target{URL: srv.URL, Key: probe.Key{Kind: "header", Name: "X-User"}},
		Seed:        1,
		Timeout:     2 * time.Second,
		MaxRequests: 2000,
		MaxRate:     1000,
		MaxTime:     time.Minute,
	}, nil)
	if err != nil {
		panic(err)
	}
	want, err := probe.ParseExpect("gcra 10/s burst 5", 0.02)
	if err != nil {
		panic(err)
	}
	fmt.Println("named:", r.Verdict.Named, r.Fit[0].Algorithm.IsBucket())
	fmt.Println("strays from", want.String()+":", r.Strays(want))
	// Output:
	// named: true true
	// strays from gcra 10/s burst 5: []
}
