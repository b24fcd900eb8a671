package redislimit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// hook collects what an error hook hears.
type hook struct {
	mu    sync.Mutex
	heard []error
}

func (h *hook) hear(err error) {
	h.mu.Lock()
	h.heard = append(h.heard, err)
	h.mu.Unlock()
}

// count returns how many errors the hook heard, and whether each wraps
// ErrUnavailable.
func (h *hook) count() (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.heard {
		if !errors.Is(err, redislimit.ErrUnavailable) {
			return len(h.heard), false
		}
	}
	return len(h.heard), true
}

// Falling back: while Redis is down, each process of a fleet of 4 admits
// its share of the limit, a quarter of it (rounded up), per window. The
// fallback's decisions are real ones: they come with a nil error (they
// used to come with ErrUnavailable), and the hook hears of each failure.
func TestFallback(t *testing.T) {
	p := proxy(t, redistest.Require(t))
	c := through(t, p, 50*time.Millisecond)
	var h hook
	limits := []limiters.Limit{{N: 10, Per: time.Second}}
	l, err := redislimit.New(c, limiters.FixedWindow, limits, redislimit.WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))),
		redislimit.WithTimeout(50*time.Millisecond), redislimit.WithFallback(4), redislimit.WithBreaker(1, time.Minute), redislimit.WithErrorHook(h.hear))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p.Set(redisfault.Silent)
	t0 := time.Unix(1_800_000_000, 0)
	share := []limiters.Limit{{Name: "10/s", N: 3, Per: time.Second}}
	for w := range 2 {
		admitted := 0
		for i := range 10 {
			d, err := l.Decide(context.Background(), at("k", t0.Add(time.Duration(w)*time.Second+time.Duration(i)*time.Millisecond), 1))
			if err != nil {
				t.Fatalf("Redis down, the fallback deciding: err %v, want nil", err)
			}
			if d.Policy == nil || !slices.Equal(d.Policy.Limits, share) {
				t.Fatalf("the fallback's decision %s: want its policy the share, %v", show(d), share)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("window %d: the fallback admitted %d of 10, want 3 (10 / 4, rounded up)", w, admitted)
		}
	}
	if n, ok := h.count(); n != 20 || !ok {
		t.Errorf("the hook heard %d errors (all ErrUnavailable: %v), want 20", n, ok)
	}
	for _, bad := range []redislimit.Option{redislimit.WithFallback(0), redislimit.WithBreaker(-1, 0)} {
		if _, err := redislimit.New(c, limiters.FixedWindow, limits, bad); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%v: want ErrInvalidParameter", err)
		}
	}
}

