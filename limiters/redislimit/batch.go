package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching gathers concurrent decisions into batches: many decisions
// share one round trip, and the server reads and writes them with one
// system call each way. Through a *redis.Client (one server, or Sentinel)
// a batch is one run of a script that makes its decisions one after the
// other, atomically each, which saves the server most of its work per
// decision too; through a Cluster or a Ring, whose keys live on several
// servers, it is a pipeline of the usual scripts. A fleet whose processes
// make thousands of decisions a second gets several times the decisions
// per second of Redis, at the cost of a wait in a queue: a decision waits
// for the batch in flight before it to come back. Nothing waits for a
// batch to fill: a batch leaves as soon as a sender is free, with
// whatever is queued. Decisions at the server's clock in one batch are
// made at the one instant the batch reads the clock.
type Batching struct {
	// Pipelines is how many batches may be in flight at once (each on a
	// connection of the client's pool); zero means 2.
	Pipelines int
	// MaxBatch is the most decisions one batch carries; zero means 64.
	// A batch holds the server for its whole run (about 10µs a decision),
	// so a larger one delays every other client of the server longer.
	MaxBatch int
}

// WithBatching gathers concurrent decisions into pipelines (see
// Batching). A batching Limiter runs goroutines: Close it when done.
func WithBatching(b Batching) Option {
	return func(o *Options) { o.Batching = &b }
}

// errClosed is why a batching Limiter that was closed decides nothing.
var errClosed = errors.New("the limiter is closed")

// batcher sends the calls queued on q in batches.
type batcher struct {
	r *runner
	// one is the decision script, which a pipeline runs once a call;
	// many, the batch script (nil: pipelines).
	one, many *script
	// k is the number of keys a call has, and fixed the batch script's
	// ARGV after the number of decisions and k: the two graces and two
	// numbers a limit.
	k     int
	fixed []any
	q     chan *call
	max   int
	stop  chan struct{}
	wg    sync.WaitGroup

	// batches and decisions count what was sent: their ratio is the mean
	// batch.
	batches, decisions atomic.Int64

	// mu orders sends against Close: a call is queued only while closed
	// is false, so that Close's senders find every queued call.
	mu     sync.RWMutex
	closed bool
}

// newBatcher starts b.Pipelines senders of s's calls, each with k keys,
// through r; fixed are the batch script's ARGV after its first two.
func newBatcher(r *runner, s scripts, k int, fixed []any, b Batching) *batcher {
	if b.Pipelines == 0 {
		// Two in flight: one filling while the other is out. More made
		// smaller batches and fewer decisions a second (50 goroutines,
		// GCRA: 2 made 48-57k/s, 4 44-48k, 8 40-45k, 16 31-35k).
		b.Pipelines = 2
	}
	if b.MaxBatch == 0 {
		b.MaxBatch = 64
	}
	bt := &batcher{r: r, one: s.one, k: k, fixed: fixed, q: make(chan *call, b.Pipelines*b.MaxBatch), max: b.MaxBatch, stop: make(chan struct{})}
	if _, one := r.c.(*redis.Client); one {
		bt.many = s.many
	}
	bt.wg.Add(b.Pipelines)
	for range b.Pipelines {
		go bt.send()
	}
	return bt
}

// enqueue queues c, and reports false when it cannot: the limiter is
// closed, or the queue is full (the caller then decides on its own).
func (b *batcher) enqueue(c *call) (queued bool, err error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false, errClosed
	}
	select {
	case b.q <- c:
		return true, nil
	default:
		return false, nil
	}
}

// close stops the senders once they have answered every queued call.
func (b *batcher) close() {
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.mu.Unlock()
	if !already {
		close(b.stop)
	}
	b.wg.Wait()
}

// send is one sender: it takes what is queued, up to max calls, sends
// them in one batch and answers each.
func (b *batcher) send() {
	defer b.wg.Done()
	batch := make([]*call, 0, b.max)
	cmds := make([]*redis.Cmd, 0, b.max)
	for {
		var first *call
		select {
		case first = <-b.q:
		case <-b.stop:
			// No call is queued after stop: answer what is left.
			for {
				select {
				case c := <-b.q:
					c.answer(nil, errClosed)
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < b.max {
			select {
			case c := <-b.q:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.send1(batch, cmds[:0])
		clear(batch)
	}
}

// send1 sends batch, with the earliest of its deadlines; calls whose
// deadline passed in the queue are not sent.
func (b *batcher) send1(batch []*call, cmds []*redis.Cmd) {
	now := time.Now()
	var deadline time.Time
	live := batch[:0]
	for _, c := range batch {
		if !c.deadline.After(now) {
			c.answer(nil, context.DeadlineExceeded)
			continue
		}
		if deadline.IsZero() || c.deadline.Before(deadline) {
			deadline = c.deadline
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	b.batches.Add(1)
	b.decisions.Add(int64(len(live)))
	ctx, cancel := context.WithDeadline(context.Background(), deadline) // one a batch
	defer cancel()
	if b.many != nil {
		b.scripted(ctx, live)
		return
	}
	refused := b.exec(ctx, live, cmds, false)
	if len(refused) > 0 { // the server lacks the script: send it whole
		b.r.evals.Add(1)
		b.exec(ctx, refused, cmds, true)
	}
}

// exec runs calls in one pipeline, each whole (EVAL) if whole is set, and
// answers each, but for those the server refused for want of the script:
// it returns them (in calls' memory).
func (b *batcher) exec(ctx context.Context, calls []*call, cmds []*redis.Cmd, sendWhole bool) (refused []*call) {
	p := b.r.c.Pipeline()
	for _, c := range calls {
		args := c.cmd
		if sendWhole {
			args = whole(b.one, args)
		}
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = p.Process(ctx, cmd)
		cmds = append(cmds, cmd)
	}
	_, _ = p.Exec(ctx) // each command has its error
	refused = calls[:0]
	for i, c := range calls {
		if e := cmds[i].Err(); noScript(e) && !sendWhole {
			refused = append(refused, c)
			continue
		}
		c.answer(cmds[i].Val(), cmds[i].Err())
	}
	clear(cmds)
	return refused
}

// scripted sends calls as one run of the batch script and answers each
// with its part of the reply.
func (b *batcher) scripted(ctx context.Context, calls []*call) {
	k := b.k
	args := make([]any, 0, 5+len(calls)*(k+1)+len(b.fixed))
	args = append(args, "evalsha", b.many.sha, len(calls)*k)
	for _, c := range calls {
		args = append(args, c.cmd[3:3+k]...) // the keys
	}
	args = append(args, len(calls), k)
	args = append(args, b.fixed...)
	for _, c := range calls {
		// The call's ARGV are mode, n, seconds, nanoseconds, grace.
		argv := c.cmd[3+k:]
		n := argv[1].(int)
		if argv[0] == peek {
			n = -n
		}
		if argv[2] == "" {
			args = append(args, n)
		} else {
			args = append(args, fmt.Sprint(n, " ", argv[2], " ", argv[3]))
		}
	}
	var cmd redis.Cmd
	v, err := b.r.eval(ctx, b.r.c, &cmd, b.many, args)
	str, _ := v.(string)
	if err == nil && strings.Count(str, ",") != len(calls)-1 {
		err = fmt.Errorf("the batch script replied %T %.80q, want %d replies", v, v, len(calls))
	}
	for _, c := range calls {
		if err != nil {
			c.answer(nil, err)
			continue
		}
		part, rest, _ := strings.Cut(str, ",")
		c.answer(part, nil)
		str = rest
	}
}
