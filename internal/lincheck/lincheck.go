// Package lincheck checks that concurrent histories of a limiter are
// linearizable: that every decision made while other goroutines decided on
// the same key is the one some order of the same calls, each taking effect
// between its call and its return, would have given, one at a time.
//
// A history is recorded from goroutines calling Decide, Peek and Reset
// on a few keys, each call's time (an explicit time, part of its input)
// taken from a shared clock just before it, so that calls race both for
// the limiter and for their times. The sequential model is ratelab's own
// in-memory limiter of the same parameters, replayed from a fresh one in
// the order the checker tries, so "the same decisions" means every field
// of the Decision. The checker is porcupine (github.com/anishathalye/
// porcupine), which searches the orders a history allows.
package lincheck

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ratelab/ratelab/limiters"
)

// subject is what a history is recorded from, and what a model is made of:
// a limiter that peeks and resets keys.
type subject interface {
	limiters.Limiter
	limiters.Peeker
	Reset(ctx context.Context, key string) error
}

// The kinds of call: opReserve and opSettle for a Subject that is also a
// limiters.Settler.
const (
	opAllow   = 'a'
	opPeek    = 'p'
	opReset   = 'r'
	opReserve = 'v'
	opSettle  = 's'
)

// call is an operation's input: a call of kind Op for Key at T (Unix ns),
// of cost N. A Reserve is numbered R, and a Settle settles the reservation
// numbered R (which a Reserve of the same goroutine made before) at the
// actual cost N: a reservation is the limiter's own, which only it settles,
// so the model settles the one it made itself when it replayed that
// Reserve.
type call struct {
	Op  byte
	Key string
	T   int64
	N   int
	R   int64
}

func (c call) String() string {
	switch c.Op {
	case opAllow:
		return fmt.Sprintf("Decide(%s, %d, %d)", c.Key, c.T, c.N)
	case opPeek:
		return fmt.Sprintf("Peek(%s, %d)", c.Key, c.T)
	case opReserve:
		return fmt.Sprintf("Reserve(%s, %d, %d) #%d", c.Key, c.T, c.N, c.R)
	case opSettle:
		return fmt.Sprintf("Settle(#%d of %s, %d, %d)", c.R, c.Key, c.T, c.N)
	}
	return fmt.Sprintf("Reset(%s) or Set(%s, %d)", c.Key, c.Key, c.N)
}

// book holds the reservations a limiter made, by number, to settle.
type book map[int64]limiters.Reservation

// plan is how a history is recorded: Goroutines goroutines make Calls
// calls each on Keys keys; each call's time is Start plus Step for each
// call taken before it by any goroutine, but one call in StepBack goes
// back up to five steps (a slow clock, or a decision sent late). Of the
// calls, one in Peeks peeks, one in Resets resets, one in Costly costs 2,
// and one in Settles reserves (and keeps the reservation, if admitted)
// or, when the goroutine holds one, settles one at an actual cost of 0
// to 3; the rest admit one.
type plan struct {
	Seed                                   uint64
	Goroutines, Calls, Keys                int
	Start                                  time.Time
	Step                                   time.Duration
	StepBack, Peeks, Resets, Cost, Settles int
}

