package limitertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// The suite's cases about time (RetryAfter, ResetAfter, what a peek
// sees) and about the abilities beyond a decision (Reset, Walk, the
// limiter's own clock).

func (s suite) retryAfter(t *testing.T) {
	for _, n := range []int{1, 2, quota} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			l := s.limiter(t)
			at := t0
			// Take everything available at an instant, then knock with
			// cost n and retry exactly when told: the retry is admitted,
			// and one resolution earlier it would not have been. Repeat
			// from the instant of the retry.
			for i := range 2 * quota {
				for j := 0; l.AllowAt("k", at, 1).Allowed; j++ {
					if j == quota {
						t.Fatalf("round %d: %d unit requests admitted at one instant, limit %d", i, j+1, quota)
					}
				}
				d := denied(t, l, "k", at, n)
				if d.RetryAfter == limiters.Never {
					t.Fatalf("round %d: RetryAfter = Never for a possible request", i)
				}
				if d.RetryAfter > s.o.Resolution {
					denied(t, l, "k", at.Add(d.RetryAfter-s.o.Resolution), n)
				}
				at = at.Add(d.RetryAfter)
				if got := allow(t, l, "k", at, n); !got.Allowed {
					t.Fatalf("round %d at %s (after RetryAfter %v): Allowed = false, want true (%+v)", i, stamp(at), d.RetryAfter, got)
				}
			}
		})
	}
}

func (s suite) resetAfter(t *testing.T) {
	l := s.limiter(t)
	d := allow(t, l, "k", t0, quota)
	// After ResetAfter, with nothing else happening, the whole quota is
	// back.
	later := t0.Add(d.ResetAfter)
	p := l.PeekAt("k", later)
	if p.Remaining != quota || p.ResetAfter != 0 {
		t.Fatalf("PeekAt(k, t0+ResetAfter=%v) = %+v, want Remaining %d and ResetAfter 0", d.ResetAfter, p, quota)
	}
	if d.ResetAfter > s.o.Resolution {
		if p := l.PeekAt("k", later.Add(-s.o.Resolution)); p.Remaining == quota && p.ResetAfter == 0 {
			t.Fatalf("PeekAt(k, t0+ResetAfter-%v) = %+v: full quota before ResetAfter", s.o.Resolution, p)
		}
	}
	spend(t, l, "k", later, quota)
}

func (s suite) remainingBounds(t *testing.T) {
	l := s.limiter(t)
	// A jagged trace across many periods, with costs from 1 to above the
	// limit: every decision keeps Remaining within [0, Limit] (checked by
	// allow), and Remaining never grows at one instant.
	at := t0
	steps := []time.Duration{0, 1, period / 3, 0, period / 10, 2 * period, period - 1, 7, period / 2}
	for i := range 200 {
		at = at.Add(steps[i%len(steps)])
		n := 1 + i%(quota+2)
		d := allow(t, l, "k", at, n)
		if again := l.PeekAt("k", at); again.Remaining > d.Remaining {
			t.Fatalf("step %d: PeekAt right after AllowAt reports Remaining %d > %d", i, again.Remaining, d.Remaining)
		}
	}
}

func (s suite) peek(t *testing.T) {
	l := s.limiter(t)
	if p := l.PeekAt("k", t0); !p.Allowed || p.Remaining != quota || p.ResetAfter != 0 {
		t.Fatalf("PeekAt of a fresh key = %+v, want allowed, Remaining %d, ResetAfter 0", p, quota)
	}
	d := allow(t, l, "k", t0, 2)
	for range 3 {
		p := l.PeekAt("k", t0)
		if p.Remaining != d.Remaining || p.ResetAfter != d.ResetAfter || !p.Allowed {
			t.Fatalf("PeekAt(k, t0) = %+v, want what AllowAt last reported (%+v), allowed", p, d)
		}
	}
	spend(t, l, "k", t0, quota-2) // peeking consumed nothing
	if p := l.PeekAt("k", t0); p.Allowed || p.RetryAfter <= 0 {
		t.Fatalf("PeekAt of a spent key = %+v, want denied with RetryAfter > 0", p)
	}
	if _, err := l.Peek(context.Background(), limiters.Request{Key: "k", N: 1}); err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if d, err := l.Peek(context.Background(), limiters.Request{Key: "k", N: 0, At: t0}); !errors.Is(err, limiters.ErrInvalidCost) || d.Allowed {
		t.Fatalf("Peek of cost 0 = %+v, %v, want a denial and ErrInvalidCost", d, err)
	}
}

