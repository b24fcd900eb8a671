package redislimit

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
)

// The denial cache remembers, in the process, denials Redis made of unit
// requests, so that a key hammered past its limit is turned away without a
// round trip until Redis's own retry-after has passed (WithDenialCache).
//
// It is exact because only consumption happens elsewhere: once Redis has
// denied a unit request for a key at time t, saying retry after d, no
// process of the fleet can make that key admit anything before t + d
// (admitting takes room, and nothing gives room back but time), and until
// then the key's state is frozen, so Redis would answer every unit request
// with the same denial, its retry-after and reset-after counted down. The
// cache answers only from the time of the denial on: at an earlier time
// (explicit times may step back) the state is another. (Of several limits,
// a denial is cached only when one limit denied: a limit that admits goes
// on admitting while the state is frozen, but one of two that deny may
// come to admit before the other, and the denial would name it still. The
// Decision's Limit is that of the limit with the least room, the smaller
// of equals: the denial is cached only when that is the limit that
// denied, which then stays so.) A request of a larger cost is not cached:
// it goes to Redis. For GCRA and the token bucket with one
// limit, an admission that leaves the key empty is cached as the denial
// of a unit until the next unit fits (its debt down to C-1 units), which
// is what Redis would answer.
//
// What breaks the argument is what gives room back other than time: Reset,
// ResetAll and Settle through this Limiter clear the cache; a Reset through
// another process (or a key deleted by hand) does not, and this process
// may go on denying the key until the cached retry-after passes, at most
// one window or one bucket's refill. A change of limits is a new Limiter,
// with a cache of its own.
//
// For the server's clock, the cached denial runs from the moment the
// decision was sent, by this process's monotonic clock: the server decided
// no earlier, so the cache never denies past the time Redis named (its
// clock's skew cancels out). A decision at an explicit time is cached at
// that time, and used for explicit times only.
//
// Each entry is a cache line: a sequence number that is odd while the
// entry is being written (a writer takes it by compare-and-swap, and gives
// up if another holds it: it is only a cache), then the key's hash and the
// denial. A key may sit in either of two entries of its set, picked by its
// hash. Every word is atomic, so the race detector agrees.
type denials struct {
	seed  maphash.Seed
	sets  []denialSet
	mask  uint64
	clock // the live entries' times
	// resetting counts the ResetAlls under way: while one is, the cache
	// neither answers nor keeps anything.
	resetting atomic.Int32
}

const denialWays = 4

type denialSet struct {
	e [denialWays]denial
	// gen counts the admissions and resets of the set's keys: a denial
	// Redis made before one, whose reply comes back after it, is not
	// cached (it may be older than the admission, in Redis's order).
	gen atomic.Uint64
	// resetting counts the Resets of the set's keys under way (see
	// reset).
	resetting atomic.Int32
	_         [52]byte
}

type denial struct {
	seq   atomic.Uint64
	h     atomic.Uint64
	clock atomic.Int64 // liveClock or explicitClock: what the times count on
	from  atomic.Int64 // the time of the denial
	until atomic.Int64 // unit requests are denied from from until until
	reset atomic.Int64 // the key is back to full quota at reset
	// limitBy is the Decision's Limit, shifted 16 bits, and its Denied.
	limitBy atomic.Int64
	_       [8]byte
}

// The clocks an entry's times are on.
const (
	liveClock     = 1 // ns since clock.base, on the monotonic clock
	explicitClock = 2 // Unix ns
)

// clock is this process's monotonic clock, counted from base: the denial
// cache, the leases and the breaker keep their live times on it.
type clock struct{ base time.Time }

func newClock() clock { return clock{base: time.Now()} }

// since is the time since base, in ns.
func (c clock) since() int64 { return int64(time.Since(c.base)) }

// now returns the time of a decision at t (zero: the server's clock, read
// here as this process's monotonic clock) on the clock an entry keeps.
func (c clock) now(t time.Time) (ns, on int64) {
	if t.IsZero() {
		return c.since(), liveClock
	}
	return t.UnixNano(), explicitClock
}

// newDenials returns a cache of about entries entries (a power of two, at
// least one set).
func newDenials(entries int) *denials {
	sets := max(1, entries/denialWays)
	sets = 1 << (bits.Len(uint(sets)) - 1)
	return &denials{seed: maphash.MakeSeed(), sets: make([]denialSet, sets), mask: uint64(sets - 1), clock: newClock()}
}

// hash hashes key, never to zero (an empty entry's).
func (ds *denials) hash(key string) uint64 {
	return maphash.String(ds.seed, key) | 1
}

// gen returns the count of h's set, to be given to put.
func (ds *denials) gen(h uint64) uint64 { return ds.sets[(h>>8)&ds.mask].gen.Load() }

func (ds *denials) ways(h uint64) (*denial, *denial) {
	s := &ds.sets[(h>>8)&ds.mask]
	i, j := h>>56&(denialWays-1), h>>60&(denialWays-1)
	if i == j {
		j ^= 1
	}
	return &s.e[i], &s.e[j]
}

// denied reports whether the cache denies a unit request for h at now, on
// clock, and if so writes the decision into d (but its Policy). It takes
// no lock and writes nothing.
func (ds *denials) denied(d *limiters.Decision, h uint64, now, clock int64) bool {
	if ds.resetting.Load() != 0 || ds.sets[(h>>8)&ds.mask].resetting.Load() != 0 {
		return false
	}
	e1, e2 := ds.ways(h)
	return e1.deny(d, h, now, clock) || e2.deny(d, h, now, clock)
}

