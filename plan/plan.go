// Package plan answers "what limit should I set?" from the traffic a
// server already logged: it decides every request of an access log with
// every algorithm at each of a sweep of limits, in simulated time (the
// library's own limiters, as ratelab replay decides them), and says what
// each limit would have refused, of which clients, and the lowest limit
// that spares all but a chosen share of them.
//
// It streams: what it keeps grows with the clients (a key each in every
// limiter, and its counts), not with the lines.
package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
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
	p := &Plan{Config: c}
	cs := newClients(int64(c.period()))
	cv := newCurves(c.Periods, c.Rates)
	var decided chunks // every request decided, for the frontier's buckets
	var ins inputs     // and its input, for a limit run today on each node
	d, err := newDeciders(c)
	if err != nil {
		return nil, err
	}
	defer d.close()

	batches, free := make(chan read, 4), make(chan []accesslog.Entry, 6)
	readErr := make(chan error, 1)
	go func() { readErr <- readBatches(ctx, r, batches, free) }()

	sweeping := len(c.Limits) > 0
	var first, last int64
	var fractions bool // a time not of a whole second
	var lastProgress time.Time
	for batch := range batches {
		out := d.next()
		for i := range batch.entries {
			e := &batch.entries[i]
			if p.Requests == 0 {
				first = e.At
			}
			last = e.At
			fractions = fractions || e.At%int64(time.Second) != 0
			p.Requests++
			if e.Status == 429 {
				p.Logged429++
			}
			drop := c.DropRefused && e.Status == 429
			id, key := cs.see(e, !drop)
			if drop {
				continue
			}
			cv.see(id, e.At, int64(e.N))
			decided.add(logged{id: id, n: int32(e.N), at: e.At})
			if c.Current != nil {
				ins.add(e.Input)
			}
			if sweeping {
				out.reqs = append(out.reqs, request{id: id, n: int32(e.N), at: e.At, key: key})
			}
		}
		if sweeping {
			d.send(out)
		}
		select {
		case free <- batch.entries: // the reader fills it again
		default:
		}
		if progress != nil && time.Since(lastProgress) > time.Second {
			progress(batch.lines, p.Requests, time.Duration(last-first))
			lastProgress = time.Now()
		}
	}
	d.wait()
	if err := <-readErr; err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if p.Requests == 0 {
		return nil, ErrNoRequest
	}
	p.Lines, p.Free = r.Lines(), r.Free()
	p.Skipped, p.Skips = r.Skipped()
	p.NoKey, p.FirstNoKey = r.NoKey()
	p.Unseen, p.Sources = r.Unseen(), r.Sources()
	p.Span = time.Duration(last - first)
	p.WholeSeconds = !fractions
	p.Took = time.Since(began)
	p.finish(cs, d)
	if users := p.curves(cs, cv, decided); users != nil {
		k := kept{shards: []chunks{decided}}
		if c.Current != nil {
			k.inputs = []inputs{ins}
		}
		p.decideCurves(cs, k, users)
		if c.Current != nil {
			if err := p.decideCurrent(cs, k, users); err != nil {
				return nil, err
			}
		}
	}
	p.Took = time.Since(began)
	return p, nil
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

// request is a request as the deciders see it: its client's number, cost
// and time, and the key the limiters count it under.
type request struct {
	id  int32
	n   int32
	at  int64
	key string
}

// deciders decide each batch of requests with every limiter: a worker a
// share of the limits, each limit decided by every algorithm, so that a
// worker sees which algorithms refused a request at a limit and which
// did not.
type deciders struct {
	c       Config
	workers []*worker
	free    chan *batch
}

// batch is requests every worker decides: the last done hands it back.
type batch struct {
	reqs []request
	left atomic.Int32
}

// worker decides at its limits (c.Limits[i] for i in limits).
type worker struct {
	limits []int
	l      [][]composite.Algorithm // [limit][algorithm]
	in     chan *batch
	done   chan struct{}
	tally  []*tally // [limit] of its limits
	d      *deciders
}

// tally is what one limit's algorithms refused.
type tally struct {
	refused  []int64   // [algorithm] requests refused
	clients  [][]int32 // [algorithm][client] requests refused
	only     []int64   // [algorithm] requests it alone refused
	onlyLets []int64   // [algorithm] requests it alone admitted
}

