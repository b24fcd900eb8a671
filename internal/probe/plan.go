package probe

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Fingerprint plans the requests that tell the six algorithms apart for a
// limit of about n per per, each on keys of its own (prefix, then a
// name): the burst, 2n back to back on a fresh key; the sustained rate,
// one and a half times the rate, with jitter, for six windows (paced on a
// grid, a request lands on the instant a bucket refills, and a steady rate
// is explained as well by a fixed window as by a sliding log); and three
// edge attacks: n/2 in the middle of a window, then n just before and n
// just after the next edge of the epoch's windows, which separates a fixed
// window from a sliding one and the epoch's windows from windows anchored
// at a key's first request; and the anchored attack, one request and then
// n-1 just before and n just after a window's length from it, the edge of
// windows that start at a key's first request. The plan starts at start (a time on the
// epoch's grid of per, so that the edges fall where the plan means them
// to) and its times are offsets from it.
func Fingerprint(rng *rand.Rand, prefix string, limit limiters.Limit) []Request {
	n, per := max(limit.Quota(), limit.N), limit.Per
	var out []Request
	at := func(key string, t time.Duration) { out = append(out, Request{Key: prefix + key, At: t}) }
	gap := min(per/time.Duration(40*n), time.Millisecond)
	for i := range 2 * n {
		at("burst", per/4+time.Duration(i)*gap)
	}
	interval := limit.Per / time.Duration(limit.N)
	for t := time.Duration(0); t < 6*per; t += time.Duration(float64(interval) / 1.5 * (0.5 + rng.Float64())) {
		at("paced", t)
	}
	for w := range 3 {
		edge := time.Duration(2*w+1) * per
		for i := range n / 2 {
			at("edge", edge-per/2+time.Duration(i)*gap)
		}
		for i := range n {
			at("edge", edge-per/20+time.Duration(i)*gap/2)
			at("edge", edge+per/50+time.Duration(i)*gap/2)
		}
	}
	// The anchored attack: one request, then n-1 just before and n just
	// after a window's length from it, the edge of windows that start at
	// a key's first request.
	first := per * 2 / 5
	at("anchored", first)
	for i := range n - 1 {
		at("anchored", first+per-per/20+time.Duration(i)*gap/2)
	}
	for i := range n {
		at("anchored", first+per+per/50+time.Duration(i)*gap/2)
	}
	slices.SortStableFunc(out, func(a, b Request) int { return int(a.At - b.At) })
	return out
}

// Candidates returns the models a fit tries around limit: every
// algorithm at N (and a bucket's burst) a little off either way, and for
// the windows both alignments and both ways of counting refusals. The
// limit itself comes first, so that it wins a tie.
func Candidates(limit limiters.Limit) []Model {
	var out []Model
	add := func(m Model) {
		if m.Validate() == nil && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, a := range limiters.Algorithms() {
		for _, dn := range around(limit.N) {
			l := limiters.Limit{N: limit.N + dn, Per: limit.Per}
			if l.N < 1 {
				continue
			}
			if !a.IsBucket() {
				for _, anchored := range []bool{false, true} {
					for _, counts := range []bool{false, true} {
						add(Model{Algorithm: a, Limit: l, Anchored: anchored, CountsRefused: counts})
					}
				}
				continue
			}
			for _, db := range around(limit.Quota()) {
				l.Burst = max(limit.Quota()+db, 1)
				add(Model{Algorithm: a, Limit: l})
				add(Model{Algorithm: a, Limit: l, CountsRefused: true})
			}
		}
	}
	return out
}

// around returns the offsets a fit tries around a count of n: 0 first,
// then 1, -1, 2, -2, ... to a twentieth of n, and at least to 2.
func around(n int) []int {
	out := []int{0}
	for d := 1; d <= max(n/20, 2); d++ {
		out = append(out, d, -d)
	}
	return out
}

// Concurrent plans k requests on one fresh key, all at once.
func Concurrent(key string, k int) []Request {
	out := make([]Request, k)
	for i := range out {
		out[i] = Request{Key: key}
	}
	return out
}