func (e *denial) deny(d *limiters.Decision, h uint64, now, clock int64) bool {
	s := e.seq.Load()
	if s&1 != 0 || e.h.Load() != h {
		return false
	}
	c, from, until, reset, lb := e.clock.Load(), e.from.Load(), e.until.Load(), e.reset.Load(), e.limitBy.Load()
	if e.seq.Load() != s || c != clock || now < from || now >= until {
		return false
	}
	*d = limiters.Decision{Limit: int(lb >> 16), RetryAfter: time.Duration(until - now), ResetAfter: time.Duration(max(reset-now, 0)), Denied: limiters.Denials(lb)}
	return true
}

// learn keeps in the cache what Redis's decision d of a request for h
// says: an admission drops h's entries (a denial from before it no longer
// holds); a unit request denied by one limit (cache: the request was
// asked of the cache at now on clock, its set's count gen) is cached.
func (l *Limiter) learn(h, gen uint64, now, clock int64, cache bool, d *limiters.Decision) {
	ds := l.denials
	by, denied := d.Denied.Longest()
	switch {
	case d.Allowed:
		// On a clock that runs forward an admission comes after any
		// denial's retry-after, but explicit times may step back.
		g := ds.drop(h)
		if cache && d.Remaining == 0 && l.unit > 0 && g == gen+1 {
			// The key is empty: the next unit fits once its debt is down
			// to C-1 units, and until then Redis would deny every unit
			// request, as if it had denied one now.
			if wait := int64(d.ResetAfter) - int64(l.quota[0]-1)*l.unit; wait > 0 {
				ds.put(h, now, clock, limiters.Decision{Limit: d.Limit, RetryAfter: time.Duration(wait), ResetAfter: d.ResetAfter, Denied: keytable.Denied}, g)
			}
		}
	case cache && denied && d.Denied&0xff == 1<<by && d.Limit == l.quota[by]:
		ds.put(h, now, clock, *d, gen)
	}
}

// put records d, Redis's denial of a unit request for h at now on clock,
// asked for when h's set's count was gen. It takes h's entry, or an empty
// or expired one, or the one that expires first; it gives up if another
// goroutine is writing there.
func (ds *denials) put(h uint64, now, clock int64, d limiters.Decision, gen uint64) {
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter == limiters.Never || !ds.keeps(h, gen) {
		return
	}
	until, reset := now+int64(d.RetryAfter), now+int64(d.ResetAfter)
	e1, e2 := ds.ways(h)
	e := e1
	if keytable.TakesSecond(h, now, e1.way(), e2.way()) {
		e = e2
	}
	s := e.seq.Load()
	if s&1 != 0 || !e.seq.CompareAndSwap(s, s+1) {
		return
	}
	e.h.Store(h)
	e.clock.Store(clock)
	e.from.Store(now)
	e.until.Store(until)
	e.reset.Store(reset)
	e.limitBy.Store(int64(d.Limit)<<16 | int64(d.Denied))
	if !ds.keeps(h, gen) {
		// An admission or a reset came while this was written, and its
		// drop may have looked here before it was: undo it.
		e.h.Store(0)
		e.until.Store(0)
	}
	e.seq.Store(s + 2)
}

// keeps reports whether a denial of h asked for when its set's count was
// gen may be kept: no admission or reset since, and none under way.
func (ds *denials) keeps(h uint64, gen uint64) bool {
	s := &ds.sets[(h>>8)&ds.mask]
	return s.gen.Load() == gen && s.resetting.Load() == 0 && ds.resetting.Load() == 0
}

// reset runs del, which deletes h's keys in Redis, with the cache of h's
// set out of use: it answers nothing and keeps nothing from before del
// ends until after (a denial of the key from before, answered once Redis
// has forgotten the key, would be older than the reset; one asked before
// and answered after would be kept).
func (ds *denials) reset(h uint64, del func() error) error {
	s := &ds.sets[(h>>8)&ds.mask]
	s.resetting.Add(1)
	defer s.resetting.Add(-1) // runs after the drop: nothing kept in between
	defer ds.drop(h)
	return del()
}

// resetAll is reset for every key, clearing every entry.
func (ds *denials) resetAll(del func() error) error {
	ds.resetting.Add(1)
	defer ds.resetting.Add(-1)
	defer ds.clear()
	return del()
}

// drop clears h's entries, waiting for a writer there to finish, and
// keeps denials asked for before it from being cached after: for an
// admission, after which a denial of an earlier time no longer holds. It
// returns the set's new count.
func (ds *denials) drop(h uint64) uint64 {
	g := ds.sets[(h>>8)&ds.mask].gen.Add(1)
	e1, e2 := ds.ways(h)
	e1.clear(h)
	e2.clear(h)
	return g
}

// clear empties every entry, as forget does one.
func (ds *denials) clear() {
	for i := range ds.sets {
		ds.sets[i].gen.Add(1)
	}
	for i := range ds.sets {
		for j := range ds.sets[i].e {
			ds.sets[i].e[j].clear(0)
		}
	}
}

func (e *denial) way() keytable.Way { return keytable.Way{Hash: e.h.Load(), Until: e.until.Load()} }

// clear empties e if it holds h (any hash, for 0).
func (e *denial) clear(h uint64) {
	for {
		s := e.seq.Load()
		if s&1 == 0 && (h != 0 && e.h.Load() != h || h == 0 && e.h.Load() == 0) {
			return
		}
		if s&1 == 0 && e.seq.CompareAndSwap(s, s+1) {
			e.h.Store(0)
			e.until.Store(0)
			e.seq.Store(s + 2)
			return
		}
	}
}
