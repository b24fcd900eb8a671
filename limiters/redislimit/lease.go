package redislimit

import (
	"context"
	"math/bits"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/internal/keytable"
)

// Leases (WithLeases) trade exactness for round trips: a process takes
// several units of a key's quota from Redis in one decision and spends
// them itself, one request at a time, for at most the lease time τ.
//
// The bound. A lease is an ordinary decision of cost L: Redis admits it
// only if the key has room for L units at that moment, as it would admit
// L requests at once. So the moments at which Redis consumes quota always
// form a sequence the exact limiter admits, and every request a process
// admits spends a unit consumed at most τ before it. A request admitted
// in an interval [a, a+D) therefore spent a unit consumed in [a-τ, a+D),
// an interval of length D+τ, in which GCRA or a token bucket of capacity
// C refilled at rate R (C units a period) consumes at most C + (D+τ)·R:
// the fleet admits at most τ·R more in any interval than the exact
// limiter's own bound, C + D·R, and never more in total. A unit not spent
// within τ is dropped, never returned, so the bound needs nothing of the
// fleet but the lease time.
//
// The cost is false denials: a unit leased by one process and unspent
// there is not available to another until it is dropped, and a process
// whose lease was denied denies its key locally until Redis's
// retry-after for the lease it asked, when fewer units than that were
// perhaps already free.
//
// Sizes adapt to the key's demand in this process: the first lease of a
// key is one unit (so a quiet key is decided exactly, one round trip a
// request), and each next lease is the number of requests the key had
// over the last lease, scaled to τ, at most twice the last size and at
// most the Limiter's largest lease.
//
// The table is of fixed size, set-associative like the denial cache, a
// mutex a set; a key pushed out loses its unspent units (which is always
// safe). Keys are hashed with FNV-1a, the same in every run, so that a
// replay at explicit times decides and asks the same; keys made to
// collide only cost their owner round trips. Two keys whose 64-bit hashes
// agree would share a lease.
type leases struct {
	sets   []leaseSet
	mask   uint64
	clock        // the live times
	tau    int64 // the lease time, in ns
	most   int64 // the largest lease, in units
	quota  int   // the key's capacity C, the Decision's Limit
	unit   int64 // the time a unit takes to come back, in ns (1/R)
	policy *limiters.Policy
}

const leaseWays = 4

// leaseEntries is how many keys' leases a Limiter keeps (about 100 bytes
// each).
const leaseEntries = 8192

type leaseSet struct {
	mu sync.Mutex
	e  [leaseWays]lease
}

type lease struct {
	h     uint64
	clock int64 // liveClock or explicitClock
	used  int64 // the last request's time, to pick a victim
	// The units in hand: spendable from from until until.
	units, from, until int64
	// Redis's last word: at seen, the key would be full again at reset.
	seen, reset int64
	// A denied lease: the key is denied locally from deniedAt to next.
	deniedAt, next int64
	// Demand: the last lease's size, and the requests since it was asked.
	size, since, asked int64
	// contended counts the leases Redis denied in a row: other processes
	// are taking the key's quota.
	contended int64
}

// newLeases returns a table of about entries keys, for decisions under
// policy.
func newLeases(entries int, tau time.Duration, most int64, quota int, unit int64, policy *limiters.Policy) *leases {
	sets := max(1, entries/leaseWays)
	sets = 1 << (bits.Len(uint(sets)) - 1)
	return &leases{sets: make([]leaseSet, sets), mask: uint64(sets - 1),
		clock: newClock(), tau: int64(tau), most: most, quota: quota, unit: max(unit, 1), policy: policy}
}

