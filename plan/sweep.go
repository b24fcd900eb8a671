package plan

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// The sweep (Config.Limits): every request decided by every algorithm at
// every limit, as a plan of one pass reads the log.

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
