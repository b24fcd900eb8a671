package probe

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// observeModel has model m decide sends as a server behind a network
// would: each request reaches it up to a millisecond after it was sent
// (in that order, which need not be the order sent), and its answer takes
// up to a millisecond more to come back. It is observe for the variants
// no in-memory limiter has.
func observeModel(rng *rand.Rand, m model, sends []send) []observation {
	type arrival struct {
		i  int
		at time.Time
	}
	arrivals := make([]arrival, len(sends))
	for i, s := range sends {
		arrivals[i] = arrival{i, s.at.Add(time.Duration(rng.Int64N(int64(time.Millisecond))))}
	}
	slices.SortStableFunc(arrivals, func(a, b arrival) int { return a.at.Compare(b.at) })
	states := map[string]state{}
	obs := make([]observation, len(sends))
	for _, r := range arrivals {
		s := sends[r.i]
		st, ok := states[s.key]
		if !ok {
			st = m.newState()
			states[s.key] = st
		}
		t := r.at.UnixNano()
		admitted := st.admits(t, 1)
		if admitted {
			st.admit(t, 1)
		} else {
			st.refuse(t, 1)
		}
		obs[r.i] = observation{Key: s.key, N: 1, Sent: s.at, Received: r.at.Add(time.Duration(rng.Int64N(int64(time.Millisecond)))), Admitted: admitted}
	}
	return obs
}

// fingerprintSends is the probe's fingerprint for limit, from t0.
func fingerprintSends(rng *rand.Rand, limit limiters.Limit) []send {
	var out []send
	for _, r := range fingerprintPlan(rng, "", limit, t0) {
		out = append(out, send{r.Key, t0.Add(r.At)})
	}
	return out
}

// The fit, given only rough quotas and times (as a calibration gives
// them), finds each model among every family and variant: its family,
// its variant and its limit among those that explain every decision of
// the fingerprint. (Which of those it names is for the rounds of
// experiments to settle: the fingerprint alone does not tell a target that
// counts refusals from one that does not when both keep refusing;
// TestProbeSimulated runs the whole probe.)
func TestFitFindsEachVariant(t *testing.T) {
	for _, a := range families {
		for _, v := range allVariants(a) {
			limit := limiters.Limit{N: 20, Per: 2 * time.Second}
			if a.IsBucket() {
				limit = limiters.Limit{N: 10, Per: time.Second, Burst: 6}
			}
			m := v
			m.Limit = limit
			t.Run(m.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(len(m.String()))))
				obs := observeModel(rng, m, fingerprintSends(rng, limiters.Limit{N: limit.Quota(), Per: limit.Window()}))
				g := guess{quotas: []int{limit.Quota() + 1}, windows: span{limit.Window() * 3 / 4, limit.Window() * 5 / 4}, intervals: span{limit.Interval() * 3 / 4, limit.Interval() * 5 / 4}}
				s := fit(obs, g)
				all := s.within(1)
				found := slices.ContainsFunc(all, func(e explanation) bool {
					return e.Model.Family() == m.Family() && !differs(e.Model, m) && slices.Equal(e.Model.variants(), m.variants())
				})
				if !found {
					t.Errorf("%s is not among the %d models that explain every decision (of %d tried); the best: %s", m, len(all), len(s.tried), s.best()[0].Model)
				}
			})
		}
	}
}

// A fit stops trying models at its guess's until, and says it stopped:
// one whose until has passed tries none and is cut; the same with no
// until tries every model it would and is not.
func TestFitStopsAtUntil(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	m := model{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 10, Per: time.Second, Burst: 8}}
	obs := observeModel(rng, m, fingerprintSends(rng, m.Limit))
	g := guess{quotas: []int{8}, windows: span{time.Second / 2, 2 * time.Second}, intervals: span{50 * time.Millisecond, 200 * time.Millisecond}}
	whole := fit(obs, g)
	if whole.cut || len(whole.tried) == 0 {
		t.Fatalf("no until: cut %v after %d models", whole.cut, len(whole.tried))
	}
	g.until = time.Now().Add(-time.Second)
	stopped := fit(obs, g)
	if !stopped.cut || len(stopped.tried) != 0 {
		t.Errorf("until passed: cut %v after %d models, want cut after none", stopped.cut, len(stopped.tried))
	}
}
