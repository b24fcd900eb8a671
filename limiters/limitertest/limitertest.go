// Package limitertest is the conformance suite every ratelab limiter
// passes: the behaviour all algorithms and backends share. What is
// particular to one algorithm is tested in its own package.
//
// A limiter is asked for by quota and period and reads them in its own way:
// a window algorithm as N = quota per W = period, a bucket algorithm as a
// capacity of quota refilled over period. Either way, at any one instant a
// fresh key admits exactly quota unit requests, which is what most of the
// suite leans on: it decides at explicit times, so every count it checks is
// exact.
package limitertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Factory returns a fresh limiter that admits quota per period, as
// limiters.Limit{N: quota, Per: period}. It must be a limiters.Peeker too.
// It is called once per subtest; the suite closes what it returns if it
// has a Close method.
type Factory func(t *testing.T, quota int, period time.Duration) limiters.Limiter

// Options tune the suite to a backend.
type Options struct {
	// Resolution is the finest time step the limiter tells apart; zero
	// means one nanosecond (in-memory limiters). RetryAfter is checked to
	// be tight to within it.
	Resolution time.Duration
}

const (
	quota  = 5
	period = 10 * time.Second
)

// t0 is an arbitrary instant well inside a 10s window, so that window
// edges do not interfere with tests that do not ask for one.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// Run runs the suite against the limiters newLimiter returns.
func Run(t *testing.T, newLimiter Factory, o Options) {
	if o.Resolution <= 0 {
		o.Resolution = time.Nanosecond
	}
	s := suite{newLimiter: newLimiter, o: o}
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"QuotaAtOneInstant", s.quotaAtOneInstant},
		{"UsersIsolated", s.usersIsolated},
		{"ConcurrentOneKeyExact", s.concurrentOneKeyExact},
		{"ConcurrentManyKeysExact", s.concurrentManyKeysExact},
		{"ClockBackwardsMintsNothing", s.clockBackwards},
		{"CostAboveLimit", s.costAboveLimit},
		{"CostBelowOne", s.costBelowOne},
		{"DenialConsumesNothing", s.denialConsumesNothing},
		{"RetryAfter", s.retryAfter},
		{"ResetAfter", s.resetAfter},
		{"RemainingBounds", s.remainingBounds},
		{"Peek", s.peek},
		{"Reset", s.reset},
		{"ResetAll", s.resetAll},
		{"Walk", s.walk},
		{"AllowNNow", s.allowNNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}

type suite struct {
	newLimiter Factory
	o          Options
}

// limiter is what the suite drives: a limiter that decides and peeks at
// explicit times, failing the test on any error but ErrInvalidCost (a
// cost below one, which the suite asks for). A decision that failed is
// the failure mode's (a remote backend's timeout admits or refuses by its
// setting), not the algorithm's: counted as the algorithm's, it made a
// key under load admit 6 where 5 is exact.
type limiter struct {
	limiters.Limiter
	limiters.Peeker
	t *testing.T
}

// AllowAt decides n events for key at at.
func (l limiter) AllowAt(key string, at time.Time, n int) limiters.Decision {
	l.t.Helper()
	d, err := l.Decide(context.Background(), limiters.Request{Key: key, N: n, At: at})
	l.check(err, "AllowAt(%q, %s, %d)", key, stamp(at), n)
	return d
}

// PeekAt peeks at key's state at at.
func (l limiter) PeekAt(key string, at time.Time) limiters.Decision {
	l.t.Helper()
	d, err := l.Peek(context.Background(), limiters.Request{Key: key, N: 1, At: at})
	l.check(err, "PeekAt(%q, %s)", key, stamp(at))
	return d
}

// check fails the test (from any goroutine) if err is an error other than
// ErrInvalidCost, naming the call.
func (l limiter) check(err error, call string, args ...any) {
	l.t.Helper()
	if err != nil && !errors.Is(err, limiters.ErrInvalidCost) {
		l.t.Errorf("%s: %v", fmt.Sprintf(call, args...), err)
	}
}