// record runs w against s and returns the history: each call with its
// outcome, and its call and return as ticks of one counter every
// goroutine advances.
func record(s subject, w plan) ([]porcupine.Operation, error) {
	var ticks, clock atomic.Int64
	ops := make([][]porcupine.Operation, w.Goroutines)
	errs := make([]error, w.Goroutines)
	var wg sync.WaitGroup
	for g := range w.Goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(w.Seed, uint64(g)))
			var open []call // this goroutine's Reserves, admitted
			held := book{}
			settler, _ := s.(limiters.Settler)
			for range w.Calls {
				c := call{Op: opAllow, Key: fmt.Sprintf("k%d", r.IntN(w.Keys)), N: 1}
				step := clock.Add(1)
				if w.StepBack > 0 && r.IntN(w.StepBack) == 0 {
					step -= 1 + r.Int64N(5)
				}
				c.T = w.Start.Add(time.Duration(step) * w.Step).UnixNano()
				switch {
				case w.Resets > 0 && r.IntN(w.Resets) == 0:
					c.Op, c.N = opReset, 1+r.IntN(2) // N: a Setter's setting
				case w.Peeks > 0 && r.IntN(w.Peeks) == 0:
					c.Op = opPeek
				case w.Cost > 0 && r.IntN(w.Cost) == 0:
					c.N = 2
				case w.Settles > 0 && r.IntN(w.Settles) == 0:
					if settler == nil {
						errs[g] = fmt.Errorf("lincheck: settles asked of %T, which cannot settle", s)
						return
					}
					c.Op, c.R = opReserve, int64(g)<<32|int64(len(ops[g]))
					if len(open) > 0 && r.IntN(2) == 0 {
						j := r.IntN(len(open))
						c.Op, c.Key, c.R, c.N = opSettle, open[j].Key, open[j].R, r.IntN(4)
						open = append(open[:j], open[j+1:]...)
					}
				}
				call := ticks.Add(1)
				if r.IntN(2) == 0 {
					runtime.Gosched() // let calls overlap, on 2 cores too
				}
				d, err := apply(s, c, held)
				if c.Op == opReserve && d.Allowed {
					open = append(open, c)
				}
				ret := ticks.Add(1)
				if err != nil {
					errs[g] = fmt.Errorf("%v: %w", c, err)
					return
				}
				ops[g] = append(ops[g], porcupine.Operation{ClientId: g, Input: c, Call: call, Output: d, Return: ret})
			}
		})
	}
	wg.Wait()
	var out []porcupine.Operation
	for g := range ops {
		if errs[g] != nil {
			return nil, errs[g]
		}
		out = append(out, ops[g]...)
	}
	return out, nil
}

// A setter is a Subject whose third kind of call is not Reset but a
// change of the key's settings (SetTier, for tiers): Set(key, v) for v of
// 1 or 2.
type setter interface {
	Set(key string, v int) error
}

// apply makes call c on s, keeping the reservations s makes in held.
func apply(s subject, c call, held book) (limiters.Decision, error) {
	ctx := context.Background()
	r := limiters.Request{Key: c.Key, N: c.N, At: time.Unix(0, c.T)}
	switch c.Op {
	case opAllow:
		d, _ := s.Decide(ctx, r)
		return d, nil
	case opPeek:
		r.N = 1
		d, _ := s.Peek(ctx, r)
		return d, nil
	case opReserve, opSettle:
		settler, ok := s.(limiters.Settler)
		if !ok {
			return limiters.Decision{}, fmt.Errorf("lincheck: %T cannot settle", s)
		}
		if c.Op == opReserve {
			res, err := settler.Reserve(ctx, r)
			if res.Allowed() {
				held[c.R] = res
			}
			return res.Decision(), err
		}
		res, ok := held[c.R]
		if !ok {
			return limiters.Decision{}, fmt.Errorf("lincheck: no reservation #%d to settle", c.R)
		}
		delete(held, c.R)
		return settler.Settle(ctx, limiters.Settlement{Reservation: res, Actual: c.N, At: r.At})
	}
	if set, ok := s.(setter); ok {
		return limiters.Decision{}, set.Set(c.Key, c.N)
	}
	return limiters.Decision{}, s.Reset(context.Background(), c.Key)
}

// state is the model's state: the calls taken so far on one key, newest
// first, each node shared by the states that extend it.
type state struct {
	prev *state
	c    call
	n    int
	hash uint64
}

