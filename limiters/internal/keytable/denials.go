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
// It is sound because a denial does not go stale on its own. Until the
// first time U at which a unit request would be admitted, a key's state
// cannot become more permissive: time passing only brings U nearer, nothing
// is admitted before U, and a time earlier than the one the denial was
// decided at is decided at least as strictly by every algorithm. Only
// forgetting the key (Delete, Clear, eviction) can, and it clears the entry.
//
// Entries are written under the shard's lock, with a sequence number that
// is odd while one is being written (a seqlock); readers check it before and
// after and take the lock when it moved. Every word is atomic, so the race
// detector agrees.
type denials struct {
	e [denialWays]denial
}

const denialWays = 4 // entries a shard, direct-mapped by hash bits

type denial struct {
	seq   atomic.Uint64
	h     atomic.Uint64
	until atomic.Int64 // unit requests are denied before until
	reset atomic.Int64 // the key is back to full quota at reset
}

func (ds *denials) entry(h uint64) *denial {
	return &ds.e[(h>>32)&(denialWays-1)]
}

// Denied reports whether the cache denies a unit request for h at now, and
// if so writes the decision into d. It takes no lock and writes nothing.
func (t *Table[S]) Denied(d *limiters.Decision, h uint64, now int64) bool {
	e := t.denials[h&t.mask].entry(h)
	s := e.seq.Load()
	if e.h.Load() != h {
		return false
	}
	until, reset := e.until.Load(), e.reset.Load()
	if s&1 != 0 || e.seq.Load() != s || now >= until {
		return false
	}
	d.Allowed = false
	d.Limit = t.limit
	d.Remaining = 0
	d.RetryAfter = time.Duration(until - now)
	d.ResetAfter = time.Duration(reset - now)
	return true
}

// CacheDenial records the denial d of a unit request for h at now: unit
// requests are denied until now + d.RetryAfter, and the key is back to full
// quota at now + d.ResetAfter. The shard must be locked.
func (sh *Shard[S]) CacheDenial(h uint64, now int64, d *limiters.Decision) {
	until, reset := now+int64(d.RetryAfter), now+int64(d.ResetAfter)
	e := sh.denials.entry(h)
	if e.h.Load() == h && e.until.Load() == until && e.reset.Load() == reset {
		return
	}
	e.seq.Add(1)
	e.h.Store(h)
	e.until.Store(until)
	e.reset.Store(reset)
	e.seq.Add(1)
}

// forgetDenial clears h's entry, if it has one. The shard must be locked.
func (sh *Shard[S]) forgetDenial(h uint64) {
	if e := sh.denials.entry(h); e.h.Load() == h {
		e.seq.Add(1)
		e.h.Store(0)
		e.seq.Add(1)
	}
}

// forgetDenials clears every entry. The shard must be locked.
func (sh *Shard[S]) forgetDenials() {
	for i := range sh.denials.e {
		e := &sh.denials.e[i]
		if e.h.Load() != 0 {
			e.seq.Add(1)
			e.h.Store(0)
			e.seq.Add(1)
		}
	}
}
