package peers

import (
	"context"
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
			l, err := p.New(limiters.Window{Limit: 5, Length: 10 * time.Second})
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
		})
	}
	if _, err := All()[0].New(limiters.Window{}); err == nil {
		t.Error("a peer accepted an empty window")
	}
}
