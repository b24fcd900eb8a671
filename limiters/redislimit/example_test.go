package redislimit_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// exampleAddr is the Redis server the Examples dial: yours. They need
// one, so they compile but do not run; TestExamples runs them on the
// tests' server and checks what they print.
var exampleAddr = "127.0.0.1:6379"

// A limit of 2 a second for each user, kept in Redis, shared by every
// process that uses the same prefix. The decisions here are made at an
// explicit time, which makes them exact; leave Request.At zero to decide
// at the server's clock. It prints:
//
//	+0s: allowed true, remaining 1, retry after 0s
//	+0s: allowed true, remaining 0, retry after 0s
//	+0s: allowed false, remaining 0, retry after 500ms
//	+500ms: allowed true, remaining 0, retry after 0s
func Example() {
	client := redis.NewClient(&redis.Options{Addr: exampleAddr,
		ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	l, err := redislimit.New(client, limiters.GCRA, []limiters.Limit{limiters.PerSecond(2)},
		redislimit.WithPrefix("ratelab-example:"), redislimit.WithFailureMode(redislimit.FailClosed))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	l.Reset(ctx, "alice") // what an earlier run left
	defer l.Reset(ctx, "alice")

	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for _, at := range []time.Time{t0, t0, t0, t0.Add(500 * time.Millisecond)} {
		d, err := l.Decide(ctx, limiters.Request{Key: "alice", N: 1, At: at})
		if err != nil { // Redis did not answer: d is the failure mode's
			log.Print(err)
		}
		fmt.Printf("+%v: allowed %v, remaining %d, retry after %v\n", at.Sub(t0), d.Allowed, d.Remaining, d.RetryAfter)
	}
}

// Tiers in Redis: tiers.NewWith builds each tier and each override with
// redislimit.New, under a prefix of its own, so that two tiers with the
// same limits never share a user's quota. It prints:
//
//	alice (free): allowed true, 1 of 2 left
//	alice (free): allowed true, 0 of 2 left
//	alice (free): allowed false, 0 of 2 left
//	bob (premium): allowed true, 99 of 100 left
func Example_tiers() {
	client := redis.NewClient(&redis.Options{Addr: exampleAddr,
		ContextTimeoutEnabled: true, PoolTimeout: 250 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	braces := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D") // a prefix holds no braces
	var groups []*redislimit.Limiter
	l, err := tiers.NewWith(tiers.Config{
		Algorithm: limiters.FixedWindow,
		Tiers: map[string][]limiters.Limit{
			"free":    {{Name: "minute", N: 2, Per: time.Minute}},
			"premium": {{Name: "minute", N: 100, Per: time.Minute}},
		},
		Default: "free",
		Users:   map[string]string{"bob": "premium"},
	}, func(name string, a limiters.Algorithm, limits []limiters.Limit) (tiers.Group, error) {
		kind, who, _ := strings.Cut(name, " ") // "tier free", "user alice"
		g, err := redislimit.New(client, a, limits, redislimit.WithPrefix("ratelab-example:"+kind+":"+braces.Replace(who)+":"))
		if err == nil {
			groups = append(groups, g)
		}
		return g, err
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, g := range groups {
		g.ResetAll(ctx) // what an earlier run left
		defer g.ResetAll(ctx)
	}

	t0 := time.Date(2026, 3, 14, 15, 9, 0, 0, time.UTC)
	for _, user := range []string{"alice", "alice", "alice", "bob"} {
		d, err := l.Decide(ctx, limiters.Request{Key: user, N: 1, At: t0})
		if err != nil {
			log.Print(err)
		}
		fmt.Printf("%s (%s): allowed %v, %d of %d left\n", user, d.Tier(), d.Allowed, d.Remaining, d.Limit)
	}
}

// The Examples, run on the tests' Redis server (skipped without one, as
// the package's other tests are), print what their documentation says.
func TestExamples(t *testing.T) {
	exampleAddr = redistest.Require(t)
	for _, tt := range []struct {
		name string
		run  func()
		want string
	}{
		{"Example", Example, "+0s: allowed true, remaining 1, retry after 0s\n+0s: allowed true, remaining 0, retry after 0s\n+0s: allowed false, remaining 0, retry after 500ms\n+500ms: allowed true, remaining 0, retry after 0s\n"},
		{"Example_tiers", Example_tiers, "alice (free): allowed true, 1 of 2 left\nalice (free): allowed true, 0 of 2 left\nalice (free): allowed false, 0 of 2 left\nbob (premium): allowed true, 99 of 100 left\n"},
	} {
		if got := printed(t, tt.run); got != tt.want {
			t.Errorf("%s printed\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

// printed is what f writes to standard output.
func printed(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	w.Close()
	os.Stdout = stdout
	return <-done
}
