package plan

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Plan is what a plan found.
type Plan struct {
	Config Config

	// The log: lines read, requests taken, lines that cost 0 (taken by
	// none), lines skipped (and the first few), requests its server
	// refused (429), requests decided, clients, and the time from the
	// first request to the last.
	Lines, Requests, Free, Skipped int
	Skips                          []accesslog.Skip
	// NoKey are the lines skipped that were requests without the key (a
	// health check with no API key), FirstNoKey the first.
	NoKey      int
	FirstNoKey accesslog.Skip
	// Unseen are the fields an option named that no line had (an agent
	// field named wrong: every client then counts no agents).
	Unseen []string
	// Sources are where the log came from (accesslog.Reader.Sources): a
	// file, or the files of each node of a fleet.
	Sources            []accesslog.Source
	Logged429, Decided int
	Clients            int
	Span               time.Duration
	// WholeSeconds is whether every time the log gave was of a whole
	// second (the combined format's are).
	WholeSeconds bool
	// Took is how long the plan ran.
	Took time.Duration
	// Merged is how many shards the plan was merged from (Merge), 0 for a
	// plan of one pass: a merged plan decides no request, and every
	// count of requests refused in it is -1.
	Merged int
	// Cores is how many cores a plan on several (RunOnCores) was made on;
	// Undecided, if it decided no request, why.
	Cores     int
	Undecided string
	// Memory is the soft limit the plan ran under (its caller's to say).
	Memory int64

	// Peaks are the clients' peaks: the most each sent in any window of
	// the limits' period.
	Peaks Peaks
	// Sweep is each algorithm at each limit, algorithm by algorithm.
	Sweep []Point
	// Suggestions are each algorithm's lowest limit that spares all but
	// Config.Spare of the clients.
	Suggestions []Suggestion
	// Top are the clients the suggestions refuse most, most first.
	Top []Client
	// Shared are the keys whose traffic looks like many users: many
	// user agents.
	Shared []Client
	// Pollers are the steady pollers (poller.go), the most requests
	// first; PollerTier what they get, as the shared keys get theirs:
	// the bucket as it is (Scale 1) where it spares them.
	Pollers    []Client
	PollerTier Tier

	// Envelope is the clients' most in any window of each period, the
	// shared keys left out; Frontier, at each rate, their least bursts
	// under a bucket of it: where a few stand apart, and the burst that
	// spares all but the spare share of them. Bucket is the policy the
	// plan suggests (chooseBucket), Separated whether it sets a few keys
	// apart (its Gap) or, none standing apart, spares all but Spare of
	// them; SharedTier is what the shared keys get: the same scaled.
	Envelope  []EnvelopePoint
	Frontier  []FrontierPoint
	Bucket    FrontierPoint
	Separated bool
	// Users is how many keys the policy was chosen over: all but the
	// shared ones.
	Users      int
	SharedTier Tier
	// Classes are the keys (the shared ones left out) grouped by the
	// shape of their traffic, those the bucket refuses each a class of
	// its own, named.
	Classes []Class
	// Caught are the keys the bucket suggested refuses, the most burst
	// needed first (at most 100).
	Caught []string
	// CaughtCurves are the first few of them's own curves.
	CaughtCurves []ClientCurves
	// Windows is a short and a long window suggested together, and
	// WindowsCaught the keys they refuse (at most 100).
	Windows       WindowPair
	WindowsCaught []string
	// WindowsOthers are the same pair decided by the other window
	// algorithms tried: the clients and requests each refuses.
	WindowsOthers []*WindowPair
	// Current is what the limit run today (Config.Current) refuses.
	Current *CurrentResult
	// NginxPolicy is the bucket, the tier and the windows as nginx's
	// limit_req can write them, decided where nginx rounds.
	NginxPolicy NginxPolicy
	// Products are the policy in each product's terms (Config.Products),
	// and what each, replayed over the log, refuses.
	Products []products.Choice

	clientsByID    []string       // each client's key, by its number in Point.refusedOf
	productWindow  limiters.Limit // a window that sets the bucket's keys apart (separatingWindow)
	productTierIDs [][]int32      // the keys of each of productTiers, by number
	cv             *curves        // the keys' curves, once found
}

// Peaks is the distribution of the clients' peaks.
type Peaks struct {
	P50, P90, P99, P999, Max float64
	// Sparing is the least N whose sliding log (N per the period) refuses
	// no more than the spare share of the clients: it refuses exactly the
	// clients whose peak is above N. The sweep's suggestions fall on its
	// limits; this falls where the traffic says.
	Sparing float64
	// CDF is the share of clients (Y) whose peak is at most X.
	CDF [][2]float64
}

// A Point is one algorithm at one limit.
type Point struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// Refused requests, and clients refused at least once.
	Refused, Clients int64
	// Clients90 is how few clients account for 90% of the refusals.
	Clients90 int64
	// Only is how many requests it alone refused at this limit; OnlyLets
	// how many it alone admitted (the others all refused).
	Only, OnlyLets int64
	// RefusedOf are the requests it refused of each client.
	refusedOf []int32
}

// A Suggestion is an algorithm's lowest limit of the sweep that refuses
// no more than the spare share of clients.
type Suggestion struct {
	Algorithm limiters.Algorithm
	// Found is false when none of the sweep does: Point is then its
	// highest.
	Found bool
	Point Point
	// Below is the limit of the sweep below it, which refuses more than
	// the spare share: why it is the lowest. Absent (Below.Limit.N 0)
	// for the sweep's first.
	Below Point
}

