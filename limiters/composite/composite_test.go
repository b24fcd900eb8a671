package composite_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/limitertest"
)

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func rate(t *testing.T, s string) limiters.Limit {
	t.Helper()
	r, err := limiters.ParseLimit(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newComposite(t *testing.T, a limiters.Algorithm, rates ...string) *composite.Limiter {
	t.Helper()
	var limits []limiters.Limit
	for _, s := range rates {
		limits = append(limits, rate(t, s))
	}
	l, err := composite.New(a, limits, limiters.WithKeyNames())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Every algorithm, one limit that binds and one that does not: the
// composite keeps the whole limiter contract.
func TestConformance(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			limitertest.Run(t, func(t *testing.T, quota int, period time.Duration) limiters.Limiter {
				tight := limiters.Limit{N: quota, Per: period}
				loose := limiters.Limit{N: 1000 * quota, Per: period}
				l, err := composite.New(a, []limiters.Limit{loose, tight}, limiters.WithKeyNames())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}, limitertest.Options{})
		})
	}
}

// The seed's "2 per second and 3 per minute", step by step.
func TestSteps(t *testing.T) {
	l := newComposite(t, limiters.SlidingLog, "2/s", "3/min")
	per := make([]limiters.Decision, 2)
	for _, step := range []struct {
		at       time.Duration
		allowed  bool
		denied   int // which limit denied, -1 for none
		retry    time.Duration
		second   int // the per-second limit's Remaining
		minute   int // the per-minute limit's Remaining
		combined int
	}{
		{0, true, -1, 0, 1, 2, 1},
		{0, true, -1, 0, 0, 1, 0},
		{0, false, 0, time.Second, 0, 1, 0}, // the second is spent; the minute keeps its 1
		{time.Second, true, -1, 0, 1, 0, 0}, // a new second, the minute's last
		{2 * time.Second, false, 1, 58 * time.Second, // the minute is spent: the second's quota is not touched
			2, 0, 0},
		{3 * time.Second, false, 1, 57 * time.Second, 2, 0, 0},
	} {
		d, denied := decideAt(l, "alice", t0.Add(step.at), 1, per)
		if d.Allowed != step.allowed || denied != step.denied || d.RetryAfter != step.retry ||
			per[0].Remaining != step.second || per[1].Remaining != step.minute || d.Remaining != step.combined {
			t.Errorf("DecideAt(alice, t0+%v, 1) = %+v denied by %d, per-limit remaining %d and %d; want allowed %v, denied by %d, retry %v, remaining %d (%d and %d)",
				step.at, d, denied, per[0].Remaining, per[1].Remaining, step.allowed, step.denied, step.retry, step.combined, step.second, step.minute)
		}
	}
	ctx := t.Context()
	// The combined quota is the most restrictive limit's: the minute's.
	if d, err := l.Peek(ctx, limiters.Request{Key: "alice", N: 1, At: t0.Add(3 * time.Second)}); err != nil || d.Limit != 3 || d.Remaining != 0 || d.Allowed {
		t.Errorf("Peek(alice, t0+3s) = %+v, %v, want denied, the minute's limit 3 with 0 remaining", d, err)
	}
	// At t0+60s the first two have left the minute: one more.
	if d, err := l.Decide(ctx, limiters.Request{Key: "alice", N: 1, At: t0.Add(60 * time.Second)}); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("Decide(alice, t0+60s, 1) = %+v, %v, want allowed with 1 remaining", d, err)
	}
}

