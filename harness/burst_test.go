package harness

import (
	"context"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// A fresh key gets exactly N through in an instant from every limiter of
// ratelab's given N per W (the buckets start full, at capacity N), and the
// table shows them.
func TestLabBurst(t *testing.T) {
	c := smallLab()
	c.Modes = []string{burstModeName}
	c.Limiters = []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) != len(c.Limiters) {
		t.Fatalf("%d rows, want one a limiter", len(f.Rows))
	}
	for _, r := range f.Rows {
		if got := r.Get(results.Admitted); got != float64(c.Limit.N) {
			t.Errorf("%s admitted %v at once, want %d", r.Limiter, got, c.Limit.N)
		}
	}
	if tabs := results.Tables(f); len(tabs) != 1 || tabs[0].Name != "burst" || len(tabs[0].Rows) != 6 {
		t.Errorf("tables %+v", tabs)
	}
}