func (s suite) limiter(t *testing.T) limiter {
	t.Helper()
	l := s.newLimiter(t, quota, period)
	p, ok := l.(limiters.Peeker)
	if !ok {
		t.Fatalf("%T is not a limiters.Peeker", l)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return limiter{l, p, t}
}

// allow calls AllowAt and checks what holds for every decision.
func allow(t *testing.T, l limiter, key string, at time.Time, n int) limiters.Decision {
	t.Helper()
	d := l.AllowAt(key, at, n)
	checkDecision(t, fmt.Sprintf("AllowAt(%q, %s, %d)", key, stamp(at), n), d)
	return d
}

func checkDecision(t *testing.T, call string, d limiters.Decision) {
	t.Helper()
	if d.Limit != quota {
		t.Errorf("%s.Limit = %d, want %d", call, d.Limit, quota)
	}
	if d.Remaining < 0 || d.Remaining > d.Limit {
		t.Errorf("%s.Remaining = %d, want within [0, %d]", call, d.Remaining, d.Limit)
	}
	if d.Allowed && d.RetryAfter != 0 {
		t.Errorf("%s.RetryAfter = %v on an admitted request, want 0", call, d.RetryAfter)
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		t.Errorf("%s.RetryAfter = %v on a denial, want > 0", call, d.RetryAfter)
	}
	if d.ResetAfter < 0 {
		t.Errorf("%s.ResetAfter = %v, want >= 0", call, d.ResetAfter)
	}
	if d.Allowed && d.ResetAfter == 0 {
		t.Errorf("%s.ResetAfter = 0 right after consuming, want > 0", call)
	}
	// A limiter that says its policy says which limit denied, and none on
	// an admission.
	if _, by := d.DeniedBy(); d.Policy != nil && by == d.Allowed {
		t.Errorf("%s: Allowed %v and Denied %#x (Policy %+v): want a denying limit exactly when denied", call, d.Allowed, d.Denied, *d.Policy)
	}
}

// stamp names an instant relative to t0, for messages.
func stamp(at time.Time) string {
	d := at.Sub(t0)
	if d >= 0 {
		return "t0+" + d.String()
	}
	return "t0-" + (-d).String()
}

// spend admits k unit requests for key at at, failing if any is denied.
func spend(t *testing.T, l limiter, key string, at time.Time, k int) {
	t.Helper()
	for i := range k {
		if d := allow(t, l, key, at, 1); !d.Allowed {
			t.Fatalf("AllowAt(%q, %s, 1) #%d: Allowed = false, want true (%+v)", key, stamp(at), i+1, d)
		}
	}
}

func denied(t *testing.T, l limiter, key string, at time.Time, n int) limiters.Decision {
	t.Helper()
	d := allow(t, l, key, at, n)
	if d.Allowed {
		t.Fatalf("AllowAt(%q, %s, %d).Allowed = true, want false (%+v)", key, stamp(at), n, d)
	}
	return d
}

func (s suite) quotaAtOneInstant(t *testing.T) {
	l := s.limiter(t)
	for i := range quota {
		d := allow(t, l, "k", t0, 1)
		if !d.Allowed {
			t.Fatalf("request %d of %d: Allowed = false, want true", i+1, quota)
		}
		if want := quota - i - 1; d.Remaining != want {
			t.Errorf("request %d: Remaining = %d, want %d", i+1, d.Remaining, want)
		}
	}
	denied(t, l, "k", t0, 1)
}

func (s suite) usersIsolated(t *testing.T) {
	l := s.limiter(t)
	spend(t, l, "alice", t0, quota)
	denied(t, l, "alice", t0, 1)
	// Bob is untouched by Alice's spending, and she by his.
	d := allow(t, l, "bob", t0, 1)
	if !d.Allowed || d.Remaining != quota-1 {
		t.Fatalf("bob after alice spent everything: %+v, want allowed with Remaining %d", d, quota-1)
	}
	spend(t, l, "bob", t0, quota-1)
	denied(t, l, "bob", t0, 1)
	denied(t, l, "alice", t0, 1)
	// Keys that differ in one byte, or are prefixes of each other, are
	// different keys.
	for _, k := range []string{"", "alic", "alice ", "Alice", "alice\x00"} {
		spend(t, l, k, t0, quota)
	}
}

// hammer runs goroutines that each try tries unit requests at t0 on one of
// keys, and returns what each key admitted.
func hammer(l limiter, keys []string, goroutines, tries int) []int64 {
	admitted := make([]atomic.Int64, len(keys))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range tries {
				k := (g + i) % len(keys)
				if l.AllowAt(keys[k], t0, 1).Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	out := make([]int64, len(keys))
	for i := range admitted {
		out[i] = admitted[i].Load()
	}
	return out
}

func (s suite) concurrentOneKeyExact(t *testing.T) {
	l := s.limiter(t)
	got := hammer(l, []string{"hot"}, 64, 50)
	if got[0] != quota {
		t.Fatalf("64 goroutines x 50 requests on one key at one instant admitted %d, want exactly %d", got[0], quota)
	}
}

func (s suite) concurrentManyKeysExact(t *testing.T) {
	l := s.limiter(t)
	keys := make([]string, 37)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	got := hammer(l, keys, 64, 200)
	for i, n := range got {
		if n != quota {
			t.Errorf("key %q admitted %d under 64 goroutines, want exactly %d", keys[i], n, quota)
		}
	}
}

func (s suite) clockBackwards(t *testing.T) {
	l := s.limiter(t)
	t1 := t0.Add(3 * period)
	spend(t, l, "k", t1, quota)
	// The clock steps back, by little and by a lot: nothing is minted.
	for _, back := range []time.Duration{time.Nanosecond, period / 7, period / 2, period, 3 * period, 1000 * period} {
		denied(t, l, "k", t1.Add(-back), 1)
	}
	// Back at t1 nothing was minted either.
	d := denied(t, l, "k", t1, 1)
	// And the clock coming forward again admits no sooner than it would
	// have without the detour.
	if d.RetryAfter > s.o.Resolution {
		denied(t, l, "k", t1.Add(d.RetryAfter-s.o.Resolution), 1)
	}
	allow(t, l, "k", t1.Add(d.RetryAfter), 1)
}

func (s suite) costAboveLimit(t *testing.T) {
	l := s.limiter(t)
	for _, n := range []int{quota + 1, 2 * quota, 1 << 30, int(^uint(0) >> 1)} {
		d := l.AllowAt("k", t0, n)
		if d.Allowed {
			t.Fatalf("AllowAt(k, t0, %d).Allowed = true with limit %d", n, quota)
		}
		if d.RetryAfter != limiters.Never {
			t.Errorf("AllowAt(k, t0, %d).RetryAfter = %v, want Never", n, d.RetryAfter)
		}
		if d.Remaining != quota {
			t.Errorf("AllowAt(k, t0, %d).Remaining = %d, want %d: an impossible request consumes nothing", n, d.Remaining, quota)
		}
	}
	// The whole quota is still there, and can be taken in one request.
	if d := allow(t, l, "k", t0, quota); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowAt(k, t0, %d) after impossible requests = %+v, want allowed with Remaining 0", quota, d)
	}
}

func (s suite) costBelowOne(t *testing.T) {
	l := s.limiter(t)
	for _, n := range []int{0, -1, -1 << 40} {
		if d := l.AllowAt("k", t0, n); d.Allowed {
			t.Fatalf("AllowAt(k, t0, %d).Allowed = true, want false", n)
		}
		if _, err := l.AllowN(context.Background(), "k", n); !errors.Is(err, limiters.ErrInvalidCost) {
			t.Errorf("AllowN(ctx, k, %d) error = %v, want ErrInvalidCost", n, err)
		}
	}
	spend(t, l, "k", t0, quota)
}

func (s suite) denialConsumesNothing(t *testing.T) {
	l := s.limiter(t)
	spend(t, l, "k", t0, quota-2)
	// Two left: a request for three is denied and takes none of them.
	for range 10 {
		denied(t, l, "k", t0, 3)
	}
	if d := allow(t, l, "k", t0, 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowAt(k, t0, 2) after denials = %+v, want allowed with Remaining 0", d)
	}
	// Denied requests on an empty key consume nothing either.
	for range 10 {
		denied(t, l, "k", t0, 1)
	}
	d := denied(t, l, "k", t0, 1)
	allow(t, l, "k", t0.Add(d.RetryAfter), 1)
}
