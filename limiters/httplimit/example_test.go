package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/httplimit"
)

// Two limits on each API key, all or nothing; one RateLimit item each.
func Example() {
	l, err := composite.New(limiters.SlidingLog, []composite.Limit{
		{Name: "minute", Rate: limiters.Rate{N: 2, Per: time.Minute}},
		{Name: "hour", Rate: limiters.Rate{N: 100, Per: time.Hour}},
	})
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

	var policy string
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "k-123")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		line := fmt.Sprint(w.Code, " RateLimit: ", w.Header().Get("RateLimit"))
		if retry := w.Header().Get("Retry-After"); retry != "" {
			line += " | Retry-After: " + retry
		}
		fmt.Println(line)
		policy = w.Header().Get("RateLimit-Policy") // the same on every response
	}
	fmt.Println("RateLimit-Policy:", policy)
	// Output:
	// 200 RateLimit: "minute";r=1;t=60, "hour";r=99;t=3600
	// 200 RateLimit: "minute";r=0;t=60, "hour";r=98;t=3600
	// 429 RateLimit: "minute";r=0;t=60, "hour";r=98;t=60 | Retry-After: 60
	// RateLimit-Policy: "minute";q=2;w=60, "hour";q=100;w=3600
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