func (s suite) reset(t *testing.T) {
	l := s.limiter(t)
	r, ok := l.Limiter.(limiters.Resetter)
	if !ok {
		t.Skip("no Reset")
	}
	spend(t, l, "a", t0, quota)
	spend(t, l, "b", t0, quota)
	// Denied many times over (a limiter may remember denials), then reset.
	for range 3 {
		denied(t, l, "a", t0, 1)
		denied(t, l, "b", t0, 1)
	}
	if err := r.Reset(context.Background(), "a"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	spend(t, l, "a", t0, quota)
	denied(t, l, "b", t0, 1) // only a was reset
	if err := r.Reset(context.Background(), "never-seen"); err != nil {
		t.Fatalf("Reset of an unknown key: %v", err)
	}
}

func (s suite) resetAll(t *testing.T) {
	l := s.limiter(t)
	r, ok := l.Limiter.(limiters.Resetter)
	if !ok {
		t.Skip("no ResetAll")
	}
	for i := range 100 {
		spend(t, l, fmt.Sprint(i), t0, quota)
		denied(t, l, fmt.Sprint(i), t0, 1)
	}
	if err := r.ResetAll(context.Background()); err != nil {
		t.Fatalf("ResetAll: %v", err)
	}
	for i := range 100 {
		spend(t, l, fmt.Sprint(i), t0, quota)
	}
}

func (s suite) walk(t *testing.T) {
	l := s.limiter(t)
	w, ok := l.Limiter.(limiters.Walker)
	if !ok {
		t.Skip("no Walk")
	}
	// Spend 1, 2, 3 on three keys: Walk reports each with what it has
	// left. It may name keys by a hash, so match them by Remaining.
	for i := 1; i <= 3; i++ {
		spend(t, l, fmt.Sprint("walker-", i), t0, i)
	}
	seen := map[int]int{}
	err := w.Walk(context.Background(), func(key string, d limiters.Decision) bool {
		if key == "" {
			t.Errorf("Walk reported an empty key name")
		}
		if d.Limit != quota {
			t.Errorf("Walk(%q).Limit = %d, want %d", key, d.Limit, quota)
		}
		seen[quota-d.Remaining]++
		return true
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	// Walk decides at the limiter's now, which is not t0: keys may have
	// recovered since. What must hold: at most three keys, none reporting
	// more spent than it spent.
	total := 0
	for spent, n := range seen {
		if spent > 3 {
			t.Errorf("Walk reported a key that spent %d, more than any did", spent)
		}
		total += n
	}
	if total > 3 {
		t.Errorf("Walk reported %d keys, want at most 3", total)
	}
	// Stopping early stops.
	calls := 0
	if err := w.Walk(context.Background(), func(string, limiters.Decision) bool { calls++; return false }); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if calls > 1 {
		t.Errorf("Walk called fn %d times after it returned false", calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Walk(ctx, func(string, limiters.Decision) bool { return true }); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with a cancelled context = %v, want context.Canceled", err)
	}
}

func (s suite) allowNNow(t *testing.T) {
	l := s.limiter(t)
	ctx := context.Background()
	// At the limiter's own clock: a burst of quota passes and the next is
	// denied (the period is long enough that nothing refills meanwhile in a
	// bucket; a window may roll over once, so allow one more burst).
	admitted := 0
	for range 3 * quota {
		d, err := l.AllowN(ctx, "now", 1)
		if err != nil {
			t.Fatalf("AllowN: %v", err)
		}
		checkDecision(t, "AllowN(ctx, now, 1)", d)
		if d.Allowed {
			admitted++
		}
	}
	if admitted < quota || admitted > 2*quota {
		t.Fatalf("AllowN admitted %d of %d at once, want between %d and %d", admitted, 3*quota, quota, 2*quota)
	}
}
