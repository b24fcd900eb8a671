package lincheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ratelab/ratelab/limiters"
)

// A limiter that reads its clock itself: the time a decision used is part
// of its outcome, and a linearization must take decisions in the order of
// their times, as a clock read under the limiter's lock gives them. A
// limiter that reads the time before it takes its lock (a stale now) may
// decide a later time first; the check finds it.

// liveOut is a live decision's outcome: the Decision and the time used.
type liveOut struct {
	D limiters.Decision
	T int64
}

// liveLimiter decides at a clock that ticks on every read, reading it
// under its lock, or (stale) before.
type liveLimiter struct {
	inner subject
	mu    sync.Mutex
	clock atomic.Int64
	stale bool
}

// allow decides a unit request for key, the goroutine yielding its
// processor yields times on its way to the lock: after reading the clock,
// if stale, and before, if not. A stale now is wrong only when a call
// that read the clock after it takes the lock first. One yield each, as
// the plant had, left that mostly to two goroutines running at once,
// which a loaded host seldom gives the test: goroutines taking turns on
// one processor mostly come back from a yield in the order they read the
// clock, and decide in that order (beside six busy loops on 2 cores, the
// planted sliding log was found in 0 to 13 histories of 20; pinned to one
// core, 3 to 11). A call that yields more times than one after it is
// overtaken on one processor as on several; the clock read under the
// lock is as legal after the same yields.
func (l *liveLimiter) allow(key string, yields int) liveOut {
	var t int64
	if l.stale {
		t = l.clock.Add(1)
	}
	for range yields {
		runtime.Gosched()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stale {
		t = l.clock.Add(1)
	}
	at := time.Unix(1_800_000_000, 0).Add(time.Duration(t) * rate.Per / 50)
	return liveOut{D: decideAt(l.inner, key, at), T: at.UnixNano()}
}

type liveState struct {
	prev *liveState
	key  string
	t    int64
}

// liveModel: a key's decisions, replayed in order of their times through
// a fresh limiter, must give each outcome.
func liveModel(fresh func() (subject, func())) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(string)
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			var out [][]porcupine.Operation
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return (*liveState)(nil) },
		Step: func(st, in, out any) (bool, any) {
			s, key, o := st.(*liveState), in.(string), out.(liveOut)
			if s != nil && o.T < s.t {
				return false, st // a clock read under a lock never goes back
			}
			l, done := fresh()
			defer done()
			var chain []*liveState
			for p := s; p != nil; p = p.prev {
				chain = append(chain, p)
			}
			for i := len(chain) - 1; i >= 0; i-- {
				decideAt(l, chain[i].key, time.Unix(0, chain[i].t))
			}
			if !sameDecision(decideAt(l, key, time.Unix(0, o.T)), o.D) {
				return false, st
			}
			return true, &liveState{prev: s, key: key, t: o.T}
		},
		Equal: func(a, b any) bool { return a == b },
	}
}

// recordLive records four goroutines' thirty calls each on l, on two
// keys, each call yielding 0 to 2 times (drawn from seed) on its way to
// l's lock.
func recordLive(l *liveLimiter, seed uint64) []porcupine.Operation {
	var ticks atomic.Int64
	ops := make([][]porcupine.Operation, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := range 30 {
				key := fmt.Sprintf("k%d", (int(seed)+g+i)%2)
				call := ticks.Add(1)
				o := l.allow(key, r.IntN(3))
				ops[g] = append(ops[g], porcupine.Operation{ClientId: g, Input: key, Call: call, Output: o, Return: ticks.Add(1)})
			}
		})
	}
	wg.Wait()
	var out []porcupine.Operation
	for _, o := range ops {
		out = append(out, o...)
	}
	return out
}

// The clock read under the lock is linearizable in every history; the
// planted stale now (read before the lock) is found in some.
func TestPlantedStaleNow(t *testing.T) {
	for _, a := range []limiters.Algorithm{limiters.GCRA, limiters.SlidingLog} {
		for _, stale := range []bool{false, true} {
			illegal := 0
			for i := range max(histories(), 20) {
				inner, done := inMemory(t, a)()
				l := &liveLimiter{inner: inner, stale: stale}
				res := porcupine.CheckOperationsTimeout(liveModel(inMemory(t, a)), recordLive(l, uint64(i)), 20*time.Second)
				done()
				switch {
				case res == porcupine.Illegal:
					illegal++
				case res == porcupine.Unknown:
					t.Logf("%s, stale %v, history %d: the checker gave up", a, stale, i)
				}
			}
			t.Logf("%s, clock read %s: %d of %d histories illegal", a, map[bool]string{false: "under the lock", true: "before the lock (planted)"}[stale], illegal, max(histories(), 20))
			if !stale && illegal > 0 {
				t.Errorf("%s: %d histories illegal with the clock read under the lock", a, illegal)
			}
			if stale && illegal == 0 {
				t.Errorf("%s: the planted stale now was not found in %d histories", a, max(histories(), 20))
			}
		}
	}
}

// decideAt is l's decision of a unit request for key at t.
func decideAt(l subject, key string, at time.Time) limiters.Decision {
	d, _ := l.Decide(context.Background(), limiters.Request{Key: key, N: 1, At: at})
	return d
}
