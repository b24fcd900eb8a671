package plan

import (
	"slices"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// client is what the plan knows of one key's traffic: how much, how fast
// at its peak, and how many agents and paths it came with.
type client struct {
	key       string
	requests  int64
	cost      int64
	logged429 int64
	first     int64 // its first request's time

	// The requests in the window before the last, for its peak: their
	// times and costs, oldest first, and the cost they sum to.
	inWindow []stamp
	head     int
	sum      int64
	peak     int64

	agents, paths distinct
	// series is its peak in each bucket of the plan's grid from the
	// bucket from on: a client of a minute keeps a bucket or two.
	series []uint32
	from   int
}

type stamp struct {
	at int64
	n  int64
}

// see counts a request of cost n at at into the client's window: its
// peak is the most cost any window of length window ending at a request
// held.
func (c *client) see(at, n, window int64) int64 {
	for c.head < len(c.inWindow) && c.inWindow[c.head].at <= at-window {
		c.sum -= c.inWindow[c.head].n
		c.head++
	}
	if c.head > 0 && c.head >= len(c.inWindow)/2 { // compact, keeping the memory to about the peak
		c.inWindow = c.inWindow[:copy(c.inWindow, c.inWindow[c.head:])]
		c.head = 0
	}
	c.inWindow = append(c.inWindow, stamp{at, n})
	c.sum += n
	c.peak = max(c.peak, c.sum)
	return c.sum
}

// distinct counts distinct hashes up to maxDistinct: enough to tell one
// client from many behind one address.
type distinct struct {
	seen []uint64
}

// maxDistinct is how many distinct agents (or paths) a key is counted to:
// a normal user's paths, counted to 64, took up to 512 bytes of it (the
// 10M-line log's peak RSS: 150 MB with 64, 135 MB with 16).
const maxDistinct = 16 // four times what makes a key look like many users (sharedAgents)

func (d *distinct) add(h uint64) {
	if h == 0 || len(d.seen) >= maxDistinct || slices.Contains(d.seen, h) {
		return
	}
	d.seen = append(d.seen, h)
}

func (d *distinct) n() int { return len(d.seen) }

// grid is the buckets the clients' traffic over time is drawn in: a
// width that doubles, halving every series, as the log goes on, so that a
// series is at most buckets long however long the log.
type grid struct {
	origin int64
	width  int64
	last   int // the last bucket a request fell in
	begun  bool
}

// buckets is how many buckets a client's series has at most.
const buckets = 96

// bucket returns at's bucket, first doubling the width (and merging
// every client's series) until at fits.
func (g *grid) bucket(at int64, clients []*client) int {
	if !g.begun {
		g.origin, g.begun = at, true
	}
	for (at-g.origin)/g.width >= buckets {
		g.width *= 2
		g.last /= 2
		for _, c := range clients {
			c.halve()
		}
	}
	b := int((at - g.origin) / g.width)
	g.last = max(g.last, b)
	return b
}

// clients interns the keys of a log: a client a key, numbered in order
// of first request.
type clients struct {
	ids    map[string]int32
	all    []*client
	window int64
	grid   grid
}

func newClients(window int64) *clients {
	return &clients{ids: map[string]int32{}, window: window, grid: grid{width: window}}
}

// see counts e, returning its client's number and interned key; a
// request not decided (decided false: a 429 dropped) counts in the
// client's requests, not in its peak.
func (cs *clients) see(e *accesslog.Entry, decided bool) (int32, string) {
	id, ok := cs.ids[e.Key]
	if !ok {
		id = int32(len(cs.all))
		cs.ids[e.Key] = id
		cs.all = append(cs.all, &client{key: e.Key, first: e.At})
	}
	c := cs.all[id]
	c.count(e)
	if !decided {
		return id, c.key
	}
	s := c.see(e.At, int64(e.N), cs.window)
	b := cs.grid.bucket(e.At, cs.all)
	if c.series == nil {
		c.from = b
	}
	for c.from+len(c.series) <= b {
		c.series = append(c.series, 0)
	}
	c.series[b-c.from] = max(c.series[b-c.from], uint32(min(s, 1<<32-1)))
	return id, c.key
}

// count counts e in the client's requests, cost, 429s, agents and paths.
func (c *client) count(e *accesslog.Entry) {
	c.requests++
	c.cost += int64(e.N)
	if e.Status == 429 {
		c.logged429++
	}
	c.agents.add(e.Agent)
	c.paths.add(e.Path)
}

// halve merges the client's buckets in pairs, for a grid twice as wide:
// bucket i is bucket i/2 now.
func (c *client) halve() {
	if len(c.series) == 0 {
		return
	}
	from := c.from / 2
	n := (c.from+len(c.series)-1)/2 - from + 1
	for k, v := range c.series {
		j := (c.from+k)/2 - from
		if k == 0 || j != (c.from+k-1)/2-from {
			c.series[j] = v // the first of its pair here (j <= k)
		} else {
			c.series[j] = max(c.series[j], v)
		}
	}
	c.series, c.from = c.series[:n], from
}

// keys is each client's key, by number.
func (cs *clients) keys() []string {
	out := make([]string, len(cs.all))
	for id, c := range cs.all {
		out[id] = c.key
	}
	return out
}
