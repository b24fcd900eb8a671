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
// explicit times.
type limiter struct {
	limiters.Limiter
	limiters.Peeker
}

// AllowAt decides n events for key at at.
func (l limiter) AllowAt(key string, at time.Time, n int) limiters.Decision {
	d, _ := l.Decide(context.Background(), limiters.Request{Key: key, N: n, At: at})
	return d
}

// PeekAt peeks at key's state at at.
func (l limiter) PeekAt(key string, at time.Time) limiters.Decision {
	d, _ := l.Peek(context.Background(), limiters.Request{Key: key, N: 1, At: at})
	return d
}

func (s suite) limiter(t *testing.T) limiter {
	t.Helper()
	l := s.newLimiter(t, quota, period)
	p, ok := l.(limiters.Peeker)
	if !ok {
		t.Fatalf("%T is not a limiters.Peeker", l)
	}
	if c, ok := l.(interface{ Close() error }); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return limiter{l, p}
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
