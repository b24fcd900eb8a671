package redislimit

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
)

// Reset forgets key: its next request sees a full quota. It also forgets
// what this process holds of key: its cached denial and its lease.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	keys := make([]string, len(l.suffix))
	for i, s := range l.suffix {
		keys[i] = string(l.appendKey(nil, key, s))
	}
	del := func(ctx context.Context) error { return l.run.c.Del(ctx, keys...).Err() }
	if l.packed > 0 { // the key's field, not the hash the others share
		del = func(ctx context.Context) error { return l.run.c.HDel(ctx, keys[0], key).Err() }
	}
	run := func() error { return l.run.do(ctx, "Reset", del) }
	var err error
	if l.denials != nil {
		err = l.denials.reset(l.denials.hash(key), run)
	} else {
		err = run()
	}
	if l.leases != nil {
		l.leases.forget(key)
	}
	return err
}

// ResetAll forgets every key this limiter holds (the keys with its prefix,
// algorithm and limits), on every server of a cluster, and what this
// process holds of them.
func (l *Limiter) ResetAll(ctx context.Context) error {
	if l.leases != nil {
		defer l.leases.clear()
	}
	if l.denials != nil {
		return l.denials.resetAll(func() error { return l.resetAll(ctx) })
	}
	return l.resetAll(ctx)
}

func (l *Limiter) resetAll(ctx context.Context) error {
	return l.scan(ctx, func(ctx context.Context, c scanner, keys []string) error {
		// One DEL a key, pipelined: a server of a Cluster holds many
		// slots, and one DEL of keys in several is refused (CROSSSLOT).
		return l.run.do(ctx, "ResetAll", func(ctx context.Context) error {
			p := c.Pipeline()
			for _, k := range keys {
				p.Del(ctx, k)
			}
			_, err := p.Exec(ctx)
			return err
		})
	})
}

// Walk calls fn with each key the limiter holds and what a Peek of one
// unit reports for it now, by the server's clock, until fn returns false.
// Keys are found with SCAN, so a key may be reported twice while keys are
// added, or not at all once its quota is full again and it expired.
func (l *Limiter) Walk(ctx context.Context, fn func(key string, d limiters.Decision) bool) error {
	seen := map[string]bool{}
	err := l.scan(ctx, func(ctx context.Context, c scanner, keys []string) error {
		if l.packed > 0 {
			var err error
			if keys, err = l.fields(ctx, c, keys); err != nil {
				return err
			}
		}
		for _, k := range keys {
			key, ok := k, true
			if l.packed == 0 {
				key, ok = l.userKey(k)
			}
			if !ok || seen[key] {
				continue
			}
			seen[key] = true
			var d limiters.Decision
			if err := l.decide(ctx, limiters.Request{Key: key, N: 1}, peek, nil, &d); err != nil {
				return err
			}
			if !fn(key, d) {
				return errStop
			}
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

var errStop = errors.New("stop")

// fields returns the callers' keys packed in hashes, the limiter's.
func (l *Limiter) fields(ctx context.Context, c scanner, hashes []string) ([]string, error) {
	var keys []string
	for _, h := range hashes {
		if !strings.HasPrefix(h, l.o.Prefix+"{%b") {
			continue
		}
		var fields []string
		err := l.run.do(ctx, "HKEYS", func(ctx context.Context) (err error) {
			fields, err = c.HKeys(ctx, h).Result()
			return err
		})
		if err != nil {
			return nil, err
		}
		keys = append(keys, fields...)
	}
	return keys, nil
}

// scanner is what scan needs of a client, or of one server of a cluster.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	HKeys(ctx context.Context, key string) *redis.StringSliceCmd
	Pipeline() redis.Pipeliner
}

// scan calls fn with each batch of the limiter's keys, from every master
// of a cluster, one master after the other.
func (l *Limiter) scan(ctx context.Context, fn func(context.Context, scanner, []string) error) error {
	servers := []scanner{l.run.c}
	if cc, ok := l.run.c.(interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}); ok {
		// ForEachMaster calls its function on every master at once: take
		// the masters from it, and scan them in turn, so that fn (and
		// Walk's) is never called concurrently.
		var mu sync.Mutex
		var masters []scanner
		err := l.run.do(ctx, "the cluster's masters", func(ctx context.Context) error {
			return cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
				mu.Lock()
				masters = append(masters, c)
				mu.Unlock()
				return nil
			})
		})
		if err != nil {
			return err
		}
		mu.Lock()
		servers = masters
		mu.Unlock()
	}
	for _, c := range servers {
		if err := l.scanOne(ctx, c, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanOne calls fn with each batch of the limiter's keys on c.
func (l *Limiter) scanOne(ctx context.Context, c scanner, fn func(context.Context, scanner, []string) error) error {
	for _, s := range l.suffix {
		match := glob(l.o.Prefix) + "{*}" + glob(s)
		var cursor uint64
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var keys []string
			var next uint64
			err := l.run.do(ctx, "SCAN", func(ctx context.Context) (err error) {
				keys, next, err = c.Scan(ctx, cursor, match, 512).Result()
				return err
			})
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := fn(ctx, c, keys); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}