// entry returns h's entry in s, taking an empty one, or the least
// recently used, for a key it does not hold. The set must be locked.
func (s *leaseSet) entry(h uint64, clock, now int64) *lease {
	victim := &s.e[0]
	for i := range s.e {
		e := &s.e[i]
		if e.h == h {
			if e.clock != clock {
				*e = lease{h: h, clock: clock, since: now}
			}
			return e
		}
		if victim.h != 0 && (e.h == 0 || e.used < victim.used) {
			victim = e
		}
	}
	*victim = lease{h: h, clock: clock, since: now}
	return victim
}

// spent is what a lease decided of a request alone: nothing (undecided),
// an admission with units left (n), or a denial until n from now; the key
// is full again reset from now. (Three numbers, built under the set's
// lock, where a Decision would take longer to write.)
type spent struct {
	kind     int8
	n, reset int64
}

// The kinds of spent.
const (
	undecided = iota
	admitted
	denied
)

// spend decides a request of cost n at now from e alone, if it can: from
// the units in hand, or as the denial of a lease still running.
func (ls *leases) spend(e *lease, now int64, n int64) spent {
	e.asked += n
	e.used = now
	switch {
	case e.units >= n && e.from <= now && now < e.until:
		e.units -= n
		return spent{admitted, e.units, max(e.reset-now, 0)}
	case e.deniedAt <= now && now < e.next:
		return spent{denied, e.next - now, max(e.reset-now, 0)}
	}
	return spent{}
}

// decision writes into d the decision sp, a spend's.
func (ls *leases) decision(sp spent, d *limiters.Decision) {
	if sp.kind == admitted {
		*d = limiters.Decision{Allowed: true, Limit: ls.quota, Remaining: int(sp.n), ResetAfter: time.Duration(sp.reset), Policy: ls.policy}
		return
	}
	*d = limiters.Decision{Limit: ls.quota, RetryAfter: time.Duration(sp.n), ResetAfter: time.Duration(sp.reset), Policy: ls.policy, Denied: keytable.Denied}
}

// early looks at what Redis last said of the key before a lease of l
// units is asked for a request of cost n at now. The key had room for
// free units then, less than the debt Redis held, and consumption in other
// processes only takes more (a Reset through another process is not seen
// here). With room for l units, or for half of them and n, it returns the
// size to ask (but for half, after a denial: others take the room it
// sees); with less, it denies the request until room for l units
// could be there, with no round trip.
func (ls *leases) early(e *lease, now, l, n int64, d *limiters.Decision) (int64, bool) {
	if e.seen == 0 || now < e.seen || e.reset <= now {
		return l, false
	}
	free := int64(ls.quota) - (e.reset-now+ls.unit-1)/ls.unit
	switch {
	case free >= l:
		return l, false
	case free >= max(n, l/2) && e.contended == 0:
		e.size = free
		return free, false
	}
	ready := e.reset - (int64(ls.quota)-l)*ls.unit
	e.deniedAt, e.next = now, ready
	*d = limiters.Decision{Limit: ls.quota, RetryAfter: time.Duration(ready - now), ResetAfter: time.Duration(e.reset - now),
		Policy: ls.policy, Denied: keytable.Denied}
	return 0, true
}

// size returns the size of the lease to ask for e at now, for a request of
// cost n, and starts counting demand anew.
func (ls *leases) size(e *lease, now, n int64) int64 {
	want := int64(1)
	if e.size > 0 {
		want = 2 * e.size
		if el := now - e.since; el > 0 {
			// asked requests over el, scaled to τ, rounded up
			hi, lo := bits.Mul64(uint64(e.asked), uint64(ls.tau))
			if hi < uint64(el) {
				q, r := bits.Div64(hi, lo, uint64(el))
				if r > 0 {
					q++
				}
				want = min(want, int64(min(q, 1<<62)))
			}
		}
	}
	l := max(min(want, ls.most), n, 1)
	e.size, e.since, e.asked = l, now, 0
	return l
}

