// Package plan answers "what limit should I set?" from the traffic a
// server already logged: it decides every request of an access log with
// every algorithm at each of a sweep of limits, in simulated time (the
// library's own limiters, as ratelab replay decides them), and says what
// each limit would have refused, of which clients, and the lowest limit
// that spares all but a chosen share of them.
//
// It streams: what it keeps grows with the clients (a key each in every
// limiter, and its counts), not with the lines.
//
// A log line goes one way through it: read (Run, pass.see), summed up per
// key (clients.go, curves.go), chosen from (choose.go, policy.go,
// classes.go), decided again (decide.go), and presented (rows.go,
// tables.go, charts.go, nginx.go). docs/house.md draws the path.
package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Config is what a plan tries.
type Config struct {
	// Algorithms are decided in turn (default: all six).
	Algorithms []limiters.Algorithm
	// Limits are the sweep's candidates, one period (a client's peak is
	// counted over it), in increasing order: every request is decided by
	// each algorithm at each of them. None: no sweep, the policy alone
	// (and the clients' peaks counted over a second).
	Limits []limiters.Limit
	// Spare is the share of clients a suggested limit may refuse at
	// least once (0: none).
	Spare float64
	// DropRefused leaves out the requests the log's server refused with
	// a 429: a client would have sent them again, and the log holds that
	// retry too. By default they are decided as the others: demand.
	DropRefused bool
	// Top is how many clients the tables name (0: 10).
	Top int
	// Periods are the window lengths of the clients' envelope (nil:
	// DefaultPeriods, as far as the log reaches), Rates the rates of the
	// buckets' frontier (nil: DefaultRates); Headroom is what the bucket
	// suggested allows above the burst the users were seen to need (0:
	// 1.5).
	Periods  []time.Duration
	Rates    []limiters.Limit
	Headroom float64
	// Outliers is the share of the keys a policy may set apart from the
	// rest as those it is for (0: 1%; always five keys at least, a tenth
	// of a few), Margin
	// how far apart, at least, they must stand (0: 3, a ratio): the least
	// any of them needs over the most any of the rest does. Where none
	// does, the policy spares all but Spare of the keys.
	Outliers, Margin float64
	// Current, if set, is the limit run today, decided over the log as
	// the policy is (Plan.Current).
	Current *Current
	// NoTiers leaves the keys that look like many users among the others
	// (by default they are left out of the policy's arithmetic and given
	// a tier of their own).
	NoTiers bool
	// Workers is how many goroutines decide (0: one a limit, which the
	// scheduler balances over the cores better than a few of them,
	// whose limits cost unequally, balance themselves).
	Workers int
	// Keep is how many requests a plan on several cores (RunOnCores)
	// keeps, at most, to decide what its policy refuses of them (0: every
	// one; 16 bytes each): past it, it says whom the policy refuses and
	// not how many of their requests. A limit run today (Current) is
	// decided over every request whatever it is.
	Keep int64
	// Products are the products the policy is written for (--emit
	// haproxy): each keeps it in its own terms, and the log is replayed
	// through its model (Plan.Products).
	Products []products.Product
	// Key is what the log's requests are counted by (--key): a product
	// that cannot key by it (products.Keyed) says so rather than choose.
	Key accesslog.KeySpec
}

