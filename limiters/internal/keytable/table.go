// Package keytable holds the per-key state of the in-memory limiters.
//
// A Table maps a key to a small fixed-size state S. It keeps, per key, a
// seeded 64-bit hash of the key (not the key) and the state, in one of 256
// shards (fewer under a small key cap); each shard is an open-addressing
// table with linear probing kept in Robin Hood order (entries sorted by home
// slot), guarded by its own mutex. Home slots are computed by multiply-shift
// over any table size, so a shard is rebuilt at 87.5% full to 62.5% full
// rather than doubled: that is what keeps a 16-byte state under 40 bytes per
// key at a million keys.
//
// Keys are forgotten only when their state is back to what a fresh key has
// (the caller's idleAt function says from when), at least Grace before the
// newest time the shard has seen. A forward-running clock therefore never
// sees a decision change because a key was forgotten. Forgetting happens when
// a shard needs room for a new key, and in a background sweep that also
// gives memory back; a key cap (Options.MaxKeys) forgets the key closest to
// idle among a few sampled when nothing is idle.
//
// Denials of unit requests are also remembered per shard, apart from the
// lock, so that a key hammered past its limit is turned away without
// locking or writing anything (see denials.go).
//
// Two keys whose hashes collide share one state; with a 64-bit hash that
// happens to a given pair with probability 2^-64 (about 3e-8 for any pair
// among a million keys).
package keytable

import (
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/ratelab/ratelab/limiters"
)

const (
	// maxShards is the number of shards of a table without a small key
	// cap: enough that two cores rarely meet on one lock, few enough that
	// an empty table costs 32KiB.
	maxShards = 256

	// A shard is rebuilt when an insert would take it above maxLoad, and
	// rebuilt to rebuildLoad; it shrinks when a sweep leaves it below
	// shrinkLoad.
	maxLoadNum, maxLoadDen         = 7, 8 // 87.5%
	rebuildLoadNum, rebuildLoadDen = 5, 8 // 62.5%
	shrinkLoadNum, shrinkLoadDen   = 1, 4 // 25%
	minCap                         = 8
	// overflow is the number of slots past the last home slot: probing never
	// wraps around, and an insert that would run past the end grows the
	// shard instead.
	overflow = 32
	// sampled is how many slots around a new key's home are examined for a
	// victim when the key cap is reached and nothing is idle.
	sampled = 16
)

// Grace is how long past its idle time a key is kept. Forgetting is judged
// by the newest time a shard has seen, on any of its keys, not by each key's
// own: a decision whose time is more than Grace behind that newest time may
// find a key forgotten (fresh) that it would have found nearly so.
const Grace = time.Second

// graced is the cutoff for forgetting as of newest: keys idle at or before
// it go. It saturates rather than wrap for times near the minimum.
func graced(newest int64) int64 {
	if newest < math.MinInt64+int64(Grace) {
		return math.MinInt64
	}
	return newest - int64(Grace)
}

type slot[S any] struct {
	h uint64
	s S
}

// Shard is one lock's worth of a Table. Callers lock it with Table.Lock.
type Shard[S any] struct {
	mu      sync.Mutex
	slots   []slot[S]
	keys    []string // parallel to slots, when key names are kept
	cap     uint64   // home slots are [0, cap)
	n       int
	limit   int                      // most keys held, 0 for no cap
	hw      int64                    // newest time seen by a decision
	inserts int                      // since the last full sweep
	evicted int64                    // keys forgotten before they were idle
	denials *atomic.Pointer[denials] // this shard's, in Table.denials
	_       [16]byte
}

// Table is a sharded map from key to state S.
type Table[S any] struct {
	shards   []Shard[S]
	denials  []atomic.Pointer[denials] // a shard's, apart from its lock: see denials.go
	mask     uint64
	limit    int              // the Limit of every decision, for cached denials
	policy   *limiters.Policy // the Policy of every decision
	seed     maphash.Seed
	idleAt   func(*S) int64
	keepKeys bool
	clock    clock
	clocked  atomic.Bool
	sweeper  *sweeper[S]
}

// clock reads the time for calls that do not pass one: the configured
// clock, or a monotonic reading offset from the Unix time at construction.
type clock struct {
	coarse   *limiters.CoarseClock
	other    limiters.Clock
	base     time.Time
	baseNano int64
}

func (c clock) now() int64 {
	switch {
	case c.coarse != nil:
		return c.coarse.UnixNano()
	case c.other != nil:
		return c.other.Now().UnixNano()
	}
	return c.baseNano + int64(time.Since(c.base))
}

