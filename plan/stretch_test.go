package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
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