// check validates c, filling its defaults.
func (c *Config) check() error {
	if len(c.Algorithms) == 0 {
		c.Algorithms = limiters.Algorithms()
	}
	if len(c.Algorithms) > 8 {
		return errors.New("plan: at most 8 algorithms")
	}
	for i, a := range c.Algorithms {
		if slices.Contains(c.Algorithms[:i], a) {
			return fmt.Errorf("plan: %s twice", a)
		}
	}
	for i, l := range c.Limits {
		for _, a := range c.Algorithms {
			if err := l.Validate(a); err != nil {
				return fmt.Errorf("plan: limit %s: %w", l, err)
			}
		}
		if l.Per != c.Limits[0].Per {
			return fmt.Errorf("plan: limits %s and %s: a plan's limits share one period (a client's peak is counted over it)", c.Limits[0], l)
		}
		if i > 0 && l.N <= c.Limits[i-1].N {
			return fmt.Errorf("plan: limits %s and %s: want them in increasing order, each once", c.Limits[i-1], l)
		}
	}
	if !(c.Spare >= 0 && c.Spare < 1) {
		return fmt.Errorf("plan: spare %v: want a share from 0 to below 1", c.Spare)
	}
	if c.Top <= 0 {
		c.Top = 10
	}
	if c.Periods == nil {
		c.Periods = DefaultPeriods
	}
	if c.Rates == nil {
		c.Rates = DefaultRates
	}
	for _, d := range c.Periods {
		if d <= 0 {
			return fmt.Errorf("plan: period %v: want a positive duration", d)
		}
	}
	for _, r := range c.Rates {
		if r.N < 1 || r.Per <= 0 || r.Burst != 0 || r.Interval() <= 0 {
			return fmt.Errorf("plan: rate %s: want a count per period, no burst, as in 2/s or 1/10s", r)
		}
	}
	switch {
	case c.Outliers == 0:
		c.Outliers = 0.01
	case !(c.Outliers > 0 && c.Outliers <= 0.5):
		return fmt.Errorf("plan: outliers %v: want a share above 0, at most a half", c.Outliers)
	}
	switch {
	case c.Headroom == 0:
		c.Headroom = 1.5
	case !(c.Headroom >= 1):
		return fmt.Errorf("plan: headroom %v: want 1 or more", c.Headroom)
	}
	switch {
	case c.Margin == 0:
		c.Margin = 3
	case !(c.Margin >= c.Headroom && c.Margin > 1):
		return fmt.Errorf("plan: margin %v: want a ratio above 1, no less than the headroom (%v): a burst is set inside the gap", c.Margin, c.Headroom)
	}
	if c.Keep < 0 {
		return fmt.Errorf("plan: keep %d requests: want 0 (every one) or more", c.Keep)
	}
	if c.Workers <= 0 {
		c.Workers = len(c.Limits)
	}
	c.Workers = min(c.Workers, len(c.Limits))
	return nil
}

// period is the sweep's period, over which a client's peak is counted:
// a second when there is no sweep.
func (c *Config) period() time.Duration {
	if len(c.Limits) == 0 {
		return time.Second
	}
	return c.Limits[0].Per
}

// ErrNoRequest is a log with no request in it: nothing to plan on.
var ErrNoRequest = errors.New("plan: the log holds no request")

// Progress is told, now and then, how far a plan has read.
type Progress func(lines, requests int, logTime time.Duration)

// Run reads r to its end and decides its requests with every algorithm
// at every limit of c.
func Run(ctx context.Context, r *accesslog.Reader, c Config, progress Progress) (*Plan, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	began := time.Now()
	d, err := newDeciders(c)
	if err != nil {
		return nil, err
	}
	defer d.close()
	ps := &pass{p: &Plan{Config: c}, cs: newClients(int64(c.period())), cv: newCurves(c.Periods, c.Rates), d: d}
	batches, free := make(chan read, 4), make(chan []accesslog.Entry, 6)
	readErr := make(chan error, 1)
	go func() { readErr <- readBatches(ctx, r, batches, free) }()
	var lastProgress time.Time
	for batch := range batches {
		ps.see(batch.entries)
		select {
		case free <- batch.entries: // the reader fills it again
		default:
		}
		if progress != nil && time.Since(lastProgress) > time.Second {
			progress(batch.lines, ps.p.Requests, time.Duration(ps.last-ps.first))
			lastProgress = time.Now()
		}
	}
	d.wait()
	if err := <-readErr; err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	p := ps.p
	if p.Requests == 0 {
		return nil, ErrNoRequest
	}
	p.readOf(r, ps.first, ps.last, ps.fractions)
	p.Took = time.Since(began)
	p.finish(ps.cs, d)
	if err := ps.decide(); err != nil {
		return nil, err
	}
	p.Took = time.Since(began)
	return p, nil
}

// pass is a plan of one pass as it reads: its clients and their curves,
// every request decided (kept for the policy, and its input, for a limit
// run today on each node), the sweep's deciders, and the log's first and
// last times, and whether one was not of a whole second.
type pass struct {
	p           *Plan
	cs          *clients
	cv          *curves
	decided     chunks
	ins         inputs
	d           *deciders
	first, last int64
	fractions   bool
}

