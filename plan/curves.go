package plan

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// One number a period spares users and catches no one who sends steadily:
// an app that opens with a fan-out peaks in a second as high as a scraper
// does. What tells them apart is two numbers, and each client's traffic
// gives both exactly: its envelope, the most it sent in any window of each
// length (network calculus's arrival curve), and, at each rate, the least
// burst under which a bucket of that rate never refuses it (Tang and Tai's
// measured token bucket: a curve falling as the rate rises). A fan-out
// user's envelope is steep, then flat, and its least burst falls to its
// fan-out at a low rate; a scraper's envelope is a straight line far
// above, and its least burst at a rate below its own is the most of its
// whole visit.

// DefaultPeriods are the envelope's window lengths, log-spaced, as far as
// a log reaches.
var DefaultPeriods = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second, 3 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}

// DefaultRates are the rates the least bursts are found at: 1, 2 and 5
// per decade from one every 100 seconds to 1000 a second, each a whole
// number of nanoseconds apart (a bucket's emission interval), so that
// what the curves predict and what the bucket decides agree exactly.
var DefaultRates = func() []limiters.Limit {
	var out []limiters.Limit
	for _, t := range []time.Duration{100, 50, 20, 10, 5, 2} {
		out = append(out, limiters.Limit{N: 1, Per: t * time.Second})
	}
	for _, n := range []int{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000} {
		out = append(out, limiters.Limit{N: n, Per: time.Second})
	}
	return out
}()

// curve is one client's least bursts so far.
type curve struct {
	first int64 // its first request's time: the bucket's times are from it
	total int64 // its cost so far
	// For each rate (its emission interval T): the most of t_i − T·C(i−1)
	// over the requests so far, and the most of T·C(j) − t_j plus it,
	// which is T times the least burst.
	lead, need []int64
}

// curves are every client's curves, by client number: the least bursts
// as the requests come (see), the envelope once they are all in
// (envelopes), from the requests decided.
type curves struct {
	periods   []int64 // ascending
	rates     []limiters.Limit
	intervals []int64 // each rate's emission interval
	of        []*curve
	// lengths are the windows the envelope is found at: the periods, and
	// twice each (what a sliding counter of a period may weigh); at and
	// at2 are each period's and its double's index in them.
	lengths []int64
	at, at2 []int
	peaks   []int64 // [client·len(lengths) + length]: its most in any window of it
}

func newCurves(periods []time.Duration, rates []limiters.Limit) *curves {
	c := &curves{}
	for _, p := range periods {
		c.periods = append(c.periods, int64(p))
	}
	slices.Sort(c.periods)
	c.periods = slices.Compact(c.periods)
	for _, p := range c.periods {
		c.lengths = append(c.lengths, p, 2*p)
	}
	slices.Sort(c.lengths)
	c.lengths = slices.Compact(c.lengths)
	for _, p := range c.periods {
		i, _ := slices.BinarySearch(c.lengths, p)
		j, _ := slices.BinarySearch(c.lengths, 2*p)
		c.at, c.at2 = append(c.at, i), append(c.at2, j)
	}
	c.rates = slices.Clone(rates)
	slices.SortFunc(c.rates, func(a, b limiters.Limit) int { return cmp.Compare(perSecond(a), perSecond(b)) })
	for _, r := range c.rates {
		c.intervals = append(c.intervals, int64(r.Interval()))
	}
	return c
}

// see counts a request of client id, of cost n at at, into its least
// bursts: O(1) a rate.
func (cs *curves) see(id int32, at, n int64) {
	for int(id) >= len(cs.of) {
		cs.of = append(cs.of, nil)
	}
	c := cs.of[id]
	if c == nil {
		c = &curve{first: at, lead: make([]int64, len(cs.intervals)), need: make([]int64, len(cs.intervals))}
		cs.of[id] = c
	}
	c.total += n
	total := c.total
	t := at - c.first
	for k, T := range cs.intervals {
		// C(i−1) is the cost before this request: total − n.
		// (The first request's is 0, which the zero value holds.)
		c.lead[k] = max(c.lead[k], t-T*(total-n))
		c.need[k] = max(c.need[k], T*total-t+c.lead[k])
	}
}

