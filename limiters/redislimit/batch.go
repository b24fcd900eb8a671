package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching gathers concurrent decisions into pipelines: many decisions
// share one round trip, and the server reads and writes them with one
// system call each way. A fleet whose processes make thousands of
// decisions a second gets several times the decisions per second of
// Redis, at the cost of a wait in a queue: a decision waits for the
// pipeline in flight before it to come back. Nothing waits for a batch to
// fill: a pipeline leaves as soon as a sender is free, with whatever is
// queued.
type Batching struct {
	// Pipelines is how many pipelines may be in flight at once (each on a
	// connection of the client's pool); zero means 4.
	Pipelines int
	// MaxBatch is the most decisions one pipeline carries; zero means 256.
	MaxBatch int
}

// WithBatching gathers concurrent decisions into pipelines (see
// Batching). A batching Limiter runs goroutines: Close it when done.
func WithBatching(b Batching) Option {
	return func(o *Options) { o.Batching = &b }
}

// errClosed is why a batching Limiter that was closed decides nothing.
var errClosed = errors.New("the limiter is closed")

// batcher sends the decisions queued on q in pipelines.
type batcher struct {
	l    *Limiter
	q    chan *call
	max  int
	stop chan struct{}
	wg   sync.WaitGroup

	// mu orders sends against Close: a decision is queued only while
	// closed is false, so that Close's senders find every queued call.
	mu     sync.RWMutex
	closed bool
}

func newBatcher(l *Limiter, b Batching) (*batcher, error) {
	if b.Pipelines < 0 || b.MaxBatch < 0 {
		return nil, fmt.Errorf("batching: pipelines and batch size must not be negative, got %d and %d", b.Pipelines, b.MaxBatch)
	}
	if b.Pipelines == 0 {
		b.Pipelines = 4
	}
	if b.MaxBatch == 0 {
		b.MaxBatch = 256
	}
	bt := &batcher{l: l, q: make(chan *call, b.Pipelines*b.MaxBatch), max: b.MaxBatch, stop: make(chan struct{})}
	bt.wg.Add(b.Pipelines)
	for range b.Pipelines {
		go bt.send()
	}
	return bt, nil
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
// them in one pipeline and answers each.
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
		b.pipeline(batch, cmds[:0])
		clear(batch)
	}
}

// pipeline sends batch in one pipeline, with the earliest of its
// deadlines; calls whose deadline passed in the queue are not sent. A
// server that does not have the script (NOSCRIPT) is sent it with SCRIPT
// LOAD, and the calls it refused go again.
func (b *batcher) pipeline(batch []*call, cmds []*redis.Cmd) {
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
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	refused, _ := b.exec(ctx, live, cmds) // refused for want of the script: load it
	if len(refused) == 0 {
		return
	}
	err := b.l.c.ScriptLoad(ctx, b.l.script.src).Err()
	if err == nil {
		b.l.evals.Add(1)
		if refused, err = b.exec(ctx, refused, cmds); len(refused) == 0 {
			return
		}
	}
	for _, c := range refused {
		c.answer(nil, err)
	}
}

// exec runs calls in one pipeline and answers each, but for those the
// server refused for want of the script: it returns them (in calls'
// memory) and the server's error.
func (b *batcher) exec(ctx context.Context, calls []*call, cmds []*redis.Cmd) (refused []*call, err error) {
	p := b.l.c.Pipeline()
	for _, c := range calls {
		cmd := redis.NewCmd(ctx, c.cmd...)
		cmd.SetFirstKeyPos(3)
		_ = p.Process(ctx, cmd)
		cmds = append(cmds, cmd)
	}
	_, _ = p.Exec(ctx) // each command has its error
	refused = calls[:0]
	for i, c := range calls {
		e := cmds[i].Err()
		if e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
			refused, err = append(refused, c), e
			continue
		}
		c.answer(cmds[i].Val(), e)
	}
	clear(cmds)
	return refused, err
}