// grant records a lease of l units granted at now, after which Redis
// said the key is full again in reset.
func (ls *leases) grant(e *lease, now, l int64, reset time.Duration) {
	if e.units > 0 && e.from <= now && now < e.until {
		// Units of two leases: all are dropped at the first one's end.
		e.units += l
	} else {
		e.units, e.from, e.until = l, now, now+ls.tau
	}
	e.seen, e.reset = now, now+int64(reset)
	e.deniedAt, e.next, e.contended = 0, 0, 0
}

// lease decides r, a well-formed request, into d, from the units this
// process holds, or takes a lease from Redis for it.
func (l *Limiter) lease(ctx context.Context, r limiters.Request, d *limiters.Decision) error {
	ls, n := l.leases, r.N
	now, clock := ls.now(r.At)
	h := leaseHash(r.Key)
	s := &ls.sets[(h>>8)&ls.mask]
	s.mu.Lock()
	e := s.entry(h, clock, now)
	if sp := ls.spend(e, now, int64(n)); sp.kind != undecided {
		s.mu.Unlock()
		ls.decision(sp, d)
		return nil
	}
	size := ls.size(e, now, int64(n))
	size, early := ls.early(e, now, size, int64(n), d)
	if early {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()

	for try := 0; ; try++ {
		if err := l.decide(ctx, limiters.Request{Key: r.Key, N: int(size), At: r.At}, consume, nil, d); err != nil {
			return err
		}
		s.mu.Lock()
		e = s.entry(h, clock, now)
		switch {
		case d.Allowed:
			ls.grant(e, now, size, d.ResetAfter)
			left := int64(d.Remaining) // in Redis, after the lease
			e.asked -= int64(n)        // spend counts the request again
			ls.decision(ls.spend(e, now, int64(n)), d)
			d.Remaining = int(min(e.units+left, int64(ls.quota)))
		case try == 0 && d.Remaining >= max(n, int(size/2)):
			// Fewer units are free than asked, but half at least: lease
			// those. (Fewer than half: other processes are taking the
			// key's quota, and this one waits for a whole lease.)
			size = int64(d.Remaining)
			e.size = size
			s.mu.Unlock()
			continue
		case d.RetryAfter != limiters.Never:
			// The processes Redis denied wait as long as each other for
			// room: spread their next asks over as many leases' worth
			// of time as this one lost in a row (at most four), by a
			// hash of the key and the time, so that a replay decides
			// the same.
			e.contended++
			spread := uint64(min(e.contended, 4)*size) * uint64(ls.unit)
			jitter := int64((h^uint64(now))*0x9E3779B97F4A7C15>>11) % int64(max(spread, 1))
			e.deniedAt, e.next = now, now+int64(d.RetryAfter)+jitter
			e.seen, e.reset = now, now+int64(d.ResetAfter)
		}
		s.mu.Unlock()
		return nil
	}
}

// forget drops key's lease, and its units: for a reset.
func (ls *leases) forget(key string) {
	h := leaseHash(key)
	s := &ls.sets[(h>>8)&ls.mask]
	s.mu.Lock()
	for i := range s.e {
		if s.e[i].h == h {
			s.e[i] = lease{}
		}
	}
	s.mu.Unlock()
}

// settled forgets what Redis last said of key, and a local denial of it,
// keeping its units: a settle changed the key's state in Redis, and a
// refund may have made room.
func (ls *leases) settled(key string) {
	h := leaseHash(key)
	s := &ls.sets[(h>>8)&ls.mask]
	s.mu.Lock()
	for i := range s.e {
		if e := &s.e[i]; e.h == h {
			e.seen, e.reset, e.deniedAt, e.next = 0, 0, 0, 0
		}
	}
	s.mu.Unlock()
}

// clear drops every lease.
func (ls *leases) clear() {
	for i := range ls.sets {
		s := &ls.sets[i]
		s.mu.Lock()
		s.e = [leaseWays]lease{}
		s.mu.Unlock()
	}
}

// leaseHash is FNV-1a of key, never zero (an empty entry's).
func leaseHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return h | 1
}