// The fallback takes several limits now (it used to take one): each at
// its share, the shares named as the limits are, N and the burst divided
// by the fleet, rounded up; its decisions and peeks are those of the
// in-memory limiter of the shares. Reserve falls back too, and Settle
// settles the fallback's reservation in memory; a reservation Redis made
// cannot be settled while Redis is down, nor can keys be reset or walked.
func TestFallbackSeveralLimits(t *testing.T) {
	p := proxy(t, redistest.Require(t))
	c := through(t, p, 50*time.Millisecond)
	limits := []limiters.Limit{{N: 100, Per: time.Second, Burst: 9}, {Name: "hourly", N: 15, Per: time.Hour}}
	shares := []limiters.Limit{{Name: "100/s burst 9", N: 50, Per: time.Second, Burst: 5}, {Name: "hourly", N: 8, Per: time.Hour}}
	var h hook
	warm(t, c, limiters.TokenBucket, limits, redistest.Prefix(t, redistest.Client(t, nil)))
	l, err := redislimit.New(c, limiters.TokenBucket, limits, redislimit.WithPrefix(redistest.Prefix(t, redistest.Client(t, nil))),
		redislimit.WithTimeout(50*time.Millisecond), redislimit.WithFallback(2), redislimit.WithErrorHook(h.hear))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mem, err := composite.New(limiters.TokenBucket, shares)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	held, err := l.Reserve(ctx, at("r", t0, 2)) // made by Redis
	if err != nil || !held.Allowed() {
		t.Fatalf("Reserve with Redis up: %+v, %v", held.Decision(), err)
	}
	p.Set(redisfault.Silent)
	for i := range 12 {
		req := at("k", t0.Add(time.Duration(i)*10*time.Millisecond), 1+i%2)
		want, _ := mem.Decide(ctx, req)
		got, err := l.Decide(ctx, req)
		if err != nil || !same(got, want) {
			t.Fatalf("decision %d with Redis down: %s, %v; want the shares' %s", i, show(got), err, show(want))
		}
		want, _ = mem.Peek(ctx, req)
		if got, err = l.Peek(ctx, req); err != nil || !same(got, want) {
			t.Fatalf("peek %d with Redis down: %s, %v; want the shares' %s", i, show(got), err, show(want))
		}
	}
	// What Redis did not reserve, the fallback did: settled in memory.
	r, err := l.Reserve(ctx, at("s", t0, 3))
	if err != nil || !r.Allowed() || r.Decision().Limit != 5 {
		t.Fatalf("Reserve with Redis down: %s, %v; want the fallback's", show(r.Decision()), err)
	}
	if d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 1, At: t0}); err != nil || d.Remaining != 4 {
		t.Errorf("Settle of the fallback's reservation: %s, %v; want 4 left of the share's burst of 5", show(d), err)
	}
	if _, err := l.Settle(ctx, limiters.Settlement{Reservation: held, Actual: 1, At: t0}); !errors.Is(err, redislimit.ErrUnavailable) {
		t.Errorf("Settle of Redis's reservation with Redis down: %v, want ErrUnavailable", err)
	}
	if err := l.Reset(ctx, "k"); !errors.Is(err, redislimit.ErrUnavailable) {
		t.Errorf("Reset with Redis down: %v, want ErrUnavailable", err)
	}
	if err := l.ResetAll(ctx); !errors.Is(err, redislimit.ErrUnavailable) {
		t.Errorf("ResetAll with Redis down: %v, want ErrUnavailable", err)
	}
	if err := l.Walk(ctx, func(string, limiters.Decision) bool { return true }); !errors.Is(err, redislimit.ErrUnavailable) {
		t.Errorf("Walk with Redis down: %v, want ErrUnavailable", err)
	}
	if n, ok := h.count(); n != 24+1+1+1+1+1 || !ok {
		t.Errorf("the hook heard %d errors (all ErrUnavailable: %v), want one a call: 29", n, ok)
	}
}

// The failure modes' decisions carry the limiter's policy: fail open
// admits with Remaining 0 and the least quota; fail closed denies for the
// timeout, by the limit of the least quota. The hook hears of each.
func TestFailureModes(t *testing.T) {
	p := proxy(t, redistest.Require(t))
	c := through(t, p, 50*time.Millisecond)
	p.Set(redisfault.Silent)
	limits := []limiters.Limit{{N: 100, Per: time.Minute}, {Name: "second", N: 7, Per: time.Second}}
	for _, mode := range []redislimit.FailureMode{redislimit.FailOpen, redislimit.FailClosed} {
		var h hook
		l, err := redislimit.New(c, limiters.SlidingCounter, limits, redislimit.WithTimeout(50*time.Millisecond), redislimit.WithFailureMode(mode), redislimit.WithErrorHook(h.hear))
		if err != nil {
			t.Fatal(err)
		}
		want := limiters.Decision{Allowed: true, Limit: 7, Policy: limiters.NewPolicy(limits...)}
		if mode == redislimit.FailClosed {
			want = limiters.Decision{Limit: 7, RetryAfter: 50 * time.Millisecond, Policy: want.Policy, Denied: limiters.Denials(0).Deny(1, true)}
		}
		for _, decide := range []func(context.Context, limiters.Request) (limiters.Decision, error){l.Decide, l.Peek} {
			d, err := decide(context.Background(), limiters.Request{Key: "k", N: 1})
			if !errors.Is(err, redislimit.ErrUnavailable) || !same(d, want) {
				t.Errorf("%v: %s, %v; want %s and ErrUnavailable", mode, show(d), err, show(want))
			}
		}
		if n, ok := h.count(); n != 2 || !ok {
			t.Errorf("%v: the hook heard %d errors (all ErrUnavailable: %v), want 2", mode, n, ok)
		}
	}
}
