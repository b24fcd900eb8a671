package httplimit_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// A GCRA limit of 2 a minute on each API key: two requests are served,
// the third is denied, with everything the middleware says about it.
func Example() {
	l, err := gcra.New(limiters.Limit{Name: "minute", N: 2, Per: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	mw, err := httplimit.New(l, httplimit.WithHeaderKey("X-API-Key"))
	if err != nil {
		panic(err)
	}
	api := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	var w *httptest.ResponseRecorder
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "k-123")
		w = httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"))
	}
	fmt.Println()
	for _, k := range slices.Sorted(maps.Keys(w.Header())) {
		fmt.Printf("%s: %s\n", k, w.Header().Get(k))
	}
	fmt.Print(w.Body)
	// Output:
	// 200 RateLimit: "minute";r=1;t=30
	// 200 RateLimit: "minute";r=0;t=60
	// 429 RateLimit: "minute";r=0;t=30
	//
	// Content-Type: application/problem+json
	// Ratelimit: "minute";r=0;t=30
	// Ratelimit-Policy: "minute";q=2;w=60
	// Retry-After: 30
	// X-Ratelimit-Limit: 2
	// X-Ratelimit-Remaining: 0
	// X-Ratelimit-Reset: 60
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Retry in 30 seconds.","violated-policies":["minute"]}
}

// Keyed by the client's address behind a load balancer at 10.0.0.0/8: its
// X-Forwarded-For is believed, anyone else's is not.
func ExampleClientIP() {
	key, err := httplimit.ClientIP(httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		panic(err)
	}
	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.1:5000", "198.51.100.7"},                   // through the balancer
		{"203.0.113.9:5000", "198.51.100.7"},                // straight in, forging the header
		{"10.0.0.1:5000", "2001:db8:1:2:3:4:5:6, 10.0.0.2"}, // IPv6, past two hops
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		r.Header.Set("X-Forwarded-For", c.xff)
		k, _ := key(r)
		fmt.Println(k)
	}
	// Output:
	// 198.51.100.7
	// 203.0.113.9
	// 2001:db8:1:2::/64
}
