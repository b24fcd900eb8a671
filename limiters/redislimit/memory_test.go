package redislimit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/memory"
)

// randomSpec returns parameters for a: a limit of 1 to 12 and a period
// of any whole number of nanoseconds from 1µs to 20s (from 1µs to 2000
// days when long), so that windows do not align with seconds.
func randomSpec(r *rand.Rand, a limiters.Algorithm, long bool) limiters.Spec {
	n := 1 + r.IntN(12)
	period := time.Microsecond + time.Duration(r.Int64N(int64(20*time.Second)))
	if long {
		period = time.Duration(r.Int64N(int64(MaxPeriod)/int64(n))) + time.Microsecond
	}
	if a.IsBucket() {
		return limiters.Spec{Algorithm: a, Bucket: limiters.Bucket{Capacity: n, Rate: 1e9 / float64(period/time.Duration(n)+1)}}
	}
	return limiters.Spec{Algorithm: a, Window: limiters.Window{Limit: n, Length: period}}
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
				s := randomSpec(r, a, trial%4 == 3)
				mem, err := memory.New(s, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := New(c, s, WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatalf("%v: %v", s, err)
				}
				sameDecisions(t, s.String(), mem, red, randomTrace(r, s.Judged().Length, s.Judged().Limit, 150))
			}
		})
	}
}

// sameDecisions replays trace through mem and red, and fails the test
// at the first decision they do not make the same, field for field.
func sameDecisions(t *testing.T, what string, mem memory.Limiter, red *Limiter, trace []step) {
	t.Helper()
	for i, st := range trace {
		var want, got limiters.Decision
		if st.peek {
			want, got = mem.PeekAtN(st.key, st.at, st.n), red.PeekAtN(st.key, st.at, st.n)
		} else {
			want, got = mem.AllowAt(st.key, st.at, st.n), red.AllowAt(st.key, st.at, st.n)
		}
		if got != want {
			t.Fatalf("%s, step %d of the trace (%s at %v, n=%d, peek %v):\n  redis  %+v\n  memory %+v", what, i, st.key, st.at.Format(time.RFC3339Nano), st.n, st.peek, got, want)
		}
	}
}

// randomLimits returns k limits of 1 to 10 per 1ms to 1s a unit.
func randomLimits(r *rand.Rand, k int) []composite.Limit {
	var limits []composite.Limit
	for i := range k {
		n := 1 + r.IntN(10)
		per := time.Duration(n) * (time.Millisecond + time.Duration(r.Int64N(int64(time.Second))))
		limits = append(limits, composite.Limit{Name: fmt.Sprint("l", i), Rate: limiters.Rate{N: n, Per: per}})
	}
	return limits
}

// TestCompositeSameAsMemory does the same for several limits at once.
func TestCompositeSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(8, uint64(time.Now().UnixNano())))
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			for range 6 {
				limits := randomLimits(r, 1+r.IntN(3))
				mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := NewComposite(c, a, limits, WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatal(err)
				}
				for i, st := range randomTrace(r, limits[0].Rate.Per, 10, 150) {
					// Every other step through DecideEach, each limit's
					// decision compared too.
					each := i%2 == 1
					var wantPer, gotPer []limiters.Decision
					if each {
						wantPer, gotPer = make([]limiters.Decision, len(limits)), make([]limiters.Decision, len(limits))
					}
					want, wantDenied := mem.DecideAt(st.key, st.at, st.n, wantPer)
					var got limiters.Decision
					var gotDenied int
					if each {
						got, gotDenied, err = red.DecideEach(t.Context(), st.key, st.at, st.n, gotPer)
					} else {
						got, gotDenied, err = red.DecideAt(t.Context(), st.key, st.at, st.n)
					}
					if err != nil {
						t.Fatal(err)
					}
					if got != want || gotDenied != wantDenied || !slices.Equal(gotPer, wantPer) {
						t.Fatalf("%v, step %d (%s at %v, n=%d):\n  redis  %+v denied by %d, each %+v\n  memory %+v denied by %d, each %+v",
							limits, i, st.key, st.at.Format(time.RFC3339Nano), st.n, got, gotDenied, gotPer, want, wantDenied, wantPer)
					}
				}
			}
		})
	}
}
