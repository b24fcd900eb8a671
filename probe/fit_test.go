package probe

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// t0 is a second boundary, so that the traffic below meets the epoch's
// windows where it means to.
var t0 = time.Unix(1_800_000_000, 0)

// send is a request the traffic below makes: for key, of cost 1, sent at.
type send struct {
	key string
	at  time.Time
}

// traffic is what a probe sends to tell the families apart, for a limit
// of n per per: on a fresh key, 2n back to back (the burst); on another,
// paced at one and a half times the rate with jitter (the sustained
// rate); on a third, n/2 in the middle of a window and then n just before
// and n just after the next edge (what separates a fixed window from a
// sliding one, and an epoch-aligned window from an anchored one); on a
// fourth, the edge attack repeated.
func traffic(rng *rand.Rand, n int, per time.Duration) []send {
	var out []send
	at := func(key string, t time.Time) { out = append(out, send{key, t}) }
	gap := time.Millisecond / 10
	for i := range 2 * n {
		at("burst", t0.Add(per/4+time.Duration(i)*gap))
	}
	interval := per / time.Duration(n)
	t := t0
	for t.Before(t0.Add(6 * per)) {
		at("paced", t)
		t = t.Add(time.Duration(float64(interval) / 1.5 * (0.5 + rng.Float64())))
	}
	for w := range 3 {
		edge := t0.Add(time.Duration(2*w+1) * per)
		for i := range n / 2 {
			at("edge", edge.Add(-per/2+time.Duration(i)*gap))
		}
		for i := range n {
			at("edge", edge.Add(-per/50+time.Duration(i)*gap/4))
			at("edge", edge.Add(per/100+time.Duration(i)*gap/4))
		}
		for i := range 2 * n {
			at("attack", edge.Add(-per/20+time.Duration(i)*per/(10*time.Duration(n))))
		}
	}
	slices.SortStableFunc(out, func(a, b send) int { return a.at.Compare(b.at) })
	return out
}

// observe has limiter decide sends as a server behind a network would:
// each request reaches it up to a millisecond after it was sent (in that
// order, which need not be the order sent), and its answer takes up to a
// millisecond more to come back.
func observe(t *testing.T, rng *rand.Rand, a limiters.Algorithm, limit limiters.Limit, sends []send) []observation {
	t.Helper()
	l, err := composite.New(a, []limiters.Limit{limit}, limiters.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type arrival struct {
		i  int
		at time.Time
	}
	arrivals := make([]arrival, len(sends))
	obs := make([]observation, len(sends))
	for i, s := range sends {
		arrivals[i] = arrival{i, s.at.Add(time.Duration(rng.Int64N(int64(time.Millisecond))))}
	}
	slices.SortStableFunc(arrivals, func(a, b arrival) int { return a.at.Compare(b.at) })
	for _, r := range arrivals {
		s := sends[r.i]
		d, err := l.Decide(context.Background(), limiters.Request{Key: s.key, N: 1, At: r.at})
		if err != nil {
			t.Fatal(err)
		}
		obs[r.i] = observation{Key: s.key, N: 1, Sent: s.at, Received: r.at.Add(time.Duration(rng.Int64N(int64(time.Millisecond)))), Admitted: d.Allowed}
	}
	return obs
}

// limitOf is the limit the tests give algorithm a: 10 a second, and for a
// bucket a burst of 6.
func limitOf(a limiters.Algorithm) limiters.Limit {
	if a.IsBucket() {
		return limiters.Limit{N: 10, Per: time.Second, Burst: 6}
	}
	return limiters.Limit{N: 10, Per: time.Second}
}

// Every algorithm's decisions, made at unknown instants of their
// intervals, are all explained by its own model, and by no other
// family's at the same limit: the traffic tells them apart.
func TestExplainsItsOwn(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/seed %d", a, seed), func(t *testing.T) {
				explainsItsOwn(t, a, seed)
			})
		}
	}
}

// explainsItsOwn is TestExplainsItsOwn for a and one seed of the traffic
// and the network.
func explainsItsOwn(t *testing.T, a limiters.Algorithm, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(a))))
	limit := limitOf(a)
	obs := observe(t, rng, a, limit, traffic(rng, 10, time.Second))
	own := explainAll(obs, model{Algorithm: a, Limit: limit})
	if own.Explained != own.Decisions {
		t.Errorf("%s explains %d of its own %d decisions, want all", own.Model, own.Explained, own.Decisions)
	}
	for _, b := range limiters.Algorithms() {
		m := model{Algorithm: b, Limit: limitOf(b)}
		e := explainAll(obs, m)
		t.Logf("%-40s %5.1f%% of %d", m, 100*e.Share(), e.Decisions)
		if family(b) != family(a) && e.Explained == e.Decisions {
			t.Errorf("%s explains every decision of %s: the traffic does not tell them apart", m, a)
		}
		if family(b) == family(a) && e.Explained != e.Decisions {
			t.Errorf("%s explains %d of %d decisions of %s, one policy: want all", m, e.Explained, e.Decisions, a)
		}
	}
}