// The model: a request is admitted exactly when every limit, having seen
// only the requests the composite admitted, would admit it; its
// RetryAfter is the longest of theirs. The oracle replays each limit from
// scratch, so it needs no peek and cannot share a bug with DecideAt.
func TestModel(t *testing.T) {
	rates := []string{"3/s", "7/10s", "10/min"}
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(a)), 42))
			ctx := t.Context()
			for trace := range 20 {
				l := newComposite(t, a, rates...)
				var admitted []limiters.Request
				at := t0
				for i := range 120 {
					at = at.Add(time.Duration(rng.ExpFloat64() * float64(400*time.Millisecond)))
					r := limiters.Request{Key: fmt.Sprint("k", rng.IntN(3)), N: 1 + rng.IntN(3), At: at}
					want, retry := true, time.Duration(0)
					for _, s := range rates {
						ref, err := composite.New(a, []limiters.Limit{rate(t, s)})
						if err != nil {
							t.Fatal(err)
						}
						for _, p := range admitted {
							if p.Key == r.Key {
								if _, err := ref.Decide(ctx, p); err != nil {
									t.Fatal(err)
								}
							}
						}
						d, err := ref.Decide(ctx, r)
						if err != nil {
							t.Fatal(err)
						}
						if !d.Allowed {
							want, retry = false, max(retry, d.RetryAfter)
						}
						ref.Close()
					}
					got, err := l.Decide(ctx, r)
					if err != nil || got.Allowed != want || got.RetryAfter != retry {
						t.Fatalf("trace %d, request %d: Decide(%s, t0+%v, %d) = allowed %v retry %v (%v), want %v and %v",
							trace, i, r.Key, r.At.Sub(t0), r.N, got.Allowed, got.RetryAfter, err, want, retry)
					}
					if want {
						admitted = append(admitted, r)
					}
				}
			}
		})
	}
}