// envelopes finds each client's most cost in any window of each period
// from the requests decided, in the order decided: each client's requests
// linked each to its next (4 bytes a request), and at each request, each
// period's window moved on along its client's links. No client keeps its
// requests: an hour's window of the shop's 10 million held them all once.
func (cs *curves) envelopes(decided chunks) {
	n := 0
	for _, b := range decided {
		n += len(b)
	}
	at := func(i int32) *logged { return &decided[i/chunkSize][i%chunkSize] }
	next := make([]int32, n)
	last := make([]int32, len(cs.of))
	for i := range last {
		last[i] = -1
	}
	for i := int32(0); i < int32(n); i++ {
		r := at(i)
		if l := last[r.id]; l >= 0 {
			next[l] = i
		}
		last[r.id] = i
	}
	P := len(cs.lengths)
	cs.peaks = make([]int64, len(cs.of)*P)
	heads := make([]int32, len(cs.of)*P)
	sums := make([]int64, len(cs.of)*P)
	for i := range heads {
		heads[i] = -1
	}
	// The lengths shared among the cores, each length's windows moved by
	// one of them over every request (on two cores, the shop's 10 million
	// at 20 lengths: 5 s, where one took 9).
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), P)
	for w := range workers {
		wg.Go(func() {
			for i := int32(0); i < int32(n); i++ {
				r := at(i)
				base := int(r.id) * P
				for k := w; k < P; k += workers {
					d := cs.lengths[k]
					h := heads[base+k]
					if h < 0 {
						h = i // the client's first request
					}
					sums[base+k] += int64(r.n)
					for h != i && at(h).at <= r.at-d {
						sums[base+k] -= int64(at(h).n)
						h = next[h]
					}
					heads[base+k] = h
					cs.peaks[base+k] = max(cs.peaks[base+k], sums[base+k])
				}
			}
		})
	}
	wg.Wait()
}

// burst is the least burst at rate k under which a bucket never refuses
// the client: at least its largest request.
func (cs *curves) burst(id int32, k int) int64 {
	c := cs.of[id]
	T := cs.intervals[k]
	return max((c.need[k]+T-1)/T, 1)
}

// peak is the client's most cost in any window of period k (envelopes
// first); peak2 in any window of twice it.
func (cs *curves) peak(id int32, k int) int64  { return cs.peaks[int(id)*len(cs.lengths)+cs.at[k]] }
func (cs *curves) peak2(id int32, k int) int64 { return cs.peaks[int(id)*len(cs.lengths)+cs.at2[k]] }

// EnvelopePoint is the clients' most cost in any window of one length:
// quantiles over the clients, the least N per Period that spares all but
// the spare share of them (a sliding log of it refuses exactly the
// clients above it), and where a few of them stand apart from the rest
// (Separated: at least Config.Margin apart).
type EnvelopePoint struct {
	Period                   time.Duration
	P50, P90, P99, P999, Max float64
	Sparing                  int64
	Gap                      Gap
	Separated                bool
}

// FrontierPoint is a bucket at one rate: the clients' least bursts there
// (quantiles), where a few of them stand apart from the rest (Separated:
// at least Config.Margin apart), and the least burst that spares all but
// the spare share of them, with what a bucket of that rate and burst
// refuses of the log: the clients the curves say (those whose least burst
// is above it), and, decided by the library's bucket, the requests (-1
// for a point not decided). The bucket suggested is a FrontierPoint
// whose Burst is its own.
type FrontierPoint struct {
	Rate                     limiters.Limit
	P50, P90, P99, P999, Max float64
	Gap                      Gap
	Separated                bool
	// Users is the least burst that spares all but the spare share of the
	// keys kept below the gap (all of them where none stands apart), and
	// UsersMost the most any of them needs.
	Users, UsersMost int64
	Burst            int64
	Clients, Refused int64
	// decidedClients is how many clients the bucket refused, decided:
	// Clients, which the curves predict (a test holds them equal).
	decidedClients int64
}

// Policy is a bucket's rate and burst.
func (f FrontierPoint) Policy() limiters.Limit {
	return limiters.Limit{N: f.Rate.N, Per: f.Rate.Per, Burst: int(f.Burst)}
}

// quantiles returns the quantiles of v (sorted) the plan shows, and the
// least value that leaves no more than spare of them above it.
func quantiles(v []int64, spare float64) (p50, p90, p99, p999, most float64, sparing int64) {
	if len(v) == 0 {
		return
	}
	q := func(p float64) float64 { return float64(v[min(len(v)-1, int(math.Ceil(p*float64(len(v))))-1)]) }
	above := int(math.Floor(spare * float64(len(v))))
	return q(0.5), q(0.9), q(0.99), q(0.999), float64(v[len(v)-1]), max(1, v[max(0, len(v)-1-above)])
}

