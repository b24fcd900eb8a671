package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
	"github.com/ratelab/ratelab/workloads"
)

// cancelAfter is a trace that cancels ctx once n lines have been read
// from it, as an interrupt would arrive in the middle of a long replay.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n == 0 {
		c.cancel()
	}
	c.n--
	return c.r.Read(p[:min(len(p), 4)]) // a few bytes at a time
}

func TestReplayStopsWhenCancelled(t *testing.T) {
	l, err := memory.New(limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 1, Rate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	trace := strings.Repeat("0,a\n", 1000)
	var out bytes.Buffer
	err = Replay(ctx, workloads.NewTraceReader(&cancelAfter{r: strings.NewReader(trace), n: 20, cancel: cancel}), l, &out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Replay = %v, want context.Canceled", err)
	}
	if lines := strings.Count(out.String(), "\n"); lines == 0 || lines >= 1000 {
		t.Fatalf("Replay wrote %d lines before stopping, want some and not all", lines)
	}
}

// failing is a limiter whose backend fails from its third decision on.
type failing struct {
	limiters.AtLimiter
	calls int
}

var errBackend = errors.New("backend down")

func (f *failing) DecideAt(ctx context.Context, key string, t time.Time, n int) (limiters.Decision, int, error) {
	if f.calls++; f.calls > 2 {
		return limiters.Decision{Allowed: true}, -1, errBackend
	}
	return f.AtLimiter.AllowAt(key, t, n), -1, nil
}

// TestReplayStopsWhenBackendFails: a replay never prints a decision its
// backend did not make; it stops with the backend's error.
func TestReplayStopsWhenBackendFails(t *testing.T) {
	l, err := memory.New(limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 5, Rate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bytes.Buffer
	err = Replay(context.Background(), workloads.NewTraceReader(strings.NewReader(strings.Repeat("0,a\n", 10))), &failing{AtLimiter: l}, &out)
	if !errors.Is(err, errBackend) {
		t.Fatalf("Replay = %v, want the backend's error", err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Fatalf("Replay wrote %d lines, want the 2 decided before the failure:\n%s", lines, out.String())
	}
}
