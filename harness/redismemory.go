package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/workloads"
)

// weighBatch is how many decisions a pipeline of a memory run holds.
const weighBatch = 1000

// weigh measures the server's memory per key: newDecider returns, on a
// client, a function deciding one request for a key, and the SCAN pattern
// of the keys it writes. One decision on the lab's client loads the
// limiter's script; then a decision for each of keys keys, on a client
// that queues them in pipelines (a round trip each would take a minute at
// a million keys), grows the server's used_memory (INFO memory): that
// growth over the keys written, counted by SCAN, is the answer, each key's
// name included (and whatever else wrote to the server meanwhile); packed,
// over the fields of the hashes written. The keys are removed after.
func (r *redisLab) weigh(ctx context.Context, packed bool, newDecider func(c redislimit.Client) (func(string), string, error)) (memoryResult, error) {
	keys := r.cfg.Redis.Keys
	warm, match, err := newDecider(r.c)
	if err != nil {
		return memoryResult{}, err
	}
	warm("warm-up")
	q := &queue{Pipeliner: r.c.Pipeline()}
	decide, qmatch, err := newDecider(q)
	if err != nil {
		return memoryResult{}, err
	}
	defer func() {
		for _, m := range []string{match, qmatch} {
			if err := r.sweep(ctx, m); err != nil {
				r.fail(err)
			}
		}
	}()
	memBefore, err := r.settled(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	for i := range keys {
		decide(workloads.UserKey(i))
		if q.Len() < weighBatch && i < keys-1 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return memoryResult{}, err
		}
		ectx, cancel := context.WithTimeout(ctx, 10*redisTimeout)
		_, err := q.Exec(ectx)
		cancel()
		if err != nil {
			return memoryResult{}, fmt.Errorf("harness: Redis at %s: %w", r.addr, err)
		}
	}
	memAfter, err := r.usage(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	held, err := r.count(ctx, qmatch, packed)
	if err != nil {
		return memoryResult{}, err
	}
	if held != keys {
		what := "keys"
		if packed {
			what = "fields"
		}
		return memoryResult{}, fmt.Errorf("harness: Redis at %s holds %d %s after a decision for each of %d users", r.addr, held, what, keys)
	}
	return memoryResult{Users: keys, BytesPerUser: float64(memAfter-memBefore) / float64(held), Tracked: held,
		Note: fmt.Sprintf("Rows kept in Redis: the growth of the server's used_memory (INFO memory) per key it gained, after one decision for each of %d keys (sent in pipelines), "+
			"each key's name (the run's prefix, the user, and for ratelab the algorithm and limit: 50 to 80 bytes) included; the server's memory, not the process's. "+
			"Packed, each user is a field (its name and state) of one of %d hashes, and the growth is per field.", keys, redisPackedHashes)}, nil
}

// count counts the keys matching the SCAN pattern match, or, fields, the
// fields of those keys (hashes).
func (r *redisLab) count(ctx context.Context, match string, fields bool) (int, error) {
	n := 0
	err := r.scan(ctx, match, func(keys []string) error {
		if !fields {
			n += len(keys)
			return nil
		}
		p := r.c.Pipeline()
		lens := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			lens[i] = p.HLen(ctx, k)
		}
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("harness: Redis at %s: %w", r.addr, err)
		}
		for _, l := range lens {
			n += int(l.Val())
		}
		return nil
	})
	return n, err
}

// settled is usage once the server's memory has stopped moving: after
// keys are removed (the last memory run's), Redis shrinks its tables in
// its next cron tick, a tenth of a second later; measured before that, the
// next run would not pay for growing them again. It waits two seconds at
// most.
func (r *redisLab) settled(ctx context.Context) (int64, error) {
	mem, err := r.usage(ctx)
	for range 20 {
		if err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
		was := mem
		if mem, err = r.usage(ctx); err == nil && mem == was {
			return mem, nil
		}
	}
	return mem, err
}

// usage returns the server's used_memory.
func (r *redisLab) usage(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	info, err := r.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("harness: Redis at %s: INFO memory: %w", r.addr, err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			if mem, err := strconv.ParseInt(v, 10, 64); err == nil && mem > 0 {
				return mem, nil
			}
		}
	}
	return 0, fmt.Errorf("harness: Redis at %s: INFO memory has no used_memory", r.addr)
}

// queue is a client that queues every script it is asked to run in a
// pipeline and answers errQueued: a memory run's limiters write their keys
// through it, at a pipeline's pace, and read no decision.
type queue struct{ redis.Pipeliner }

var errQueued = errors.New("harness: queued in a pipeline")

// Process queues a copy of cmd (redislimit reuses its arguments).
func (q *queue) Process(ctx context.Context, cmd redis.Cmder) error {
	args := append([]any(nil), cmd.Args()...)
	q.Pipeliner.Process(ctx, redis.NewCmd(context.Background(), args...))
	return errQueued
}

// EvalSha queues the script (redis_rate runs its scripts so).
func (q *queue) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	q.Pipeliner.EvalSha(ctx, sha, keys, args...)
	return redis.NewCmdResult(nil, errQueued)
}