// Client is one key's traffic.
type Client struct {
	Key                 string
	Requests, Logged429 int64
	Peak                int64
	Agents, Paths       int
	// Refused are its requests refused by each algorithm at that
	// algorithm's suggestion (as Plan.Suggestions).
	Refused []int64
	// Series is its peak in each of the plan's buckets, from the log's
	// first request; BucketWidth their width.
	Series      []float64
	BucketWidth time.Duration
}

// sharedAgents is how many distinct user agents make a key look like many
// users. Paths do not: one scraper walks thousands.
const sharedAgents = 4

// finish fills p from what the plan counted.
func (p *Plan) finish(cs *clients, d *deciders) {
	c := p.Config
	p.Clients = len(cs.all)
	for _, cl := range cs.all {
		p.clientsByID = append(p.clientsByID, cl.key)
	}
	p.Decided = p.Requests
	if c.DropRefused {
		p.Decided -= p.Logged429
	}
	p.Peaks = peaksOf(cs.all, c.Spare)
	tallies := make([]*tally, len(c.Limits))
	for _, w := range d.workers {
		for i, li := range w.limits {
			tallies[li] = w.tally[i]
		}
	}
	for a, alg := range c.Algorithms {
		for li, lim := range c.Limits {
			t := tallies[li]
			pt := Point{Algorithm: alg, Limit: lim, Refused: t.refused[a], Only: t.only[a], OnlyLets: t.onlyLets[a], refusedOf: t.clients[a]}
			var per []int32
			for _, n := range pt.refusedOf {
				if n > 0 {
					pt.Clients++
					per = append(per, n)
				}
			}
			slices.SortFunc(per, func(x, y int32) int { return cmp.Compare(y, x) })
			var sum int64
			for _, n := range per {
				if float64(sum) >= 0.9*float64(pt.Refused) {
					break
				}
				sum += int64(n)
				pt.Clients90++
			}
			p.Sweep = append(p.Sweep, pt)
		}
	}
	for a, alg := range c.Algorithms {
		if len(c.Limits) == 0 {
			break // no sweep: no suggestion of one number
		}
		pts := p.Sweep[a*len(c.Limits) : (a+1)*len(c.Limits)]
		s := Suggestion{Algorithm: alg, Point: pts[len(pts)-1]}
		for i, pt := range pts {
			if float64(pt.Clients) <= c.Spare*float64(p.Clients) {
				s.Found, s.Point = true, pt
				if i > 0 {
					s.Below = pts[i-1]
				}
				break
			}
		}
		p.Suggestions = append(p.Suggestions, s)
	}
	p.Top = p.top(cs)
	p.Shared = shared(cs, c.Top, cs.grid)
}

// top returns the clients the suggestions refuse most.
func (p *Plan) top(cs *clients) []Client {
	type hit struct {
		id  int
		sum int64
	}
	var hits []hit
	for id := range cs.all {
		var sum int64
		for _, s := range p.Suggestions {
			if id < len(s.Point.refusedOf) {
				sum += int64(s.Point.refusedOf[id])
			}
		}
		if sum > 0 {
			hits = append(hits, hit{id, sum})
		}
	}
	slices.SortFunc(hits, func(x, y hit) int { return cmp.Or(cmp.Compare(y.sum, x.sum), cmp.Compare(x.id, y.id)) })
	var out []Client
	for _, h := range hits[:min(len(hits), p.Config.Top)] {
		cl := clientOf(cs.all[h.id], cs.grid)
		for _, s := range p.Suggestions {
			n := int64(0)
			if h.id < len(s.Point.refusedOf) {
				n = int64(s.Point.refusedOf[h.id])
			}
			cl.Refused = append(cl.Refused, n)
		}
		out = append(out, cl)
	}
	return out
}

// clientOf is c as a plan shows it, its series to the log's last bucket
// (0 after its last request).
func clientOf(c *client, g grid) Client {
	out := Client{Key: c.key, Requests: c.requests, Logged429: c.logged429, Peak: c.peak,
		Agents: c.agents.n(), Paths: c.paths.n(), BucketWidth: time.Duration(g.width)}
	out.Series = make([]float64, g.last+1)
	for i, v := range c.series {
		out.Series[c.from+i] = float64(v)
	}
	return out
}

// shared returns up to n keys that look like many users, the most agents
// first.
func shared(cs *clients, n int, g grid) []Client {
	var ids []int
	for id, c := range cs.all {
		if c.agents.n() >= sharedAgents {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y int) int {
		a, b := cs.all[x], cs.all[y]
		return cmp.Or(cmp.Compare(b.agents.n(), a.agents.n()), cmp.Compare(b.requests, a.requests), cmp.Compare(x, y))
	})
	var out []Client
	for _, id := range ids[:min(len(ids), n)] {
		out = append(out, clientOf(cs.all[id], g))
	}
	return out
}

// peaksOf returns the distribution of the clients' peaks.
func peaksOf(all []*client, spare float64) Peaks {
	if len(all) == 0 {
		return Peaks{}
	}
	v := make([]int64, len(all))
	for i, c := range all {
		v[i] = c.peak
	}
	slices.Sort(v)
	q := func(p float64) float64 {
		return float64(v[min(len(v)-1, int(math.Ceil(p*float64(len(v))))-1)])
	}
	ps := Peaks{P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: float64(v[len(v)-1])}
	// Of n clients, spare·n may be refused: the least N leaves that many
	// peaks above it, at most.
	above := int(math.Floor(spare * float64(len(v))))
	ps.Sparing = float64(max(1, v[max(0, len(v)-1-above)]))
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j] == v[i] {
			j++
		}
		ps.CDF = append(ps.CDF, [2]float64{float64(v[i]), float64(j) / float64(len(v))})
		i = j
	}
	return ps
}
