package keytable

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
	"weak"

	"github.com/ratelab/ratelab/limiters"
)

// What a table does to all its keys at once: forget one or all, count
// them, walk them, and sweep the idle ones away, in the background too.

// Delete forgets key.
func (t *Table[S]) Delete(key string) {
	sh, h := t.Lock(key)
	defer sh.Unlock()
	if i := sh.lookup(h); i >= 0 {
		sh.remove(i)
	}
}

// Clear forgets every key.
func (t *Table[S]) Clear() {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.slots, sh.keys, sh.cap, sh.n, sh.inserts = nil, nil, 0, 0, 0
		sh.hw = math.MinInt64
		sh.forgetDenials()
		sh.mu.Unlock()
	}
}

// Stats reports what the table holds.
func (t *Table[S]) Stats() limiters.Stats {
	var st limiters.Stats
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Keys += sh.n
		st.Slots += len(sh.slots)
		st.Evicted += sh.evicted
		sh.mu.Unlock()
	}
	return st
}

// Walk calls fn with each key and what see reports of its state, until fn
// returns false or ctx is done. It goes shard by shard: see runs under the
// shard's lock (so it may read what the state points to), fn runs after the
// lock is released (so it may call the table). Keys are named by their hash
// ("#" and 16 hex digits) when names are not kept.
func (t *Table[S]) Walk(ctx context.Context, see func(*S) limiters.Decision, fn func(key string, d limiters.Decision) bool) error {
	type entry struct {
		h   uint64
		key string
		d   limiters.Decision
	}
	var buf []entry
	for i := range t.shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		sh := &t.shards[i]
		buf = buf[:0]
		sh.mu.Lock()
		for j := range sh.slots {
			s := &sh.slots[j]
			if s.h == 0 {
				continue
			}
			e := entry{h: s.h, d: see(&s.s)}
			if sh.keys != nil {
				e.key = sh.keys[j]
			}
			buf = append(buf, e)
		}
		named := sh.keys != nil
		sh.mu.Unlock()
		for _, e := range buf {
			if !named {
				e.key = fmt.Sprintf("#%016x", e.h)
			}
			if !fn(e.key, e.d) {
				return nil
			}
		}
	}
	return nil
}

// Sweep forgets every key idle as of now (or the newest time each shard has
// seen, if later), less Grace, and shrinks shards left sparse. The
// background sweeper calls it; tests may too.
func (t *Table[S]) Sweep(now int64) {
	sweepShards(t.shards, t.idleAt, now)
}

func sweepShards[S any](shards []Shard[S], idleAt func(*S) int64, now int64) {
	for i := range shards {
		sh := &shards[i]
		sh.mu.Lock()
		cutoff := graced(max(now, sh.hw))
		for j := 0; j < len(sh.slots); {
			s := &sh.slots[j]
			if s.h != 0 && idleAt(&s.s) <= cutoff {
				sh.remove(j) // the next entry may have moved into j
				continue
			}
			j++
		}
		sh.inserts = 0
		if sh.n == 0 {
			sh.slots, sh.keys, sh.cap = nil, nil, 0
		} else if sh.cap > minCap && uint64(sh.n*shrinkLoadDen) < sh.cap*shrinkLoadNum {
			sh.resize(sh.capFor(sh.n), sh.keys != nil, nil)
		}
		sh.mu.Unlock()
	}
}

// sweeper sweeps a table every interval until stopped. It holds the table
// only weakly, between ticks too: a table the limiter's users have
// dropped is then unreachable, whatever its idleAt holds (a limiter's own
// idleAt may hold the limiter, which holds the table), and its cleanup
// stops the sweeper.
type sweeper[S any] struct {
	table weak.Pointer[Table[S]]
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (sw *sweeper[S]) run(interval time.Duration) {
	defer close(sw.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-sw.stop:
			return
		case <-tick.C:
			if !sw.sweep() {
				return
			}
		}
	}
}

// sweep sweeps the table once, if it is still there. A table driven only
// by explicit times (a simulation, a replay) is swept as of the newest
// time it has seen, never as of the wall clock.
func (sw *sweeper[S]) sweep() bool {
	t := sw.table.Value()
	if t == nil {
		return false
	}
	now := int64(-1 << 63)
	if t.clocked.Load() {
		now = t.clock.now()
	}
	t.Sweep(now)
	return true
}

// signal tells the sweeper to stop, without waiting.
func (sw *sweeper[S]) signal() {
	sw.once.Do(func() { close(sw.stop) })
}

// close stops the sweeper and waits for it to end.
func (sw *sweeper[S]) close() {
	sw.signal()
	<-sw.done
}