// newModel returns the sequential specification: a fresh limiter from fresh,
// replaying a key's calls in order, must give each call's outcome, the
// same by same (nil: every field of the Decision but its Policy, which is
// each limiter's own). Histories are checked a key at a time.
func newModel(fresh func() (subject, func()), same func(got, want limiters.Decision) bool) porcupine.Model {
	if same == nil {
		same = sameDecision
	}
	replays := &replayer{by: map[string]*replay{}}
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string]int{}
			var out [][]porcupine.Operation
			for _, op := range h {
				k := op.Input.(call).Key
				i, ok := by[k]
				if !ok {
					i = len(out)
					by[k] = i
					out = append(out, nil)
				}
				out[i] = append(out[i], op)
			}
			return out
		},
		Init: func() any { return (*state)(nil) },
		Step: func(st, in, out any) (bool, any) {
			s, c := st.(*state), in.(call)
			r := replays.at(c.Key)
			l, ok := r.to(s, fresh)
			if !ok {
				return false, st
			}
			want := out.(limiters.Decision)
			// Most candidates fail on whether they admit: that is peeked
			// first, leaving the model as it was, so that the next
			// candidate from the same state needs no replay.
			if c.Op == opAllow || c.Op == opReserve {
				if p, _ := l.Peek(context.Background(), limiters.Request{Key: c.Key, N: c.N, At: time.Unix(0, c.T)}); p.Allowed != want.Allowed {
					return false, st
				}
			}
			d, err := apply(l, c, r.held)
			next := &state{prev: s, c: c, n: 1, hash: mix(0, c)}
			if s != nil {
				next.n, next.hash = s.n+1, mix(s.hash, c)
			}
			if err != nil || !same(want, d) {
				r.drop()
				return false, st
			}
			r.at = next
			return true, next
		},
		Equal: func(a, b any) bool {
			p, q := a.(*state), b.(*state)
			for p != nil && q != nil && p != q {
				if p.n != q.n || p.hash != q.hash || p.c != q.c {
					return false
				}
				p, q = p.prev, q.prev
			}
			return p == q
		},
		Hash: func(st any) uint64 {
			if s := st.(*state); s != nil {
				return s.hash
			}
			return 0
		},
		DescribeOperation: func(in, out any) string {
			return fmt.Sprintf("%v -> %+v", in.(call), out.(limiters.Decision))
		},
	}
}

func mix(h uint64, c call) uint64 {
	f := fnv.New64a()
	fmt.Fprintf(f, "%d|%c|%s|%d|%d|%v", h, c.Op, c.Key, c.T, c.N, c.R)
	return f.Sum64()
}

// result is what Check found of one history.
type result struct {
	Verdict porcupine.CheckResult
	// Calls is the history's length; Overlapping, how many of its calls
	// overlapped another call on the same key (the ones whose order the
	// checker had to search).
	Calls, Overlapping int
}

// checkHistory records a history of s under w and checks it against model,
// within timeout.
func checkHistory(s subject, model porcupine.Model, w plan, timeout time.Duration) (result, error) {
	h, err := record(s, w)
	if err != nil {
		return result{Verdict: porcupine.Unknown}, err
	}
	return result{Verdict: porcupine.CheckOperationsTimeout(model, h, timeout), Calls: len(h), Overlapping: overlapping(h)}, nil
}

// sameDecision compares decisions field by field, but for the Policy,
// which is each limiter's own: the limiter under test's and the model's
// are two.
func sameDecision(got, want limiters.Decision) bool {
	got.Policy, want.Policy = nil, nil
	return got == want
}

// sameVerdict compares decisions by what they decide (Allowed, Limit and
// Remaining), not by when they say to come back.
func sameVerdict(got, want limiters.Decision) bool {
	return got.Allowed == want.Allowed && got.Limit == want.Limit && got.Remaining == want.Remaining
}

// overlapping counts the calls of h that overlap another on the same key.
func overlapping(h []porcupine.Operation) int {
	n := 0
	for i, a := range h {
		for j, b := range h {
			if i != j && a.Input.(call).Key == b.Input.(call).Key && a.Call < b.Return && b.Call < a.Return {
				n++
				break
			}
		}
	}
	return n
}

// replayer keeps, for each key (each partition, which one goroutine of
// the checker searches), the model limiter of the state last reached, so
// that a step from it costs one call, not a replay of every call before.
type replayer struct {
	mu sync.Mutex
	by map[string]*replay
}

type replay struct {
	l    subject
	done func()
	at   *state
	held book // the reservations l made
}

func (r *replayer) at(key string) *replay {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.by[key]
	if !ok {
		p = &replay{}
		r.by[key] = p
	}
	return p
}

// to returns the model at state s, replaying s's calls into a fresh
// limiter unless it is at s already.
func (r *replay) to(s *state, fresh func() (subject, func())) (subject, bool) {
	if r.l != nil && r.at == s {
		return r.l, true
	}
	r.drop()
	r.l, r.done = fresh()
	r.held = book{}
	var calls []call
	for p := s; p != nil; p = p.prev {
		calls = append(calls, p.c)
	}
	for i := len(calls) - 1; i >= 0; i-- {
		if _, err := apply(r.l, calls[i], r.held); err != nil {
			r.drop()
			return nil, false
		}
	}
	r.at = s
	return r.l, true
}

func (r *replay) drop() {
	if r.l != nil {
		r.done()
	}
	r.l, r.done, r.at, r.held = nil, nil, nil, nil
}
