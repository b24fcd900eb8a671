package harness

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters/redisfault"
)

// takeAway points cfg at a Redis the run can take away as kind says:
// through a proxy of cfg.Redis, or a Sentinel set-up of the lab's own
// whose master it kills. It returns what takes it away, and what closes
// that.
func takeAway(kind string, cfg *server.Config) (taker, func(), error) {
	if kind == outageFailover {
		f, err := newFailover()
		if err != nil {
			return nil, nil, err
		}
		cfg.Redis, cfg.Sentinel = nil, f.st.Options()
		return f, f.close, nil
	}
	cut, err := redisfault.NewProxy(cfg.Redis.Addr)
	if err != nil {
		return nil, nil, err
	}
	opt := *cfg.Redis
	opt.Addr = cut.Addr()
	cfg.Redis = &opt
	return proxyTaker{cut, fault(kind)}, cut.Close, nil
}

// fault is the proxy's fault of an outage of kind.
func fault(kind string) redisfault.Fault {
	if kind == outageRefused {
		return redisfault.Refused
	}
	return redisfault.Unanswered
}

// A taker takes a server's Redis away and gives it back, and says when.
type taker interface {
	away()
	back()
	// times are when it was taken away and when it was back (zero if not
	// yet).
	times() (awayAt, backAt time.Time)
	// err is why it could not take Redis away, if so.
	err() error
	// least is the least time the run gives Redis to come back.
	least() time.Duration
}

// failoverAway is the least time an outage run gives a failover: the
// Sentinels' down-after time (500ms) and their election took 2.6s here.
const failoverAway = 3 * time.Second

// proxyTaker takes Redis away with a fault of its proxy.
type proxyTaker struct {
	cut   *redisfault.Proxy
	fault redisfault.Fault
}

func (p proxyTaker) away()                         { p.cut.Set(p.fault) }
func (p proxyTaker) back()                         { p.cut.Set(redisfault.Pass) }
func (p proxyTaker) times() (time.Time, time.Time) { return p.cut.Times() }
func (p proxyTaker) err() error                    { return nil }
func (p proxyTaker) least() time.Duration          { return 0 }

// failover is a Sentinel set-up of the lab's own, in a folder of its own,
// whose master it kills: Redis is back when the Sentinels name another.
type failover struct {
	st  *redisfault.Sentinel
	dir string

	mu            sync.Mutex
	killed, named time.Time
	failed        error
	stop          chan struct{}
	watching      sync.WaitGroup
}

func newFailover() (*failover, error) {
	dir, err := os.MkdirTemp("", "ratelab-failover-")
	if err != nil {
		return nil, err
	}
	st, err := redisfault.NewSentinel(dir, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("a Sentinel set-up for the failover: %w", err)
	}
	return &failover{st: st, dir: dir, stop: make(chan struct{})}, nil
}

// away kills the master, and watches the Sentinels until they name
// another.
func (f *failover) away() {
	ctx := context.Background()
	old, err := f.st.KillMaster(ctx)
	f.mu.Lock()
	f.killed, f.failed = time.Now(), err
	f.mu.Unlock()
	if err != nil {
		return
	}
	f.watching.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
			if m, err := f.st.Master(ctx); err == nil && m != old {
				f.mu.Lock()
				f.named = time.Now()
				f.mu.Unlock()
				return
			}
		}
	})
}

func (f *failover) back() {} // the Sentinels do it

// least is the Sentinels' down-after time and their election.
func (f *failover) least() time.Duration { return failoverAway }

func (f *failover) times() (time.Time, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed, f.named
}

func (f *failover) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != nil {
		return fmt.Errorf("killing the master: %w", f.failed)
	}
	return nil
}

func (f *failover) close() {
	close(f.stop)
	f.watching.Wait()
	f.st.Close()
	os.RemoveAll(f.dir)
}