// Many goroutines on one key: exactly the tightest limit's quota is
// admitted, and every limit consumed exactly that much.
func TestConcurrentAllOrNothing(t *testing.T) {
	ctx := t.Context()
	hot := limiters.Request{Key: "hot", N: 1, At: t0}
	for _, a := range []limiters.Algorithm{limiters.FixedWindow, limiters.SlidingCounter, limiters.GCRA} {
		l := newComposite(t, a, "100/h", "250/day", "150/h")
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := 0
		for range 64 {
			wg.Go(func() {
				n := 0
				for range 20 {
					d, err := l.Decide(ctx, hot)
					if err != nil {
						t.Error(err)
					}
					if d.Allowed {
						n++
					}
				}
				mu.Lock()
				admitted += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if admitted != 100 {
			t.Errorf("%s: %d admitted, want 100", a, admitted)
		}
		for i, want := range []int{0, 150, 50} {
			if p, err := composite.Inner(l, i).Peek(ctx, hot); err != nil || p.Remaining != want {
				t.Errorf("%s: limit %s has %d remaining (%v), want %d: each limit consumed %d", a, l.Limits()[i].Name, p.Remaining, err, want, 100)
			}
		}
	}
}

// A denied costly request consumes nothing anywhere, even from the limits
// that would have admitted it.
func TestDenialConsumesFromNone(t *testing.T) {
	l := newComposite(t, limiters.TokenBucket, "10/s burst 20", "30/min")
	ctx := t.Context()
	if d, err := l.Decide(ctx, limiters.Request{Key: "bob", N: 15, At: t0}); err != nil || !d.Allowed || d.Remaining != 5 {
		t.Fatalf("Decide(bob, t0, 15) = %+v, %v, want allowed, 5 remaining (of the burst of 20)", d, err)
	}
	per := make([]limiters.Decision, 2)
	d, denied := decideAt(l, "bob", t0, 10, per) // the burst has 5, the minute 15
	if d.Allowed || denied != 0 || d.RetryAfter != 500*time.Millisecond {
		t.Errorf("DecideAt(bob, t0, 10) = %+v, denied by %d, want denied by the burst, retry 500ms", d, denied)
	}
	if per[1].Remaining != 15 || !per[1].Allowed {
		t.Errorf("the minute limit after the denial: %+v, want 15 remaining, untouched", per[1])
	}
	if p, err := composite.Inner(l, 1).Peek(ctx, limiters.Request{Key: "bob", N: 1, At: t0}); err != nil || p.Remaining != 15 {
		t.Errorf("the minute limit holds %d (%v), want 15", p.Remaining, err)
	}
}

func TestNewRefuses(t *testing.T) {
	r := func(s string) limiters.Limit { return rate(t, s) }
	many := make([]limiters.Limit, composite.MaxLimits+1)
	for i := range many {
		many[i] = limiters.Limit{Name: fmt.Sprint(i), N: i + 1, Per: time.Second}
	}
	for _, tt := range []struct {
		a      limiters.Algorithm
		limits []limiters.Limit
		says   string
	}{
		{limiters.GCRA, nil, "want 1 to 8 limits, got 0"},
		{limiters.GCRA, many, "want 1 to 8 limits, got 9"},
		{limiters.SlidingLog, []limiters.Limit{r("10/s"), r("10/s")}, `limits 1 and 2 are both named "10/s"`},
		{limiters.FixedWindow, []limiters.Limit{r("10/min"), r("10/s burst 20")}, "limit 2 (10/s burst 20): 10/s burst 20 for fixed-window: limiters: invalid parameter: fixed-window has no burst"},
		{limiters.GCRA, []limiters.Limit{r("1/s"), {Name: "fast", N: 3, Per: time.Nanosecond}}, "limit 2 (fast): 3/1ns for gcra"},
		{limiters.GCRA, []limiters.Limit{{Name: "fast", N: 3, Per: time.Nanosecond}}, "composite: limit 1 (fast): 3/1ns for gcra"},
		{"magic", []limiters.Limit{r("1/s")}, "unknown algorithm"},
	} {
		_, err := composite.New(tt.a, tt.limits)
		if !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("composite.New(%s, %d limits) = %v, want ErrInvalidParameter saying %q", tt.a, len(tt.limits), err, tt.says)
		}
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	l := newComposite(t, limiters.GCRA, "10/s", "100/min", "1000/h")
	per := make([]limiters.Decision, 3)
	at := t0
	ctx := t.Context()
	l.Decide(ctx, limiters.Request{Key: "k", N: 1, At: at})
	if n := testing.AllocsPerRun(1000, func() {
		at = at.Add(time.Millisecond)
		composite.DecideEach(l, limiters.Request{Key: "k", N: 1, At: at}, per)
		l.Decide(ctx, limiters.Request{Key: "k", N: 1, At: at})
		l.Peek(ctx, limiters.Request{Key: "k", N: 1, At: at})
	}); n != 0 {
		t.Errorf("%v allocations a decision, want 0", n)
	}
}

// Peek, which the composite asks before it charges anything, tells
// exactly what Decide then decides, for every algorithm, on random
// traces with costs above the limits and times stepping back.
func TestPeekAgreesWithDecide(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		l, err := composite.New(a, []limiters.Limit{rate(t, "5/2s")})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(len(a))))
		ctx := t.Context()
		at := t0
		for i := range 3000 {
			at = at.Add(time.Duration(rng.IntN(700)-100) * time.Millisecond)
			key, n := fmt.Sprint("k", rng.IntN(3)), 1+rng.IntN(7)
			r := limiters.Request{Key: key, N: n, At: at}
			peek, err := l.Peek(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Decide(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if peek.Allowed != got.Allowed || peek.RetryAfter != got.RetryAfter || peek.Denied != got.Denied {
				t.Fatalf("%s, request %d: Peek(%s, t0+%v, %d) = %+v, Decide then = %+v", a, i, key, at.Sub(t0), n, peek, got)
			}
		}
		l.Close()
	}
}

// Keys evicted by other keys' traffic (WithMaxKeys) between the calls of
// one decision: a denial still charges nothing, and says who denied.
func TestEvictionNeverChargesADenial(t *testing.T) {
	l, err := composite.New(limiters.FixedWindow, []limiters.Limit{rate(t, "1/h"), rate(t, "1000/h"), rate(t, "999/h")}, limiters.WithMaxKeys(64))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	var bad sync.Map
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				key := fmt.Sprint("repeat", g%2, i%8)
				if g >= 2 {
					key = fmt.Sprint("fresh", g, i)
				}
				d, denied := decideAt(l, key, t0, 1, nil)
				if d.Allowed != (denied < 0) || !d.Allowed && d.RetryAfter <= 0 {
					bad.Store(key, fmt.Sprintf("%+v denied by %d", d, denied))
				}
			}
		})
	}
	wg.Wait()
	bad.Range(func(k, v any) bool {
		t.Errorf("%s: %s", k, v)
		return false
	})
}

