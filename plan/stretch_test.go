package plan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// A key's requests cut at random points into stretches, each summed up
// apart and merged, in order or as a tree, equal the one pass over all of
// them: its least burst at every rate and its most in every window, to
// the request; and the one pass equals the brute force over every pair of
// requests. On 200 random keys, a few stretches cut between two requests
// at one instant.
func TestStretchesMergeExactly(t *testing.T) {
	periods := []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, time.Minute}
	cv := newCurves(periods, DefaultRates)
	s := shape{intervals: cv.intervals, lengths: cv.lengths}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := randomLog(seed)
		var at, n []int64
		for i := range l.ids {
			if l.ids[i] == 0 {
				at, n = append(at, l.at[i]), append(n, l.n[i])
			}
		}
		if len(at) == 0 {
			continue
		}
		whole := s.newStretch()
		for i := range at {
			s.add(whole, at[i], n[i])
		}
		s.trim(whole)
		bruteForce(t, s, whole, at, n)

		cuts := []int{0}
		for range rng.IntN(6) {
			cuts = append(cuts, rng.IntN(len(at)+1))
		}
		cuts = append(cuts, len(at))
		slices.Sort(cuts)
		var parts []*stretch
		for i := 1; i < len(cuts); i++ {
			p := s.newStretch()
			for j := cuts[i-1]; j < cuts[i]; j++ {
				s.add(p, at[j], n[j])
			}
			parts = append(parts, p)
		}
		inOrder := parts[0]
		for _, p := range parts[1:] {
			var err error
			if inOrder, err = s.merge(inOrder, p); err != nil {
				t.Fatal(err)
			}
		}
		same(t, s, seed, "in order", whole, inOrder)
		same(t, s, seed, "as a tree", whole, tree(t, s, parts))
	}
}