// New returns a table for a limiter whose decisions report limit and
// policy, and whose states become equal to a fresh state at idleAt(s)
// (Unix nanoseconds). It starts a background sweeper unless the options
// disable it; Close stops it, and so does the table becoming unreachable.
func New[S any](limit int, policy *limiters.Policy, idleAt func(*S) int64, o limiters.Options) *Table[S] {
	n := maxShards
	if o.MaxKeys > 0 {
		// At least 64 keys a shard, so that per-shard caps adding up to
		// at most MaxKeys are not overrun by the unevenness of hashing.
		for n > 1 && o.MaxKeys/n < 64 {
			n /= 2
		}
	}
	t := &Table[S]{
		shards:   make([]Shard[S], n),
		denials:  make([]atomic.Pointer[denials], n),
		mask:     uint64(n - 1),
		limit:    limit,
		policy:   policy,
		seed:     maphash.MakeSeed(),
		idleAt:   idleAt,
		keepKeys: o.KeepKeyNames,
		clock:    clock{other: o.Clock, base: time.Now()},
	}
	t.clock.baseNano = t.clock.base.UnixNano()
	if c, ok := o.Clock.(*limiters.CoarseClock); ok {
		t.clock.coarse = c
	}
	for i := range t.shards {
		t.shards[i].hw = math.MinInt64
		t.shards[i].denials = &t.denials[i]
		if o.MaxKeys > 0 {
			t.shards[i].limit = max(o.MaxKeys/n, 1)
		}
	}
	if o.SweepInterval > 0 {
		sw := &sweeper[S]{table: weak.Make(t), stop: make(chan struct{}), done: make(chan struct{})}
		t.sweeper = sw
		go sw.run(o.SweepInterval)
		// A limiter nobody closed still stops its sweeper once unreachable.
		runtime.AddCleanup(t, func(sw *sweeper[S]) { sw.signal() }, sw)
	}
	return t
}

// Now reads the table's clock in Unix nanoseconds for a decision, and marks
// the table as driven by its clock, so that the sweeper may forget keys as
// of the clock's time rather than only as of the newest time a decision
// brought.
func (t *Table[S]) Now() int64 {
	if !t.clocked.Load() {
		t.clocked.Store(true)
	}
	return t.clock.now()
}

// Read reads the table's clock without marking it: for looking (Peek,
// Walk), which must not change how the table is swept.
func (t *Table[S]) Read() int64 { return t.clock.now() }

// Close stops the background sweeper, if any, and waits for it to end. The
// table keeps working.
func (t *Table[S]) Close() error {
	if t.sweeper != nil {
		t.sweeper.close()
	}
	return nil
}

// Hash returns the hash the table keeps for key (never zero).
func (t *Table[S]) Hash(key string) uint64 {
	h := maphash.String(t.seed, key)
	if h == 0 {
		h = 1
	}
	return h
}

// Lock hashes key and locks its shard. The caller must Unlock it.
func (t *Table[S]) Lock(key string) (*Shard[S], uint64) {
	h := t.Hash(key)
	return t.LockHash(h), h
}

// LockHash locks the shard of the key whose hash is h. The caller must
// Unlock it.
func (t *Table[S]) LockHash(h uint64) *Shard[S] {
	sh := &t.shards[h&t.mask]
	sh.mu.Lock()
	return sh
}

// Unlock unlocks the shard.
func (sh *Shard[S]) Unlock() { sh.mu.Unlock() }

// home is the first slot h may occupy in a table of cap home slots.
func home(h, cap uint64) uint64 {
	hi, _ := bits.Mul64(h, cap)
	return hi
}

// Find returns h's state, or nil, and records now as a time the shard has
// seen. The state pointer is valid until the shard is unlocked.
func (sh *Shard[S]) Find(h uint64, now int64) *S {
	if now > sh.hw {
		sh.hw = now
	}
	return sh.Get(h)
}

// Get returns h's state, or nil. The pointer is valid until the shard is
// unlocked.
func (sh *Shard[S]) Get(h uint64) *S {
	if i := sh.lookup(h); i >= 0 {
		return &sh.slots[i].s
	}
	return nil
}

// lookup returns the index of h's slot, or -1.
func (sh *Shard[S]) lookup(h uint64) int {
	slots := sh.slots
	if len(slots) == 0 {
		return -1
	}
	hh := home(h, sh.cap)
	for i := hh; i < uint64(len(slots)); i++ {
		c := slots[i].h
		if c == h {
			return int(i)
		}
		if c == 0 || home(c, sh.cap) > hh {
			return -1
		}
	}
	return -1
}

// Insert adds h, which must not be present, with a zero state, and returns
// the state for the caller to initialise before unlocking. It may forget
// idle keys, or at the key cap a nearly idle one, to make room.
func (t *Table[S]) Insert(sh *Shard[S], h uint64, key string) *S {
	if sh.limit > 0 && sh.n >= sh.limit {
		cutoff := graced(sh.hw)
		if sh.inserts >= sh.n/4 {
			t.rebuild(sh, cutoff)
		}
		if sh.n >= sh.limit {
			t.evictNear(sh, h, cutoff)
		}
	}
	if (sh.n+1)*maxLoadDen > int(sh.cap)*maxLoadNum {
		t.rebuild(sh, graced(sh.hw))
	}
	i := sh.place(h)
	for i < 0 {
		t.grow(sh)
		i = sh.place(h)
	}
	if t.keepKeys {
		sh.keys[i] = key
	}
	sh.n++
	sh.inserts++
	return &sh.slots[i].s
}