func TestWalkNeedsKeyNames(t *testing.T) {
	l, err := composite.New(limiters.GCRA, []limiters.Limit{rate(t, "1/s"), rate(t, "10/min")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Decide(t.Context(), limiters.Request{Key: "k", N: 1, At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Walk(t.Context(), func(string, limiters.Decision) bool { return true }); err == nil || !strings.Contains(err.Error(), "WithKeyNames") {
		t.Errorf("Walk without key names = %v", err)
	}
}

// Reserving and settling under several limits is reserving and settling
// under each: the same trace of reservations, refunds, charges past the
// limits and cancels, through the composite and through one limiter a
// limit, gives the same decisions (all or nothing; the least Remaining).
func TestSettleIsEachLimits(t *testing.T) {
	rates := []string{"3/s", "7/10s", "10/min"}
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(a)), 7))
			ctx := t.Context()
			l := newComposite(t, a, rates...)
			var each []*composite.Limiter
			for _, s := range rates {
				m, err := composite.New(a, []limiters.Limit{rate(t, s)})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				each = append(each, m)
			}
			type held struct {
				r    limiters.Reservation
				each []limiters.Reservation
			}
			var open []held
			at := t0
			settled := 0
			for i := range 400 {
				at = at.Add(time.Duration(rng.ExpFloat64() * float64(300*time.Millisecond)))
				key := fmt.Sprint("k", rng.IntN(2))
				if len(open) > 0 && rng.IntN(3) == 0 {
					j := rng.IntN(len(open))
					h := open[j]
					open = append(open[:j], open[j+1:]...)
					actual := rng.IntN(3 * h.r.Cost())
					got, err := l.Settle(ctx, limiters.Settlement{Reservation: h.r, Actual: actual, At: at})
					if err != nil {
						t.Fatal(err)
					}
					want, admit := limiters.Decision{Remaining: 1 << 30}, true
					for k, m := range each {
						d, err := m.Settle(ctx, limiters.Settlement{Reservation: h.each[k], Actual: actual, At: at})
						if err != nil {
							t.Fatal(err)
						}
						want.Remaining, admit = min(want.Remaining, d.Remaining), admit && d.Allowed
					}
					if got.Allowed != admit || got.Remaining != want.Remaining {
						t.Fatalf("step %d: Settle(%s reserved %d, t0+%v, %d) = %+v, each limit says allowed %v, remaining %d",
							i, h.r.Key(), h.r.Cost(), at.Sub(t0), actual, got, admit, want.Remaining)
					}
					settled++
					continue
				}
				req := limiters.Request{Key: key, N: 1 + rng.IntN(3), At: at}
				r, err := l.Reserve(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				admit := true
				for _, m := range each {
					p, err := m.Peek(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					admit = admit && p.Allowed
				}
				if r.Allowed() != admit {
					t.Fatalf("step %d: Reserve(%s, t0+%v, %d).Allowed() = %v, each limit says %v", i, key, at.Sub(t0), req.N, r.Allowed(), admit)
				}
				if !admit {
					continue
				}
				h := held{r: r}
				for _, m := range each {
					mr, err := m.Reserve(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					h.each = append(h.each, mr)
				}
				open = append(open, h)
			}
			if settled < 20 {
				t.Fatalf("fixture: %d settles", settled)
			}
			// A reservation of another limiter, even of one of the same
			// limits, is refused.
			fresh := limiters.Request{Key: "fresh", N: 1, At: at}
			r, err := each[0].Reserve(ctx, fresh)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0, At: at}); !errors.Is(err, limiters.ErrNotReserved) {
				t.Errorf("another limiter's reservation: %v, want ErrNotReserved", err)
			}
			if r, err = newComposite(t, a, rates...).Reserve(ctx, fresh); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0, At: at}); !errors.Is(err, limiters.ErrNotReserved) {
				t.Errorf("another composite's reservation: %v, want ErrNotReserved", err)
			}
		})
	}
}

// decideAt decides with each limit's decision in per (when it has room)
// and returns which limit denied: -1 for none.
func decideAt(l *composite.Limiter, key string, at time.Time, n int, per []limiters.Decision) (limiters.Decision, int) {
	if len(per) < len(l.Limits()) {
		per = make([]limiters.Decision, len(l.Limits()))
	}
	d, _ := composite.DecideEach(l, limiters.Request{Key: key, N: n, At: at}, per)
	by, ok := d.Denied.Longest()
	if !ok {
		by = -1
	}
	return d, by
}