// envelope is the clients' envelope at each period the log reaches (and
// the shortest), of the clients ids, with its gaps: at most maxOut of
// them above, margin apart.
func (cs *curves) envelope(ids []int32, spare float64, span time.Duration, maxOut int, margin float64) []EnvelopePoint {
	var out []EnvelopePoint
	v := make([]int64, len(ids))
	for k, d := range cs.periods {
		if k > 0 && time.Duration(d) > span {
			break
		}
		for i, id := range ids {
			v[i] = cs.peak(id, k)
		}
		slices.Sort(v)
		e := EnvelopePoint{Period: time.Duration(d)}
		e.P50, e.P90, e.P99, e.P999, e.Max, e.Sparing = quantiles(v, spare)
		e.Gap, e.Separated = separate(v, maxOut, margin)
		out = append(out, e)
	}
	return out
}

// frontier is, at each rate, the clients ids' least bursts: where some
// stand apart (separate.go: at most maxOut of them, or a group that
// sustains its excess; margin apart), and the least burst that spares
// all but spare of them, with the clients it refuses.
func (cs *curves) frontier(ids []int32, spare float64, maxOut int, margin float64, span time.Duration, oneClient func(int32) bool) []FrontierPoint {
	var out []FrontierPoint
	v := make([]int64, len(ids))
	for k := range cs.intervals {
		needs := cs.sortedNeeds(ids, k)
		for i, n := range needs {
			v[i] = n.need
		}
		f := FrontierPoint{Rate: cs.rates[k]}
		f.P50, f.P90, f.P99, f.P999, f.Max, f.Burst = quantiles(v, spare)
		sep := separation{maxOut: maxOut, maxGroup: int(maxGroupShare * float64(len(ids))), margin: margin,
			sustained: func(id int32) bool { return cs.sustains(id, k, span) }, heavy: cs.heavyAbove(k, maxOut, margin, span), oneClient: oneClient}
		f.Gap, f.Separated = sep.separateKeys(needs)
		kept := v
		if f.Separated {
			kept = v[:f.Gap.Kept]
		}
		_, _, _, _, _, f.Users = quantiles(kept, spare)
		f.UsersMost = kept[len(kept)-1]
		above, _ := slices.BinarySearch(v, f.Burst+1) // the first above it
		f.Clients = int64(len(v) - above)
		out = append(out, f)
	}
	return out
}

// trim cuts from f the low rates whose burst is a whole visit and the
// high ones past where it stops falling (where the bursts that spare all
// but spare no longer change), keeping one of each and point keep; it
// returns what is left and the index of its first in f.
func trim(f []FrontierPoint, keep int) ([]FrontierPoint, int) {
	lo := 0
	for lo+1 <= keep && f[lo+1].Burst == f[0].Burst && !f[lo].Separated {
		lo++
	}
	hi := len(f) - 1
	for hi-1 >= keep && f[hi-1].Burst == f[hi].Burst && !f[hi].Separated {
		hi--
	}
	return f[lo : hi+1], lo
}

func perSecond(l limiters.Limit) float64 { return float64(l.N) / l.Per.Seconds() }

// ClientCurves are one client's envelope at the plan's Envelope periods
// and its least bursts at the Frontier's rates, for the charts.
type ClientCurves struct {
	Key              string
	Envelope, Bursts []int64
}

// Tier is what the keys that look like many users get: the bucket
// suggested, Scale times its rate and burst (tierOf).
type Tier struct {
	Scale  float64
	Policy limiters.Limit
	Keys   int
	// Share is the share of the log's requests they sent.
	Share float64
}

// WindowPair is a short and a long window together, as composite decides
// them (a request admitted only if both admit it): the sliding log's N per
// each period. A client is refused by it exactly when its envelope is
// above either N at its period.
type WindowPair struct {
	// Algorithm is the sliding log's (empty) or another window's, which
	// the pair is decided with.
	Algorithm        limiters.Algorithm
	Short, Long      limiters.Limit
	Clients, Refused int64
	// Separated says the keys it refuses stand apart from the rest, by
	// Margin: of each key refused, its most in the window that refuses it
	// best over the most any kept key sends in it; the least of those.
	Separated bool
	Margin    float64
	// keptMost is the most the kept keys send in each window.
	keptMost [2]int64
	// decidedClients is how many clients the composite refused, decided:
	// Clients, which the envelope predicts.
	decidedClients int64
}