// place puts h at its place in Robin Hood order, shifting the rest of its
// run one slot on, and returns its index; -1 if the run would go past the
// end of the slots.
func (sh *Shard[S]) place(h uint64) int {
	slots := sh.slots
	hh := home(h, sh.cap)
	i := hh
	for ; i < uint64(len(slots)); i++ {
		c := slots[i].h
		if c == 0 || home(c, sh.cap) > hh {
			break
		}
	}
	e := i
	for e < uint64(len(slots)) && slots[e].h != 0 {
		e++
	}
	if e >= uint64(len(slots)) {
		return -1
	}
	copy(slots[i+1:e+1], slots[i:e])
	slots[i] = slot[S]{h: h}
	if sh.keys != nil {
		copy(sh.keys[i+1:e+1], sh.keys[i:e])
		sh.keys[i] = ""
	}
	return int(i)
}

// remove deletes the entry at i, shifting back the displaced entries after
// it.
func (sh *Shard[S]) remove(i int) {
	slots := sh.slots
	j := i + 1
	for j < len(slots) && slots[j].h != 0 && home(slots[j].h, sh.cap) < uint64(j) {
		j++
	}
	sh.ForgetDenial(slots[i].h)
	copy(slots[i:j-1], slots[i+1:j])
	slots[j-1] = slot[S]{}
	if sh.keys != nil {
		copy(sh.keys[i:j-1], sh.keys[i+1:j])
		sh.keys[j-1] = ""
	}
	sh.n--
}

// capFor is the number of home slots for n keys right after a rebuild.
func (sh *Shard[S]) capFor(n int) uint64 {
	c := max((n*rebuildLoadDen+rebuildLoadNum-1)/rebuildLoadNum, minCap)
	if sh.limit > 0 {
		// Never more than the cap needs.
		c = min(c, max((sh.limit*maxLoadDen+maxLoadNum-1)/maxLoadNum+1, minCap))
	}
	return uint64(c)
}

func (sh *Shard[S]) alloc(cap uint64, keys bool) {
	sh.cap = cap
	sh.slots = make([]slot[S], cap+overflow)
	sh.keys = nil
	if keys {
		sh.keys = make([]string, cap+overflow)
	}
}

// rebuild reallocates the shard for its live keys, forgetting those idle
// at cutoff.
func (t *Table[S]) rebuild(sh *Shard[S], cutoff int64) {
	live := func(s *slot[S]) bool { return t.idleAt(&s.s) > cutoff }
	n := 0
	for i := range sh.slots {
		if s := &sh.slots[i]; s.h != 0 && live(s) {
			n++
		}
	}
	sh.resize(sh.capFor(n+1), t.keepKeys, live)
	sh.inserts = 0
}

// grow makes room when a run reached the end of the slots.
func (t *Table[S]) grow(sh *Shard[S]) {
	sh.resize(sh.cap+sh.cap/2+minCap, t.keepKeys, nil)
}

// resize moves the entries for which live reports true (all, if live is
// nil) into a table of cap home slots, or a larger one if a run would pass
// the end of it.
func (sh *Shard[S]) resize(cap uint64, keepKeys bool, live func(*slot[S]) bool) {
	for {
		old, oldKeys := sh.slots, sh.keys
		sh.alloc(cap, keepKeys)
		n, ok := 0, true
		for i := range old {
			s := &old[i]
			if s.h == 0 {
				continue
			}
			if live != nil && !live(s) {
				sh.ForgetDenial(s.h)
				continue
			}
			j := sh.place(s.h)
			if j < 0 {
				ok = false
				break
			}
			sh.slots[j].s = s.s
			if oldKeys != nil {
				sh.keys[j] = oldKeys[i]
			}
			n++
		}
		if ok {
			sh.n = n
			return
		}
		// A run reached the end: put the old table back and try larger.
		sh.slots, sh.keys = old, oldKeys
		cap += cap / 2
	}
}

// evictNear forgets the key closest to idle among the slots around h's home
// (among all, if those are empty). Forgetting a key idle at cutoff is no
// loss; any other is counted as evicted.
func (t *Table[S]) evictNear(sh *Shard[S], h uint64, cutoff int64) {
	hh := int(home(h, sh.cap))
	victim, at := t.leastIdle(sh, max(hh-sampled/2, 0), min(hh+sampled/2, len(sh.slots)))
	if victim < 0 {
		victim, at = t.leastIdle(sh, 0, len(sh.slots))
	}
	if victim >= 0 {
		sh.remove(victim)
		if at > cutoff {
			sh.evicted++
		}
	}
}

// leastIdle returns the index in [lo, hi) of the entry that becomes idle
// first, and when, or -1.
func (t *Table[S]) leastIdle(sh *Shard[S], lo, hi int) (int, int64) {
	victim, first := -1, int64(0)
	for i := lo; i < hi; i++ {
		s := &sh.slots[i]
		if s.h == 0 {
			continue
		}
		if at := t.idleAt(&s.s); victim < 0 || at < first {
			victim, first = i, at
		}
	}
	return victim, first
}