// tree merges parts pairwise, each half apart first.
func tree(t *testing.T, s shape, parts []*stretch) *stretch {
	if len(parts) == 1 {
		return parts[0]
	}
	h := len(parts) / 2
	m, err := s.merge(tree(t, s, parts[:h]), tree(t, s, parts[h:]))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func same(t *testing.T, s shape, seed uint64, how string, want, got *stretch) {
	t.Helper()
	s.trim(got)
	switch {
	case got.First != want.First || got.Last != want.Last || got.Cost != want.Cost:
		t.Errorf("seed %d, merged %s: from %d to %d, cost %d; want %d, %d, %d", seed, how, got.First, got.Last, got.Cost, want.First, want.Last, want.Cost)
	case !slices.Equal(got.Need, want.Need) || !slices.Equal(got.Pre, want.Pre) || !slices.Equal(got.Lead, want.Lead):
		t.Errorf("seed %d, merged %s: need %v pre %v lead %v; want %v %v %v", seed, how, got.Need, got.Pre, got.Lead, want.Need, want.Pre, want.Lead)
	case !slices.Equal(got.Peaks, want.Peaks):
		t.Errorf("seed %d, merged %s: peaks %v, want %v", seed, how, got.Peaks, want.Peaks)
	case !slices.Equal(got.Head, want.Head) || !slices.Equal(got.Tail, want.Tail):
		t.Errorf("seed %d, merged %s: %d at the head and %d at the tail, want %d and %d", seed, how, len(got.Head), len(got.Tail), len(want.Head), len(want.Tail))
	}
}

// bruteForce checks st, the stretch of requests at, n, against every pair
// of them.
func bruteForce(t *testing.T, s shape, st *stretch, at, n []int64) {
	t.Helper()
	for k, d := range s.lengths {
		var want int64
		for j := range at {
			var sum int64
			for i := 0; i <= j; i++ {
				if at[i] > at[j]-d {
					sum += n[i]
				}
			}
			want = max(want, sum)
		}
		if st.Peaks[k] != want {
			t.Errorf("most in any %v: %d, want %d", time.Duration(d), st.Peaks[k], want)
		}
	}
	for k, T := range s.intervals {
		var want int64 = 1
		for j := range at {
			var sum int64
			for i := j; i >= 0; i-- {
				sum += n[i]
				want = max(want, (T*sum-(at[j]-at[i])+T-1)/T)
			}
		}
		if got := s.burst(st, k); got != want {
			t.Errorf("least burst at one every %v: %d, want %d", time.Duration(T), got, want)
		}
	}
}

// A log cut at random points into stretches (as files or byte ranges
// would cut it), each summed up apart and merged in order, equals the one
// pass over it, key by key, and the one pass equals what the plan itself
// finds: each key's requests, cost, 429s, agents and paths, its least
// burst at every rate and its most in every window, to the request. On
// two mobile APIs' logs (fan-outs, scrapers, carrier NATs) and 20 random
// ones.
func TestSummariesMergeAsOnePass(t *testing.T) {
	t.Parallel()
	type log struct {
		name    string
		entries []accesslog.Entry
	}
	var logs []log
	for _, seed := range []uint64{1, 2} {
		var b bytes.Buffer
		if _, err := synthlog.WriteMobile(&b, synthlog.Mobile{Seed: seed, Users: 200, PerNAT: 20}); err != nil {
			t.Fatal(err)
		}
		key, _ := accesslog.ParseKey(".request.remote_ip")
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "mobile.json", R: &b}}, accesslog.Options{Format: accesslog.JSON, Key: key, Agent: ".request.headers.User-Agent", Path: ".request.uri"})
		if err != nil {
			t.Fatal(err)
		}
		var es []accesslog.Entry
		for {
			e, err := r.Read()
			if err != nil {
				break
			}
			es = append(es, e)
		}
		logs = append(logs, log{fmt.Sprintf("mobile %d", seed), es})
	}
	for seed := range uint64(20) {
		l := randomLog(seed)
		var es []accesslog.Entry
		for i := range l.ids {
			es = append(es, accesslog.Entry{At: l.at[i], Key: fmt.Sprint("k", l.ids[i]), N: int(l.n[i]), Status: []int{200, 429}[i%7/6], Agent: uint64(l.ids[i])*7 + uint64(i%3)})
		}
		logs = append(logs, log{fmt.Sprintf("random %d", seed), es})
	}
	for i, lg := range logs {
		cv := newCurves(DefaultPeriods, DefaultRates)
		s := shape{intervals: cv.intervals, lengths: cv.lengths}
		cs := newClients(int64(time.Second))
		var decided chunks
		whole := &summaries{ids: map[string]int{}}
		for _, e := range lg.entries {
			id, _ := cs.see(&e, true)
			cv.see(id, e.At, int64(e.N))
			decided.add(logged{id: id, n: int32(e.N), at: e.At})
			if int(id) == len(whole.keys) {
				whole.ids[e.Key] = len(whole.keys)
				whole.keys = append(whole.keys, &keySummary{counts: client{key: e.Key}, Decided: s.newStretch()})
			}
			s.see(whole.keys[id], &e, true)
		}
		cv.envelopes(decided)
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		cuts := []int{0, len(lg.entries)}
		for range 1 + rng.IntN(5) {
			cuts = append(cuts, rng.IntN(len(lg.entries)+1))
		}
		slices.Sort(cuts)
		var merged *summaries
		for j := 1; j < len(cuts); j++ {
			part := &summaries{ids: map[string]int{}}
			for _, e := range lg.entries[cuts[j-1]:cuts[j]] {
				k, ok := part.ids[e.Key]
				if !ok {
					k = len(part.keys)
					part.ids[e.Key] = k
					part.keys = append(part.keys, &keySummary{counts: client{key: e.Key}, Decided: s.newStretch()})
				}
				s.see(part.keys[k], &e, true)
			}
			if merged == nil {
				merged = part
				continue
			}
			var err error
			if merged, err = s.then(merged, part); err != nil {
				t.Fatal(err)
			}
		}
		if len(merged.keys) != len(whole.keys) || len(whole.keys) != len(cs.all) {
			t.Fatalf("%s: %d keys merged, %d in one pass, %d in the plan's", lg.name, len(merged.keys), len(whole.keys), len(cs.all))
		}
		for id, w := range whole.keys {
			m, c := merged.keys[id], cs.all[id]
			mc := &m.counts
			if mc.key != w.counts.key || mc.key != c.key {
				t.Fatalf("%s: key %d is %q merged, %q in one pass, %q in the plan's", lg.name, id, mc.key, w.counts.key, c.key)
			}
			if mc.requests != c.requests || mc.cost != c.cost || mc.logged429 != c.logged429 || mc.agents.n() != c.agents.n() || mc.paths.n() != c.paths.n() {
				t.Errorf("%s, %s: merged %d requests, cost %d, %d 429s, %d agents, %d paths; the plan's %d, %d, %d, %d, %d", lg.name, mc.key,
					mc.requests, mc.cost, mc.logged429, mc.agents.n(), mc.paths.n(), c.requests, c.cost, c.logged429, c.agents.n(), c.paths.n())
			}
			same(t, s, uint64(i), "from a cut log", w.Decided, m.Decided)
			for k := range cv.intervals {
				if got, want := s.burst(m.Decided, k), cv.burst(int32(id), k); got != want {
					t.Errorf("%s, %s: least burst at %s merged %d, the plan's %d", lg.name, mc.key, cv.rates[k], got, want)
				}
			}
			for k := range cv.periods {
				if got, want := m.Decided.Peaks[cv.at[k]], cv.peak(int32(id), k); got != want {
					t.Errorf("%s, %s: most in %v merged %d, the plan's %d", lg.name, mc.key, time.Duration(cv.periods[k]), got, want)
				}
				if got, want := m.Decided.Peaks[cv.at2[k]], cv.peak2(int32(id), k); got != want {
					t.Errorf("%s, %s: most in twice %v merged %d, the plan's %d", lg.name, mc.key, time.Duration(cv.periods[k]), got, want)
				}
			}
		}
	}
}
