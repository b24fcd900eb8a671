package keytable

import (
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A shard's denial cache remembers a few keys that unit requests are denied
// for until some time, so that a key hammered past its limit is turned away
// without taking the shard's lock and without writing anything: the cache
// lines stay shared between cores instead of moving to each decision's core.
//
// It is sound because an entry describes the key's state as it is: the
// entry is written from a denial under the shard's lock, and every change
// of the key's state clears it (an admission, through ForgetDenial, and
// forgetting the key). Against an unchanged state, a unit request is denied
// at every time before the first time U at which one would be admitted:
// later times up to U by the definition of U, and earlier times because
// every algorithm decides an earlier time at least as strictly as a later
// one on the same state (the buckets refill less, the windows count in the
// key's latest window, GCRA's debt is larger).
//
// Entries are written under the shard's lock, with a sequence number that
// is odd while one is being written (a seqlock); readers check it before and
// after and take the lock when it moved. Every word is atomic, so the race
// detector agrees.
//
// A key may sit in either of two of a shard's eight entries, which it picks
// by its hash: with one, two of a workload's hottest keys would share an
// entry often enough (one limiter in five, for twenty hot keys) to evict
// each other on every denial. A shard's entries are allocated at its first
// denial, so a limiter that denies little costs little.
type denials struct {
	e [denialWays]denial
}

const denialWays = 8

type denial struct {
	seq   atomic.Uint64
	h     atomic.Uint64
	until atomic.Int64 // unit requests are denied before until
	reset atomic.Int64 // the key is back to full quota at reset
}

// ways returns the two entries h may use.
func (ds *denials) ways(h uint64) (*denial, *denial) {
	i, j := (h>>32)&(denialWays-1), (h>>40)&(denialWays-1)
	if i == j {
		j ^= 1
	}
	return &ds.e[i], &ds.e[j]
}

// Denied reports whether the cache denies a unit request for h at now, and
// if so writes the decision into d. It takes no lock and writes nothing.
func (t *Table[S]) Denied(d *limiters.Decision, h uint64, now int64) bool {
	ds := t.denials[h&t.mask].Load()
	if ds == nil {
		return false
	}
	e1, e2 := ds.ways(h)
	return e1.deny(d, h, now, t.limit, t.policy) || e2.deny(d, h, now, t.limit, t.policy)
}

func (e *denial) deny(d *limiters.Decision, h uint64, now int64, limit int, policy *limiters.Policy) bool {
	s := e.seq.Load()
	if e.h.Load() != h {
		return false
	}
	until, reset := e.until.Load(), e.reset.Load()
	if s&1 != 0 || e.seq.Load() != s || now >= until {
		return false
	}
	d.Allowed = false
	d.Limit = limit
	d.Remaining = 0
	d.RetryAfter = time.Duration(until - now)
	d.ResetAfter = time.Duration(reset - now)
	d.Policy = policy
	d.Denied = Denied
	return true
}

// CacheDenial records the denial d of a unit request for h at now: unit
// requests are denied until now + d.RetryAfter, and the key is back to full
// quota at now + d.ResetAfter. It takes h's entry, or an empty or expired
// one, or the one that expires first. The shard must be locked.
func (sh *Shard[S]) CacheDenial(h uint64, now int64, d *limiters.Decision) {
	until, reset := now+int64(d.RetryAfter), now+int64(d.ResetAfter)
	ds := sh.denials.Load()
	if ds == nil {
		ds = new(denials)
		sh.denials.Store(ds)
	}
	e1, e2 := ds.ways(h)
	e := e1
	if TakesSecond(h, now, e1.way(), e2.way()) {
		e = e2
	}
	if e.h.Load() == h && e.until.Load() == until && e.reset.Load() == reset {
		return
	}
	e.set(h, until, reset)
}

// A Way is what a two-way denial cache's eviction reads of one of the two
// entries a key may sit in: the hash of the key it holds (0 when empty),
// and when its denial ends.
type Way struct {
	Hash  uint64
	Until int64
}

// TakesSecond reports whether a denial of h at now goes in the second of
// the two entries h may sit in, w2, rather than w1: the one that holds h,
// else one empty or expired, else the one that expires first. (The denial
// caches of keytable and redislimit both evict so.)
func TakesSecond(h uint64, now int64, w1, w2 Way) bool {
	switch {
	case w1.Hash == h:
		return false
	case w2.Hash == h:
		return true
	case w1.Hash == 0 || w1.Until <= now:
		return false
	}
	return w2.Hash == 0 || w2.Until <= now || w2.Until < w1.Until
}

func (e *denial) way() Way { return Way{e.h.Load(), e.until.Load()} }

func (e *denial) set(h uint64, until, reset int64) {
	e.seq.Add(1)
	e.h.Store(h)
	e.until.Store(until)
	e.reset.Store(reset)
	e.seq.Add(1)
}

// ForgetDenial clears h's entry, if it has one: the algorithms call it
// when they change h's state. The shard must be locked.
func (sh *Shard[S]) ForgetDenial(h uint64) {
	ds := sh.denials.Load()
	if ds == nil {
		return
	}
	e1, e2 := ds.ways(h)
	for _, e := range []*denial{e1, e2} {
		if e.h.Load() == h {
			e.set(0, 0, 0)
		}
	}
}

// forgetDenials clears every entry. The shard must be locked.
func (sh *Shard[S]) forgetDenials() {
	if ds := sh.denials.Load(); ds != nil {
		for i := range ds.e {
			if ds.e[i].h.Load() != 0 {
				ds.e[i].set(0, 0, 0)
			}
		}
	}
}
