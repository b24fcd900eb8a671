package limiters

import (
	"sync"
	"sync/atomic"
	"time"
)

// Options configure how an in-memory limiter holds its keys. The zero value
// is the default: no cap on keys, a sweep every minute, keys kept as 64-bit
// hashes, and the system's monotonic clock.
type Options struct {
	// MaxKeys caps the keys the limiter holds; zero means no cap. At the
	// cap, a new key first makes the limiter forget keys whose quota is full
	// again, and if none is, it forgets the key closest to full quota among
	// a few sampled: that key's next request starts fresh, so a cap trades a
	// little accuracy for bounded memory. The cap is kept per shard, so the
	// limiter may start forgetting a little before MaxKeys keys.
	MaxKeys int

	// SweepInterval is how often a background goroutine forgets keys whose
	// quota is full again and gives memory back; zero means every minute,
	// negative means never (keys are then forgotten only when a new key
	// needs the room). Close stops the goroutine.
	SweepInterval time.Duration

	// KeepKeyNames makes the limiter keep each key's string so that Walk can
	// name it; the default keeps only a seeded 64-bit hash of the key, and
	// Walk names keys by that hash ("#" and 16 hex digits). Keeping names
	// costs 16 bytes per table slot plus the string itself.
	KeepKeyNames bool

	// Clock tells the time for requests that do not carry one (Request.At
	// zero, AllowN, Walk); nil means a monotonic reading of the system
	// clock taken as an offset from the Unix time at construction, so
	// wall-clock steps after construction do not move window edges. See
	// CoarseClock for a cheaper, coarser clock. A limiter that has decided
	// at its clock is swept as of the clock's time; one driven only by
	// explicit times is swept as of the newest time it has seen.
	Clock Clock
}

// An Option sets one of the Options.
type Option func(*Options)

// WithMaxKeys caps the keys a limiter holds (see Options.MaxKeys).
func WithMaxKeys(n int) Option { return func(o *Options) { o.MaxKeys = n } }

// WithSweepInterval sets how often idle keys are swept (see
// Options.SweepInterval).
func WithSweepInterval(d time.Duration) Option { return func(o *Options) { o.SweepInterval = d } }

// WithKeyNames makes a limiter keep key strings for Walk (see
// Options.KeepKeyNames).
func WithKeyNames() Option { return func(o *Options) { o.KeepKeyNames = true } }

// WithClock sets the clock for calls that do not pass a time (see
// Options.Clock).
func WithClock(c Clock) Option { return func(o *Options) { o.Clock = c } }

// DefaultSweepInterval is the SweepInterval used when none is set.
const DefaultSweepInterval = time.Minute

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// CoarseClock is a Clock that reads the system's monotonic clock only once
// per resolution, in a background goroutine, and answers Now with that
// reading. Now costs under a nanosecond instead of the 25-50ns of a clock
// read, which is the largest single cost of an in-memory decision.
//
// What it gives up: Now lags the true time by up to the resolution, more
// when the process is starved of CPU. A limiter on a coarse clock decides as
// if each request arrived up to that much earlier: buckets refill a little
// later (never more quota than the true time would give), and a request
// within one resolution after a window edge may count in the window before.
//
// Stop it when done; the zero value is not usable.
type CoarseClock struct {
	ns       atomic.Int64
	base     time.Time
	baseNano int64
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewCoarseClock starts a CoarseClock that refreshes every resolution
// (at least 100µs).
func NewCoarseClock(resolution time.Duration) *CoarseClock {
	resolution = max(resolution, 100*time.Microsecond)
	c := &CoarseClock{base: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	c.baseNano = c.base.UnixNano()
	c.ns.Store(c.baseNano)
	go c.run(resolution)
	return c
}

func (c *CoarseClock) run(resolution time.Duration) {
	defer close(c.done)
	t := time.NewTicker(resolution)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.ns.Store(c.baseNano + int64(time.Since(c.base)))
		}
	}
}

// Now returns the last reading, at most about one resolution old.
func (c *CoarseClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// UnixNano returns Now().UnixNano() without building a time.Time.
func (c *CoarseClock) UnixNano() int64 { return c.ns.Load() }

// Stop stops the background goroutine and waits for it to end. Now keeps
// returning the last reading.
func (c *CoarseClock) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// Stats describes what an in-memory limiter holds.
type Stats struct {
	// Keys is the number of keys held.
	Keys int
	// Slots is the number of table slots allocated for them.
	Slots int
	// Evicted counts keys forgotten before their quota was full again,
	// because the key cap (Options.MaxKeys) was reached.
	Evicted int64
}
