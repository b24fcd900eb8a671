package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
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
	l, err := gcra.New(limiters.PerSecond(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	trace := strings.Repeat("0,a\n", 1000)
	var out bytes.Buffer
	err = Replay(ctx, workloads.NewTraceReader(&cancelAfter{r: strings.NewReader(trace), n: 20, cancel: cancel}), l, false, &out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Replay = %v, want context.Canceled", err)
	}
	if lines := strings.Count(out.String(), "\n"); lines == 0 || lines >= 1000 {
		t.Fatalf("Replay wrote %d lines before stopping, want some and not all", lines)
	}
}

// failing is a limiter whose backend fails from its third decision on.
type failing struct {
	limiters.Limiter
	calls int
}

var errBackend = errors.New("backend down")

func (f *failing) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if f.calls++; f.calls > 2 {
		return limiters.Decision{Allowed: true}, errBackend
	}
	return f.Limiter.Decide(ctx, r)
}

// TestReplayStopsWhenBackendFails: a replay never prints a decision its
// backend did not make; it stops with the backend's error.
func TestReplayStopsWhenBackendFails(t *testing.T) {
	l, err := gcra.New(limiters.Limit{N: 1, Per: time.Second, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bytes.Buffer
	err = Replay(context.Background(), workloads.NewTraceReader(strings.NewReader(strings.Repeat("0,a\n", 10))), &failing{Limiter: l}, false, &out)
	if !errors.Is(err, errBackend) {
		t.Fatalf("Replay = %v, want the backend's error", err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Fatalf("Replay wrote %d lines, want the 2 decided before the failure:\n%s", lines, out.String())
	}
}

// A trace that says what each request really cost: each is decided at its
// estimate and settled at its actual cost when its response was done, in
// time order with the lines after it, as the limiter's own Reserve and
// Settle would; a line says "actual"; a limiter that cannot settle is
// refused, naming the line.
func TestReplaySettles(t *testing.T) {
	limit := limiters.Limit{N: 10, Per: time.Second, Burst: 1000}
	trace := "t,key,n,actual,took\n0,alice,500,120,2\n1,alice,500,900,3\n5,alice,500,400\n6,alice,100\n"
	l, err := gcra.New(limit)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bytes.Buffer
	if err := Replay(context.Background(), workloads.NewTraceReader(strings.NewReader(trace)), l, false, &out); err != nil {
		t.Fatal(err)
	}
	// The same by hand.
	ref, _ := gcra.New(limit)
	defer ref.Close()
	ctx := context.Background()
	at := func(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }
	alice := func(s float64, n int) limiters.Request { return limiters.Request{Key: "alice", N: n, At: at(s)} }
	r0, _ := ref.Reserve(ctx, alice(0, 500))
	r1, _ := ref.Reserve(ctx, alice(1, 500))
	ref.Settle(ctx, limiters.Settlement{Reservation: r0, Actual: 120, At: at(2)})
	ref.Settle(ctx, limiters.Settlement{Reservation: r1, Actual: 900, At: at(4)})
	d5, _ := ref.Decide(ctx, alice(5, 500))
	d6, _ := ref.Decide(ctx, alice(6, 100))
	want := []limiters.Decision{r0.Decision(), r1.Decision(), d5, d6}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for i, w := range want {
		line := lines[i]
		for _, part := range []string{fmt.Sprintf(`"remaining":%d,`, w.Remaining), fmt.Sprintf(`"allowed":%v,`, w.Allowed)} {
			if !strings.Contains(line, part) {
				t.Errorf("line %d: %s, want %s", i+1, line, part)
			}
		}
		if has := strings.Contains(line, `"actual":`); has != (i < 3) {
			t.Errorf("line %d: %s: actual shown %v", i+1, line, has)
		}
	}
	err = Replay(context.Background(), workloads.NewTraceReader(strings.NewReader("0,a\n1,a,5,3\n")), noSettle{l}, false, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "line 2: an actual cost, but the limiter") {
		t.Errorf("a limiter that cannot settle: %v", err)
	}
}

// noSettle is a limiter that decides but cannot settle.
type noSettle struct{ limiters.Limiter }