// see counts a batch of the log's requests, and hands it to the sweep's
// deciders, if a sweep is asked.
func (ps *pass) see(entries []accesslog.Entry) {
	p, c := ps.p, ps.p.Config
	sweeping := len(c.Limits) > 0
	out := ps.d.next()
	for i := range entries {
		e := &entries[i]
		if p.Requests == 0 {
			ps.first = e.At
		}
		ps.last = e.At
		ps.fractions = ps.fractions || e.At%int64(time.Second) != 0
		p.Requests++
		if e.Status == 429 {
			p.Logged429++
		}
		drop := c.DropRefused && e.Status == 429
		id, key := ps.cs.see(e, !drop)
		if drop {
			continue
		}
		ps.cv.see(id, e.At, int64(e.N))
		ps.decided.add(logged{id: id, n: int32(e.N), at: e.At})
		if c.Current != nil {
			ps.ins.add(e.Input)
		}
		if sweeping {
			out.reqs = append(out.reqs, request{id: id, n: int32(e.N), at: e.At, key: key})
		}
	}
	if sweeping {
		ps.d.send(out)
	}
}

// decide chooses the policy from the curves, and decides it, and the
// limit run today, over the requests kept.
func (ps *pass) decide() error {
	p, c := ps.p, ps.p.Config
	users := p.curves(ps.cs, ps.cv, ps.decided)
	if users == nil {
		return nil
	}
	k := kept{shards: []chunks{ps.decided}}
	if c.Current != nil {
		k.inputs = []inputs{ps.ins}
	}
	p.decideCurves(ps.cs, k, users)
	if c.Current != nil {
		return p.decideCurrent(ps.cs, k, users)
	}
	return nil
}

// readOf fills p with what r read: its lines, lines of cost 0, skipped
// and without the key, fields unseen, sources, and the log's span.
func (p *Plan) readOf(r *accesslog.Reader, first, last int64, fractions bool) {
	p.Lines, p.Free = r.Lines(), r.Free()
	p.Skipped, p.Skips = r.Skipped()
	p.NoKey, p.FirstNoKey = r.NoKey()
	p.Unseen, p.Sources = r.Unseen(), r.Sources()
	p.Span = time.Duration(last - first)
	p.WholeSeconds = !fractions
}

// logged is a request decided: its client, cost and time.
type logged struct {
	id, n int32
	at    int64
}

// chunks are requests decided, kept in blocks of chunkSize: no block is
// copied as they grow (10 million of them are 160 MB, and a slice that
// doubled held up to three times that at once).
type chunks [][]logged

const chunkSize = 1 << 16

func (c *chunks) add(l logged) {
	if n := len(*c); n == 0 || len((*c)[n-1]) == chunkSize {
		*c = append(*c, make([]logged, 0, chunkSize))
	}
	last := &(*c)[len(*c)-1]
	*last = append(*last, l)
}

// batchSize is how many requests travel together, reader to planner to
// deciders.
const batchSize = 4096

// read is a batch of requests read, and how many lines the reader had
// read by its end (the reader is the reading goroutine's alone).
type read struct {
	entries []accesslog.Entry
	lines   int
}

// readBatches sends r's requests to out in batches, closing it at the
// end; it returns the error that stopped r, if any. It fills again the
// batches free gives back (each 330 KB: ten million lines in new ones
// were 0.8 GB for the collector).
func readBatches(ctx context.Context, r *accesslog.Reader, out chan<- read, free <-chan []accesslog.Entry) error {
	defer close(out)
	next := func() []accesslog.Entry {
		select {
		case b := <-free:
			return b[:0]
		default:
			return make([]accesslog.Entry, 0, batchSize)
		}
	}
	batch := next()
	for {
		e, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if batch = append(batch, e); len(batch) == batchSize {
			if err := ctx.Err(); err != nil {
				return err // interrupted: the plan of part of a log is no plan
			}
			out <- read{batch, r.Lines()}
			batch = next()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		out <- read{batch, r.Lines()}
	}
	return nil
}
