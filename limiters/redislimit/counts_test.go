package redislimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// The round trips Counts reports are the scripts the server ran, as its
// INFO commandstats counts them (EVALSHA, and EVAL when the script had to
// be sent whole), on a server of the test's own: plain, batched, with the
// denial cache and with leases, from several goroutines, at the server's
// clock and at explicit times.
func TestCountsMatchServer(t *testing.T) {
	port, _ := ownServer(t, 0)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port)})
	defer c.Close()
	limits := []limiters.Limit{{N: 200, Per: time.Second, Burst: 20}}
	for _, v := range []struct {
		name string
		opts []redislimit.Option
	}{
		{"plain", []redislimit.Option{redislimit.WithDenialCache(-1)}},
		{"batched", []redislimit.Option{redislimit.WithDenialCache(-1), redislimit.WithBatching(redislimit.Batching{})}},
		{"cached", nil},
		{"lease", []redislimit.Option{redislimit.WithLeases(20*time.Millisecond, 0)}},
	} {
		t.Run(v.name, func(t *testing.T) {
			before := redistest.CommandCalls(t, c)
			l, err := redislimit.New(c, limiters.GCRA, limits, append([]redislimit.Option{patient, redislimit.WithPrefix("counts:" + v.name + ":")}, v.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 1))
					t0 := time.Unix(1_800_000_000, 0)
					for i := range 300 {
						key := []string{"hot", "warm", "cold"}[r.IntN(3)]
						var err error
						if g%2 == 0 {
							_, err = l.AllowN(context.Background(), key, 1)
						} else {
							_, err = l.Decide(context.Background(), at(key+"-at", t0.Add(time.Duration(i)*time.Millisecond), 1))
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			l.Close()
			after := redistest.CommandCalls(t, c)
			server := after["evalsha"] - before["evalsha"] + after["eval"] - before["eval"]
			counts := l.Counts()
			if counts.RoundTrips != server {
				t.Errorf("Counts says %d round trips (%d decisions sent); the server ran %d scripts", counts.RoundTrips, counts.Sent, server)
			}
			if counts.RoundTrips == 0 {
				t.Error("no round trips: the check checks nothing")
			}
			t.Logf("%s: 1200 decisions, %d sent in %d round trips; the server ran %d scripts", v.name, counts.Sent, counts.RoundTrips, server)
		})
	}
}
