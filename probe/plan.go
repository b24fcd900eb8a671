package probe

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// fingerprintPlan plans the requests that tell the six algorithms apart for a
// limit of about n per per (a bucket's quota over the time it takes to
// refill it), each part on a key of its own (prefix, then the part's
// name), from start: the burst, 2n back to back on a fresh key; the
// sustained rate, one and a half times the rate with jitter for three
// windows (paced on a grid, a request would land on the instant a bucket
// refills, and a steady rate is explained as well by a fixed window as by
// a sliding log); the edge attack, n/2 in the middle of a window, then n
// just before and n just after two edges in a row of the epoch's windows
// of per, which separates a fixed window from a sliding one and windows
// aligned on the epoch from windows anchored at a key's first request;
// and the anchored attack, one request and then n-1 just before and n
// just after a window's length from it. The times are offsets from start.
func fingerprintPlan(rng *rand.Rand, prefix string, limit limiters.Limit, start time.Time) []request {
	n, per := max(limit.Quota(), limit.N), limit.Per
	var out []request
	at := func(key string, t time.Duration) {
		if t >= 0 {
			out = append(out, request{Key: prefix + key, At: t})
		}
	}
	gap := min(per/time.Duration(40*n), time.Millisecond)
	for i := range 2 * n {
		at("burst", per/4+time.Duration(i)*gap)
	}
	interval := per / time.Duration(n)
	for t := time.Duration(0); t < 3*per; t += time.Duration(float64(interval) / 1.5 * (0.5 + rng.Float64())) {
		at("paced", t)
	}
	// The first edge of the epoch's windows at least half a window in,
	// and the next.
	first := start.Add(per / 2).Truncate(per).Add(per).Sub(start)
	for w := range 2 {
		edge := first + time.Duration(w)*per
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
	one := per * 2 / 5
	at("anchored", one)
	for i := range n - 1 {
		at("anchored", one+per-per/20+time.Duration(i)*gap/2)
	}
	for i := range n {
		at("anchored", one+per+per/50+time.Duration(i)*gap/2)
	}
	slices.SortStableFunc(out, func(a, b request) int { return int(a.At - b.At) })
	return out
}