// A request paced onto the instant a bucket refills is a tie the jitter
// breaks either way. A plain replay lets each tie shift the decisions
// after it; following the target's decisions over each request's
// interval explains them all.
func TestTiesCostOneDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	limit := limiters.Limit{N: 10, Per: time.Second, Burst: 6}
	var sends []send
	for range limit.Quota() { // the burst, spent at once
		sends = append(sends, send{"k", t0})
	}
	for i := range 600 { // then one every 100ms, the refill interval
		sends = append(sends, send{"k", t0.Add(time.Duration(i+1) * limit.Interval())})
	}
	obs := observe(t, rng, limiters.GCRA, limit, sends)
	m := model{Algorithm: limiters.GCRA, Limit: limit}
	plain, explained := replay(obs, m), explainAll(obs, m)
	t.Logf("plain replay %.1f%%, over the intervals following the target %.1f%%, of %d", 100*plain.Share(), 100*explained.Share(), plain.Decisions)
	if explained.Explained != explained.Decisions {
		t.Errorf("explained %d of %d, want all", explained.Explained, explained.Decisions)
	}
	if plain.Explained == plain.Decisions {
		t.Error("the plain replay agrees on every decision: the test's ties did not fall both ways")
	}
}

// candidates returns the models the fit tries around a limit: every
// algorithm, N (and a bucket's burst) one or two off, and for the
// windows both alignments and both ways of counting refusals.
func candidates(limit limiters.Limit) []model {
	var out []model
	for _, a := range limiters.Algorithms() {
		for dn := -2; dn <= 2; dn++ {
			l := limiters.Limit{N: limit.N + dn, Per: limit.Per}
			if !a.IsBucket() {
				for _, anchored := range []bool{false, true} {
					for _, counts := range []bool{false, true} {
						out = append(out, model{Algorithm: a, Limit: l, Anchored: anchored, CountsRefused: counts})
					}
				}
				continue
			}
			for db := -2; db <= 2; db++ {
				l.Burst = max(limit.Quota()+db, 1)
				out = append(out, model{Algorithm: a, Limit: l})
				out = append(out, model{Algorithm: a, Limit: l, CountsRefused: true})
			}
		}
	}
	return out
}

// Among models near the limit, the best explanation of each target is
// its own family at its own limit, and every other family explains less.
func TestRankFindsTheTarget(t *testing.T) {
	for _, a := range limiters.Algorithms() {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/seed %d", a, seed), func(t *testing.T) {
				ranksTheTarget(t, a, seed)
			})
		}
	}
}

// ranksTheTarget is TestRankFindsTheTarget for a and one seed.
func ranksTheTarget(t *testing.T, a limiters.Algorithm, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3+uint64(len(a))))
	limit := limitOf(a)
	obs := observe(t, rng, a, limit, traffic(rng, 10, time.Second))
	best := bestOfEach(rank(obs, candidates(limit)))
	var lines []string
	for _, e := range best {
		lines = append(lines, fmt.Sprintf("%s: %.1f%%", e.Model, 100*e.Share()))
	}
	t.Logf("%s behaves as %v", a, lines)
	top := best[0]
	if top.Model.Family() != family(a) || top.Explained != top.Decisions {
		t.Fatalf("best %s, %d of %d: want %s's family explaining all", top.Model, top.Explained, top.Decisions, a)
	}
	if top.Model.Limit.N != limit.N || top.Model.Limit.Quota() != limit.Quota() {
		t.Errorf("fitted %s, want %s", top.Model.Limit, limit)
	}
	if len(best) < 2 || best[1].Explained == best[1].Decisions {
		t.Errorf("another family explains as much: %v", lines)
	}
}

// explainAll is explain on obs, to the end.
func explainAll(obs []observation, m model) explanation {
	n, _ := explain(byKey(obs), m, len(obs))
	return explanation{Model: m, Explained: n, Decisions: len(obs)}
}

// replay is the plain replay explain improves on, kept to show by how
// much: each request decided by m at the instant it was sent, m's state
// following its own decisions. It counts the decisions alike.
func replay(obs []observation, m model) explanation {
	e := explanation{Model: m, Decisions: len(obs)}
	for _, key := range byKey(obs) {
		st := m.newState()
		for _, o := range key {
			t := o.Sent.UnixNano()
			ok := st.admits(t, o.N)
			if ok {
				st.admit(t, o.N)
			} else {
				st.refuse(t, o.N)
			}
			if ok == o.Admitted {
				e.Explained++
			}
		}
	}
	return e
}

// rank explains obs with every model and returns them best first: the
// most decisions explained, then the order given (put the simpler or the
// declared model first, and it wins a tie).
func rank(obs []observation, models []model) []explanation {
	out := make([]explanation, len(models))
	for i, m := range models {
		out[i] = explainAll(obs, m)
	}
	slices.SortStableFunc(out, func(a, b explanation) int { return cmp.Compare(b.Explained, a.Explained) })
	return out
}
