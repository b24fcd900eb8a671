package harness

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
)

// The Redis floors are what the round trip itself costs, beside the Redis
// rows: a "decision" that is EVALSHA of a script that returns 0 at once,
// on the decision's key, and the same gathered into batches as batching
// gathers decisions. No limiter making one round trip a decision can beat
// the first, nor a batching one the second, whatever its script. They
// admit everything, so they run in real time only, and the picks leave
// them out.
const (
	redisFloorName        = "(redis floor)"
	redisBatchedFloorName = "(redis batched floor)"
)

// floorBatch is the most no-ops one batch carries, as redislimit's
// batching sends at most 64 decisions a batch by default.
const floorBatch = 64

// floors returns the two floors on r's server.
func (r *redisLab) floors() []Subject {
	newFloor := func(batched bool) func(limiters.Limit) (limiters.Limiter, func(), error) {
		return func(limiters.Limit) (limiters.Limiter, func(), error) {
			ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
			defer cancel()
			sha, err := r.c.ScriptLoad(ctx, "return 0").Result()
			if err != nil {
				r.fail(err)
				return nil, nil, err
			}
			if !batched {
				return noop{r, sha}, func() {}, nil
			}
			b := newNoopBatcher(r, sha)
			return b, func() { b.Close() }, nil
		}
	}
	return []Subject{
		{Name: redisFloorName, Library: "ratelab", Floor: true, New: newFloor(false)},
		{Name: redisBatchedFloorName, Library: "ratelab", Floor: true, New: newFloor(true)},
	}
}

// noop is the Redis floor: one EVALSHA of a no-op a decision.
type noop struct {
	r   *redisLab
	sha string
}

func (n noop) AllowN(ctx context.Context, key string, _ int) (limiters.Decision, error) {
	if err := n.r.c.EvalSha(ctx, n.sha, []string{key}).Err(); err != nil {
		n.r.fail(err)
		return limiters.Decision{}, err
	}
	return limiters.Decision{Allowed: true}, nil
}

// Decide is AllowN: the floor decides nothing, at any time.
func (n noop) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return n.AllowN(ctx, r.Key, r.N)
}

// Close has nothing to release.
func (noop) Close() error { return nil }

// noopBatcher is the batched Redis floor: decisions queue, and one sender
// takes as many as are queued (up to floorBatch) into one EVALSHA of a
// no-op with their keys, then answers them all, as redislimit's batching
// does with its batch script; nothing waits for a batch to fill.
type noopBatcher struct {
	r    *redisLab
	sha  string
	q    chan *noopCall
	done sync.WaitGroup
	once sync.Once
}

type noopCall struct {
	key string
	err chan error
}

func newNoopBatcher(r *redisLab, sha string) *noopBatcher {
	b := &noopBatcher{r: r, sha: sha, q: make(chan *noopCall, 4096)}
	for range 2 { // two batches in flight, as batching's default
		b.done.Go(b.send)
	}
	return b
}

func (b *noopBatcher) AllowN(ctx context.Context, key string, _ int) (limiters.Decision, error) {
	c := &noopCall{key: key, err: make(chan error, 1)}
	select {
	case b.q <- c:
	case <-ctx.Done():
		return limiters.Decision{}, ctx.Err()
	}
	select {
	case err := <-c.err:
		return limiters.Decision{Allowed: err == nil}, err
	case <-ctx.Done():
		return limiters.Decision{}, ctx.Err()
	}
}

// Decide is AllowN: the floor decides nothing, at any time.
func (b *noopBatcher) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return b.AllowN(ctx, r.Key, r.N)
}

func (b *noopBatcher) send() {
	batch := make([]*noopCall, 0, floorBatch)
	keys := make([]string, 0, floorBatch)
	for c := range b.q {
		batch, keys = append(batch[:0], c), append(keys[:0], c.key)
	more:
		for len(batch) < floorBatch {
			select {
			case c, ok := <-b.q:
				if !ok {
					break more
				}
				batch, keys = append(batch, c), append(keys, c.key)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		err := b.r.c.EvalSha(ctx, b.sha, keys).Err()
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			b.r.fail(err)
		}
		for _, c := range batch {
			c.err <- err
		}
	}
}

// Close stops the sender once what is queued is sent.
func (b *noopBatcher) Close() error {
	b.once.Do(func() { close(b.q) })
	b.done.Wait()
	return nil
}
