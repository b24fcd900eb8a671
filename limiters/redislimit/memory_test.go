package redislimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// randomLimit returns a limit for a: a quota of 1 to 12 over any whole
// number of nanoseconds from 1µs to 20s (from 1µs to 2000 days when long),
// so that windows do not align with seconds; a bucket's as a burst over
// an interval of whole nanoseconds.
func randomLimit(r *rand.Rand, a limiters.Algorithm, long bool) limiters.Limit {
	n := 1 + r.IntN(12)
	period := time.Microsecond + time.Duration(r.Int64N(int64(20*time.Second)))
	if long {
		period = time.Duration(r.Int64N(int64(redislimit.MaxPeriod)/int64(n))) + time.Microsecond
	}
	if a.IsBucket() {
		return limiters.Limit{N: 1, Per: period/time.Duration(n) + 1, Burst: n}
	}
	return limiters.Limit{N: n, Per: period}
}

// step is one call of a trace.
type step struct {
	key  string
	at   time.Time
	n    int
	peek bool
}

// randomTrace returns calls on a few keys at times that mostly move
// forward by fractions of the period, sometimes by many periods, and
// sometimes step back by less than a second (which the in-memory limiters
// decide the same way whether or not they have forgotten the key).
func randomTrace(r *rand.Rand, period time.Duration, limit, steps int) []step {
	// Start anywhere from 2001 to 2080, on any nanosecond, and stop before
	// 2106, the last year the Redis backend keeps.
	at := time.Unix(1e9+r.Int64N(2.5e9), r.Int64N(1e9))
	var out []step
	for range steps {
		switch p := r.Float64(); {
		case p < 0.3: // the same instant
		case p < 0.8:
			at = at.Add(time.Duration(r.Int64N(int64(period)/4 + 1)))
		case p < 0.93:
			at = at.Add(time.Duration(r.Int64N(3*int64(period) + 1)))
		case p < 0.97:
			at = at.Add(-time.Duration(r.Int64N(int64(min(period, time.Second)))))
		default:
			at = at.Add(time.Duration(r.Int64N(1000 * int64(period))))
		}
		if at.Year() > 2100 {
			break
		}
		n := 1
		if r.IntN(5) == 0 {
			n = 1 + r.IntN(limit+2)
		}
		out = append(out, step{key: fmt.Sprint("k", r.IntN(3)), at: at, n: n, peek: r.IntN(10) == 0})
	}
	return out
}

// TestSameAsMemory replays random traces through the Redis limiter and
// the in-memory one of every algorithm: every decision must be the same,
// field for field.
func TestSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			for trial := range 12 {
				lim := randomLimit(r, a, trial%4 == 3)
				mem, err := composite.New(a, []limiters.Limit{lim}, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := redislimit.New(c, a, []limiters.Limit{lim}, patient, redislimit.WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatalf("%v: %v", lim, err)
				}
				sameDecisions(t, lim.String(), mem, red, randomTrace(r, lim.Window(), lim.Quota(), 150))
			}
		})
	}
}

// decider is a limiter that peeks: the in-memory one and the Redis one.
type decider interface {
	limiters.Limiter
	limiters.Peeker
}

// sameDecisions replays trace through mem and red, and fails the test at
// the first decision they do not make the same, field for field.
func sameDecisions(t *testing.T, what string, mem, red decider, trace []step) {
	t.Helper()
	ctx := context.Background()
	for i, st := range trace {
		var want, got limiters.Decision
		var werr, gerr error
		if st.peek {
			want, werr = mem.Peek(ctx, at(st.key, st.at, st.n))
			got, gerr = red.Peek(ctx, at(st.key, st.at, st.n))
		} else {
			want, werr = mem.Decide(ctx, at(st.key, st.at, st.n))
			got, gerr = red.Decide(ctx, at(st.key, st.at, st.n))
		}
		if werr != nil || gerr != nil || !same(got, want) {
			t.Fatalf("%s, step %d of the trace (%s at %v, n=%d, peek %v):\n  redis  %s (%v)\n  memory %s (%v)",
				what, i, st.key, st.at.Format(time.RFC3339Nano), st.n, st.peek, show(got), gerr, show(want), werr)
		}
	}
}

// randomLimits returns k limits of 1 to 10 per 1ms to 1s a unit.
func randomLimits(r *rand.Rand, k int) []limiters.Limit {
	var limits []limiters.Limit
	for i := range k {
		n := 1 + r.IntN(10)
		per := time.Duration(n) * (time.Millisecond + time.Duration(r.Int64N(int64(time.Second))))
		limits = append(limits, limiters.Limit{Name: fmt.Sprint("l", i), N: n, Per: per})
	}
	return limits
}

// eachInMemory is what package composite decides under each limit, one
// in-memory limiter a limit: every limit is asked what it would decide,
// and charged only when all admit.
type eachInMemory []*composite.Limiter

func newEachInMemory(t *testing.T, a limiters.Algorithm, limits []limiters.Limit) eachInMemory {
	var m eachInMemory
	for _, lim := range limits {
		l, err := composite.New(a, []limiters.Limit{lim}, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		m = append(m, l)
	}
	return m
}

func (m eachInMemory) decide(r limiters.Request) []limiters.Decision {
	ctx := context.Background()
	each := make([]limiters.Decision, len(m))
	admit := true
	for i, l := range m {
		each[i], _ = l.Peek(ctx, r)
		admit = admit && each[i].Allowed
	}
	for i, l := range m {
		if admit {
			each[i], _ = l.Decide(ctx, r)
		}
		each[i].Policy, each[i].Denied = nil, 0
	}
	return each
}

// TestCompositeSameAsMemory does the same for several limits at once, and
// checks each limit's own decision, which the script reports and package
// composite makes, on every other step.
func TestCompositeSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(8, uint64(time.Now().UnixNano())))
	ctx := context.Background()
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			for range 6 {
				limits := randomLimits(r, 1+r.IntN(3))
				mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				each := newEachInMemory(t, a, limits)
				red, err := redislimit.New(c, a, limits, patient, redislimit.WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatal(err)
				}
				for i, st := range randomTrace(r, limits[0].Per, 10, 150) {
					req := at(st.key, st.at, st.n)
					want, _ := mem.Decide(ctx, req)
					wantEach := each.decide(req)
					var got limiters.Decision
					var gotEach []limiters.Decision
					if i%2 == 1 {
						got, gotEach, err = redislimit.DecideEach(ctx, red, req)
					} else {
						got, err = red.Decide(ctx, req)
						gotEach = wantEach
					}
					if err != nil {
						t.Fatal(err)
					}
					if !same(got, want) || fmt.Sprint(gotEach) != fmt.Sprint(wantEach) {
						t.Fatalf("%v, step %d (%s at %v, n=%d):\n  redis  %s, each %+v\n  memory %s, each %+v",
							limits, i, st.key, st.at.Format(time.RFC3339Nano), st.n, show(got), gotEach, show(want), wantEach)
					}
				}
			}
		})
	}
}
