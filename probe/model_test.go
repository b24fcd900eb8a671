package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// The models' exact variants decide as the in-memory limiters do, on
// random traces: bursts, quiet spells and costs of 1 to 3, at limits from
// one a window to a hundred, so that the fit's fourth copy of the
// algorithms cannot drift from the library's.
func TestModelsAgree(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, uint64(len(a))))
			limit := limiters.Limit{N: 1 + rng.IntN(100), Per: time.Duration(1+rng.IntN(5000)) * time.Millisecond}
			if a.IsBucket() {
				limit.Burst = 1 + rng.IntN(2*limit.N)
			}
			if limit.Validate(a) != nil {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", a, limit), func(t *testing.T) {
				modelAgrees(t, rng, model{Algorithm: a, Limit: limit})
			})
		}
	}
}

func modelAgrees(t *testing.T, rng *rand.Rand, m model) {
	l, err := composite.New(m.Algorithm, []limiters.Limit{m.Limit}, limiters.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := m.newState()
	at := time.Unix(1_800_000_000, 0).Add(time.Duration(rng.Int64N(int64(m.Limit.Per))))
	step := max(m.Limit.Interval()/2, time.Nanosecond)
	for i := range 2000 {
		switch r := rng.IntN(10); {
		case r == 0: // a quiet spell, up to two windows
			at = at.Add(time.Duration(rng.Int64N(2 * int64(m.Limit.Window()))))
		case r < 4: // back to back
		default:
			at = at.Add(time.Duration(rng.Int64N(int64(2 * step))))
		}
		n := 1 + rng.IntN(3)
		d, err := l.Decide(context.Background(), limiters.Request{Key: "k", N: n, At: at})
		if err != nil {
			t.Fatal(err)
		}
		ns := at.UnixNano()
		if got := st.admits(ns, n); got != d.Allowed {
			t.Fatalf("decision %d at %v (cost %d): the model admits = %v, the limiter %v", i, at.Sub(time.Unix(1_800_000_000, 0)), n, got, d.Allowed)
		}
		if d.Allowed {
			st.admit(ns, n)
		} else {
			st.refuse(ns, n)
		}
	}
}

// The variants real implementations use, step by step, each against the
// plain model of its algorithm at the same instants.
func TestVariants(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UnixNano() // on a window's edge for these limits
	ms := func(n int64) int64 { return t0 + n*int64(time.Millisecond) }
	type step struct {
		at   int64
		n    int
		want bool
	}
	for _, tt := range []struct {
		name  string
		m     model
		steps []step
	}{
		{"anchored fixed window: the window starts at the first request", model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 2, Per: time.Second}, Anchored: true}, []step{
			{ms(600), 1, true}, {ms(1100), 1, true}, {ms(1200), 1, false}, // epoch's edge at 1000 does not free it
			{ms(1599), 1, false}, {ms(1600), 1, true}, // 600+1000: the next window
		}},
		{"a refusal restarts the window", model{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 2, Per: time.Second}, Anchored: true, CountsRefused: true, Restarts: true}, []step{
			{ms(0), 1, true}, {ms(10), 1, true}, {ms(500), 1, false}, // restarts at 500
			{ms(1200), 1, false}, // would be free from 1000; restarts at 1200
			{ms(2199), 1, false}, // restarts again
			{ms(3199), 1, true},  // quiet for a window
		}},
		{"sliding log, refusals counted", model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 2, Per: time.Second}, CountsRefused: true}, []step{
			{ms(0), 1, true}, {ms(100), 1, true}, {ms(500), 1, false},
			{ms(1050), 1, false}, // 0 expired, but 100 and the refusal at 500 are live
			{ms(1600), 1, true},  // only the refusal at 1050 is live
		}},
		{"sliding log, whole seconds", model{Algorithm: limiters.SlidingLog, Limit: limiters.Limit{N: 1, Per: time.Second}, Seconds: true}, []step{
			{ms(900), 1, true}, {ms(1000), 1, true}, // 900 is second 0, expired at second 1
			{ms(1999), 1, false}, {ms(2000), 1, true},
		}},
		{"sliding counter, weighted count rounded", model{Algorithm: limiters.SlidingCounter, Limit: limiters.Limit{N: 10, Per: time.Second}, Rounding: rounded}, []step{
			{ms(500), 10, true}, // the first window full
			// at 1040: 10·0.96 = 9.6 rounds to 10: refused; exact 9.6 + 1 > 10 refused too
			{ms(1040), 1, false},
			// at 1060: 9.4 rounds to 9: admitted (exact: 10.4 > 10, refused)
			{ms(1060), 1, true},
		}},
		{"sliding counter, weighted count truncated", model{Algorithm: limiters.SlidingCounter, Limit: limiters.Limit{N: 10, Per: time.Second}, Rounding: truncated}, []step{
			{ms(500), 10, true},
			{ms(1001), 1, true}, // 9.99 truncates to 9
			{ms(1002), 1, false},
		}},
		{"sliding counter, exact", model{Algorithm: limiters.SlidingCounter, Limit: limiters.Limit{N: 10, Per: time.Second}}, []step{
			{ms(500), 10, true},
			{ms(1060), 1, false}, // 9.4 + 1 > 10
			{ms(1100), 1, true},  // 9.0 + 1
		}},
		{"bucket, refusals counted: the debt runs on", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 1}, CountsRefused: true}, []step{
			{ms(0), 1, true}, {ms(50), 1, false}, // tat 100, then 200
			{ms(150), 1, false}, // tat 300
			{ms(300), 1, true},
		}},
		// limit_req rate=40r/m burst=39: 40 at once on a fresh key, then
		// 666 thousandths a second (40000/60 rounded down), refilled from
		// the last admission's millisecond: 1.5s gives 999, not a request.
		{"nginx's clock: a minute's zone", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 40, Per: time.Minute, Burst: 40}, Nginx: true}, append(slices.Repeat([]step{{ms(0), 1, true}}, 40),
			step{ms(1), 1, false}, step{ms(1500), 1, false}, // a plain bucket admits at 1500
			step{ms(1502), 1, true},                           // 666·1502/1000 = 1000
			step{ms(3003), 1, false}, step{ms(3004), 1, true}, // from 1502 again: 999 at 3003
		)},
		{"nginx's clock: whole milliseconds", model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 1}, Nginx: true}, []step{
			{ms(0) + 900_000, 1, true},   // millisecond 0
			{ms(100) + 100_000, 1, true}, // millisecond 100: 100ms on nginx's clock, 99.2 on ours
			{ms(199) + 999_999, 1, false},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); err != nil {
				t.Fatal(err)
			}
			st := tt.m.newState()
			for i, s := range tt.steps {
				got := st.admits(s.at, s.n)
				if got != s.want {
					t.Errorf("step %d: %s admits %d at +%v = %v, want %v", i, tt.m, s.n, time.Duration(s.at-t0), got, s.want)
				}
				if got {
					st.admit(s.at, s.n)
				} else {
					st.refuse(s.at, s.n)
				}
			}
		})
	}
}