func newDeciders(c Config) (*deciders, error) {
	d := &deciders{c: c, free: make(chan *batch, 16)}
	for w := range c.Workers {
		wk := &worker{in: make(chan *batch, 8), done: make(chan struct{}), d: d}
		d.workers = append(d.workers, wk)
		for i := w; i < len(c.Limits); i += c.Workers {
			row := make([]composite.Algorithm, len(c.Algorithms))
			for j, a := range c.Algorithms {
				// The limiter composite.New makes of one limit, which
				// decides alone (ratelab replay's), without the wrapper.
				l, err := composite.NewAlgorithm(a, c.Limits[i], limiters.WithSweepInterval(-1))
				if err != nil {
					d.close()
					return nil, fmt.Errorf("plan: %s at %s: %w", a, c.Limits[i], err)
				}
				row[j] = l
			}
			wk.limits = append(wk.limits, i)
			wk.l = append(wk.l, row)
			t := &tally{refused: make([]int64, len(c.Algorithms)), clients: make([][]int32, len(c.Algorithms)),
				only: make([]int64, len(c.Algorithms)), onlyLets: make([]int64, len(c.Algorithms))}
			wk.tally = append(wk.tally, t)
		}
	}
	for _, wk := range d.workers {
		go wk.run()
	}
	return d, nil
}

// next returns an empty batch to fill.
func (d *deciders) next() *batch {
	select {
	case b := <-d.free:
		b.reqs = b.reqs[:0]
		return b
	default:
		return &batch{reqs: make([]request, 0, batchSize)}
	}
}

// send gives every worker b, to decide in order.
func (d *deciders) send(b *batch) {
	b.left.Store(int32(len(d.workers)))
	for _, w := range d.workers {
		w.in <- b
	}
}

// wait returns when every batch sent is decided.
func (d *deciders) wait() {
	for _, w := range d.workers {
		close(w.in)
		<-w.done
	}
}

// close closes every limiter.
func (d *deciders) close() {
	for _, w := range d.workers {
		for _, row := range w.l {
			for _, l := range row {
				if l != nil {
					l.Close()
				}
			}
		}
		w.l = nil
	}
}

// run decides each batch limiter by limiter (every request of the batch
// with one limiter, then the next): each limiter sees the requests in
// order, as it would alone, and its key table stays in the cache while it
// does.
func (w *worker) run() {
	defer close(w.done)
	fam, families := familiesOf(w.d.c.Algorithms)
	var masks []uint32
	sweepEvery := max(10*int64(w.d.c.Limits[0].Per), int64(time.Second))
	var swept int64
	for b := range w.in {
		// Forget the keys whose quota has been full again for a while, as
		// the limiters' own sweeper does in a server: decisions are the
		// same (a forgotten key is a fresh one, and a fresh one is full),
		// and memory follows the clients active, not all there were.
		if len(b.reqs) > 0 {
			if at := b.reqs[0].at; swept == 0 {
				swept = at
			} else if at-swept >= sweepEvery {
				for _, row := range w.l {
					for _, l := range row {
						l.Sweep(time.Unix(0, at))
					}
				}
				swept = at
			}
		}
		masks = slices.Grow(masks[:0], len(b.reqs))[:len(b.reqs)]
		for li, row := range w.l {
			t := w.tally[li]
			clear(masks)
			for a, l := range row {
				for i, r := range b.reqs {
					d, err := l.Decide(context.Background(), limiters.Request{Key: r.key, N: int(r.n), At: time.Unix(0, r.at)})
					if err == nil && d.Allowed {
						continue
					}
					// An error is a cost above the limit: refused, as
					// replay says (retry_after null).
					masks[i] |= 1 << fam[a]
					t.refused[a]++
					cl := t.clients[a]
					if int(r.id) >= len(cl) {
						cl = slices.Grow(cl, int(r.id)+1-len(cl))[:int(r.id)+1]
						t.clients[a] = cl
					}
					cl[r.id]++
				}
			}
			var only, onlyLets [8]int64 // by family
			for _, refused := range masks {
				if refused == 0 {
					continue
				}
				if refused&(refused-1) == 0 {
					only[bitIndex(refused)]++
				}
				// Of two policies, one alone refused and the other alone
				// admitted: both count.
				if lets := ^refused & (1<<families - 1); lets != 0 && lets&(lets-1) == 0 {
					onlyLets[bitIndex(lets)]++
				}
			}
			if families > 1 {
				for a := range row {
					t.only[a] += only[fam[a]]
					t.onlyLets[a] += onlyLets[fam[a]]
				}
			}
		}
		if b.left.Add(-1) == 0 {
			select {
			case w.d.free <- b:
			default:
			}
		}
	}
}

// familiesOf numbers the policies of algs: the token bucket, the leaky
// bucket and GCRA are one (the same decisions, DESIGN's "one policy"),
// each other algorithm its own. What one algorithm alone refuses is what
// its policy alone does, or the three buckets would never be alone.
func familiesOf(algs []limiters.Algorithm) (fam []int, n int) {
	bucket := -1
	for _, a := range algs {
		switch {
		case a.IsBucket() && bucket >= 0:
			fam = append(fam, bucket)
		case a.IsBucket():
			bucket = n
			fallthrough
		default:
			fam = append(fam, n)
			n++
		}
	}
	return fam, n
}

func bitIndex(x uint32) int {
	i := 0
	for x > 1 {
		x >>= 1
		i++
	}
	return i
}
