package peers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Each peer, read as N per W, admits a burst of N for a fresh key, then
// denies, and keeps keys apart: the adapters measure the libraries as
// configured, not something else.
func TestPeersEnforceTheirLimit(t *testing.T) {
	ctx := context.Background()
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) {
			l, err := p.New(limiters.Limit{N: 5, Per: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, key := range []string{"alice", "bob"} {
				for i := range 5 {
					d, err := l.AllowN(ctx, key, 1)
					if err != nil || !d.Allowed {
						t.Fatalf("%s request %d: %+v, %v; want admitted", key, i+1, d, err)
					}
					if d.Limit != 5 {
						t.Errorf("%s: Limit = %d, want 5", key, d.Limit)
					}
				}
				if d, err := l.AllowN(ctx, key, 1); err != nil || d.Allowed {
					t.Fatalf("%s request 6: %+v, %v; want denied", key, d, err)
				}
			}
			// It reads its own clock: an explicit time is refused, not
			// silently ignored.
			if d, err := l.Decide(ctx, limiters.Request{Key: "carol", N: 1, At: time.Unix(1000, 0)}); !errors.Is(err, limiters.ErrInvalidParameter) || d.Allowed {
				t.Errorf("a request at an explicit time: %+v, %v; want ErrInvalidParameter", d, err)
			}
		})
	}
	for _, p := range All() {
		if l, err := p.New(limiters.Limit{}); err == nil || l != nil {
			t.Errorf("%s accepted an empty window: %v, %v", p.Name, l, err)
		}
		if p.NewAt == nil {
			continue
		}
		if l, err := p.NewAt(limiters.Limit{}); err == nil || l != nil {
			t.Errorf("%s at explicit times accepted an empty window: %v, %v", p.Name, l, err)
		}
	}
}

// At explicit times the peers that take them decide like the ratelab
// algorithm they are: a burst of N, then one more N/W later.
func TestPeersAtExplicitTimes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, p := range All() {
		if p.NewAt == nil {
			continue
		}
		l, err := p.NewAt(limiters.Limit{N: 5, Per: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if !allowAt(l, "k", t0) {
				t.Fatalf("%s: request %d at t0 denied", p.Name, i+1)
			}
		}
		if allowAt(l, "k", t0) {
			t.Fatalf("%s: sixth request at t0 admitted", p.Name)
		}
		if allowAt(l, "k", t0.Add(1900*time.Millisecond)) {
			t.Fatalf("%s: admitted before a token refilled (2s)", p.Name)
		}
		if !allowAt(l, "k", t0.Add(2*time.Second)) {
			t.Fatalf("%s: denied after a token refilled (2s)", p.Name)
		}
	}
}

func allowAt(l limiters.Limiter, key string, at time.Time) bool {
	d, err := l.Decide(context.Background(), limiters.Request{Key: key, N: 1, At: at})
	return err == nil && d.Allowed
}
