package plan

import (
	"fmt"
	"slices"
)

// A stretch is one key's requests over a span of time, summed up so that
// two stretches of the key, one after the other, merge into the summary
// of both, exactly: a log cut by time (files, byte ranges) and by key is
// summed up anywhere and merged to what one pass finds.
//
// At each rate of interval T, the least burst under which a bucket never
// refuses the key is B = max over i ≤ j of C(i..j) − (t_j − t_i)/T, its
// most cost in a run of requests beyond what the rate refills between the
// run's first and last. A stretch keeps T·B (Need), the best run ending
// anywhere that starts at its first request (Pre: max_j T·C(1..j) − t_j)
// and the best run starting anywhere that ends at its last (Lead: max_i
// t_i − T·C(1..i−1)); a run across two stretches is the first's best
// ending run and the second's best starting one, so
//
//	Need = max(Need₁, Need₂, Lead₁ + T·Cost₁ + Pre₂ − (First₂ − First₁)).
//
// The envelope, the most cost in any window (t−d, t] of each length d, is
// a stretch's own peak or a window across the cut; such a window holds
// only requests within d of the cut, so a stretch keeps those within the
// longest length of its first request (Head) and of its last (Tail).
type stretch struct {
	First, Last int64 // its first and last requests' times
	Count, Cost int64 // its requests, and what they cost (a request may cost 0)
	// Per rate of the plan's grid, times relative to First.
	Lead, Pre, Need []int64
	// Per length of the plan's envelope: the most cost in a window of it.
	Peaks []int64
	// Head are its requests within the longest length of First, Tail of
	// Last, in time order (all of them, in both, for a stretch shorter
	// than that), a stamp for each instant with the cost of all its
	// requests.
	Head, Tail []stamp
	// heads and sums are add's windows: at each length, the first of the
	// Tail in the window ending at the last request, and their cost.
	heads []int
	sums  []int64
}

// shape is the grid a stretch is summed up on: the rates' intervals and
// the envelope's lengths (ascending).
type shape struct {
	intervals, lengths []int64
	// noHead: the stretches are not merged after another in time (a
	// shard by key holds all of a key's requests), and keep no Head.
	noHead bool
}

func (s shape) longest() int64 { return s.lengths[len(s.lengths)-1] }

// newStretch is a stretch of no request.
func (s shape) newStretch() *stretch {
	return &stretch{Lead: make([]int64, len(s.intervals)), Pre: make([]int64, len(s.intervals)),
		Need: make([]int64, len(s.intervals)), Peaks: make([]int64, len(s.lengths))}
}

// add counts a request of cost n at at, no earlier than the last: O(1) a
// rate and a length (each length's window moved along the Tail). Only a
// stretch built by add is added to, not one merge made.
func (s shape) add(st *stretch, at, n int64) {
	if st.Count == 0 {
		st.First = at
		st.heads, st.sums = make([]int, len(s.lengths)), make([]int64, len(s.lengths))
	}
	st.Last = at
	t := at - st.First
	for k, T := range s.intervals {
		st.Lead[k] = max(st.Lead[k], t-T*st.Cost)
		st.Pre[k] = max(st.Pre[k], T*(st.Cost+n)-t)
		st.Need[k] = max(st.Need[k], T*(st.Cost+n)-t+st.Lead[k])
	}
	st.Cost += n
	st.Count++
	// Requests at one instant are in every window together: one stamp
	// holds them (a log in whole seconds keeps a key's Tail to the
	// seconds of the longest length, however many it sent in each).
	if at < st.First+s.longest() && !s.noHead {
		st.Head = appendStamp(st.Head, stamp{at, n})
	}
	st.Tail = appendStamp(st.Tail, stamp{at, n})
	for k, d := range s.lengths {
		h := st.heads[k]
		st.sums[k] += n
		for st.Tail[h].at <= at-d {
			st.sums[k] -= st.Tail[h].n
			h++
		}
		st.heads[k] = h
		st.Peaks[k] = max(st.Peaks[k], st.sums[k])
	}
	// The longest length's window starts at the least head: what is
	// before it is dropped, once it is half the Tail.
	if h := st.heads[len(st.heads)-1]; h > 0 && h >= len(st.Tail)/2 {
		st.Tail = st.Tail[:copy(st.Tail, st.Tail[h:])]
		for k := range st.heads {
			st.heads[k] -= h
		}
	}
}

// trim keeps of st.Tail what is within the longest length of its last
// request (add keeps up to twice that, to move it rarely); st is added
// to no more.
func (s shape) trim(st *stretch) {
	i := 0
	for i < len(st.Tail) && st.Tail[i].at <= st.Last-s.longest() {
		i++
	}
	st.Tail = slices.Clip(st.Tail[i:])
	st.Head = slices.Clip(st.Head)
	st.heads, st.sums = nil, nil
}

// merge returns the stretch of a's requests then b's: b's first request
// no earlier than a's last. Neither is changed.
func (s shape) merge(a, b *stretch) (*stretch, error) {
	switch {
	case a.Count == 0:
		return b, nil
	case b.Count == 0:
		return a, nil
	case b.First < a.Last:
		return nil, fmt.Errorf("plan: a stretch from %d merged after one to %d: stretches merge in time order", b.First, a.Last)
	}
	s.trim(a)
	s.trim(b)
	m := s.newStretch()
	m.First, m.Last, m.Count, m.Cost = a.First, b.Last, a.Count+b.Count, a.Cost+b.Cost
	off := b.First - a.First
	for k, T := range s.intervals {
		m.Need[k] = max(a.Need[k], b.Need[k], a.Lead[k]+T*a.Cost+b.Pre[k]-off)
		m.Pre[k] = max(a.Pre[k], T*a.Cost+b.Pre[k]-off)
		m.Lead[k] = max(a.Lead[k], b.Lead[k]-T*a.Cost+off)
	}
	// Windows across the cut end at one of b's first requests and hold
	// a's last ones.
	for k, d := range s.lengths {
		m.Peaks[k] = max(a.Peaks[k], b.Peaks[k])
		var inA, inB int64
		for _, r := range a.Tail {
			inA += r.n
		}
		j := 0 // a's requests in the window: a.Tail[j:]
		for _, r := range b.Head {
			if r.at-d >= a.Last {
				break
			}
			inB += r.n
			for j < len(a.Tail) && a.Tail[j].at <= r.at-d {
				inA -= a.Tail[j].n
				j++
			}
			m.Peaks[k] = max(m.Peaks[k], inA+inB)
		}
	}
	D := s.longest()
	m.Head = slices.Clone(a.Head)
	for _, r := range b.Head {
		if r.at < a.First+D {
			m.Head = appendStamp(m.Head, r)
		}
	}
	for _, r := range a.Tail {
		if r.at > b.Last-D {
			m.Tail = append(m.Tail, r)
		}
	}
	for _, r := range b.Tail {
		m.Tail = appendStamp(m.Tail, r)
	}
	return m, nil
}

// appendStamp appends r to stamps in time order, adding it to the last
// stamp if that is at the same instant.
func appendStamp(stamps []stamp, r stamp) []stamp {
	if l := len(stamps) - 1; l >= 0 && stamps[l].at == r.at {
		stamps[l].n += r.n
		return stamps
	}
	return append(stamps, r)
}

// burst is the least burst at rate k (at least the largest request's).
func (s shape) burst(st *stretch, k int) int64 {
	T := s.intervals[k]
	return max((st.Need[k]+T-1)/T, 1)
}
