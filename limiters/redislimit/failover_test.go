package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/limiters/redislimit"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// A failover set-up: servers of the test's own, a client of them, and how
// to kill the master of a key.
type failoverSetup struct {
	name   string
	lag    time.Duration // how far behind the replica's link holds it
	client redislimit.Client
	// kill kills the master that holds key (SIGKILL) and returns its address.
	kill func(ctx context.Context, key string) (string, error)
	// restart starts the killed master again, as a supervisor would: it
	// comes back as a replica of the one promoted.
	restart func(addr string) error
	// keys returns n keys (of the caller's key space, before the
	// limiter's prefix) that live on the master kill kills.
	keys func(ctx context.Context, n int, stem string) ([]string, error)
}

// The limiters a failover decides with: each algorithm that counts in a
// way a lost write shows, plain, with the denial cache, and acknowledged
// by the replica.
type failoverCase struct {
	algo  limiters.Algorithm
	cache bool
	ack   bool
}

func (c failoverCase) String() string {
	s := string(c.algo)
	switch {
	case c.ack:
		s += ", replica ack"
	case c.cache:
		s += ", denial cache"
	}
	return s
}

var failoverCases = []failoverCase{
	{limiters.GCRA, false, false}, {limiters.GCRA, true, false}, {limiters.GCRA, false, true},
	{limiters.FixedWindow, false, false}, {limiters.FixedWindow, true, false}, {limiters.FixedWindow, false, true},
	{limiters.SlidingLog, false, false}, {limiters.SlidingLog, true, false}, {limiters.SlidingLog, false, true},
}

// failoverTimeout is the limiters' timeout.
const failoverTimeout = 250 * time.Millisecond

// failoverQuota is each key's quota: a day's, so that nothing refills
// during the run and every admission beyond it is the failover's.
var failoverQuota = limiters.Limit{N: 200, Per: 24 * time.Hour}

// TestFailover kills (SIGKILL) the master of the keys in use while
// goroutines decide on them, in a Sentinel set-up (one master, one
// replica, three Sentinels, go-redis's failover client), the same with
// the replica's link 20ms behind, and a Cluster of three masters each
// with a replica; for GCRA, the fixed window and the sliding log, plain,
// with the denial cache and with the replica's ack (WithReplicaAck). Each
// limiter's keys are decided until the kill, then paused; once the
// replica is promoted a peek of each key shows the admissions it lacks
// (written by the old master, acknowledged to the caller, not yet
// replicated: the bound); then the keys are decided until spent. The
// admissions beyond the quota must be exactly the writes lost (the
// failover costs nothing else), none with the ack; meanwhile the failure
// mode (closed) denied every decision Redis did not make, and Redis
// decides again. The figures go to the log (docs/redis.md has them).
func TestFailover(t *testing.T) {
	redistest.Require(t) // make test's rule: Redis is there, or this is skipped
	for _, s := range []struct {
		name string
		lag  time.Duration
	}{{"sentinel", 0}, {"sentinel, replica 20ms behind", 20 * time.Millisecond}, {"cluster", 0}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			var setup failoverSetup
			if strings.HasPrefix(s.name, "cluster") {
				setup = clusterSetup(t)
			} else {
				setup = sentinelSetup(t, s.lag)
			}
			setup.name, setup.lag = s.name, s.lag
			failover(t, setup)
		})
	}
}

func sentinelSetup(t *testing.T, lag time.Duration) failoverSetup {
	st, err := redisfault.NewSentinel(t.TempDir(), lag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	o := st.Options()
	o.ContextTimeoutEnabled, o.PoolTimeout, o.PoolSize = true, 250*time.Millisecond, 64
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { c.Close() })
	return failoverSetup{
		client:  c,
		restart: st.Restart,
		kill:    func(ctx context.Context, _ string) (string, error) { return st.KillMaster(ctx) },
		keys: func(_ context.Context, n int, stem string) ([]string, error) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprint(stem, i)
			}
			return keys, nil
		},
	}
}

func clusterSetup(t *testing.T) failoverSetup {
	cl, err := redisfault.NewCluster(t.TempDir(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	o := cl.Options()
	o.ContextTimeoutEnabled, o.PoolTimeout, o.PoolSize = true, 250*time.Millisecond, 64
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	// The master to kill: the one of the first test key's slot.
	target, err := c.MasterForKey(context.Background(), "{victim}")
	if err != nil {
		t.Fatal(err)
	}
	victim := target.Options().Addr
	return failoverSetup{
		client:  c,
		restart: cl.Restart,
		kill:    func(context.Context, string) (string, error) { return victim, cl.Kill(victim) },
		keys: func(ctx context.Context, n int, stem string) ([]string, error) {
			var keys []string
			for i := 0; len(keys) < n; i++ {
				key := fmt.Sprint(stem, i)
				m, err := c.MasterForKey(ctx, "{"+key+"}") // the limiter's hash tag
				if err != nil {
					return nil, err
				}
				if m.Options().Addr == victim {
					keys = append(keys, key)
				}
			}
			return keys, nil
		},
	}
}

// A decided is one decision a failover run made: when it was asked and
// answered, and what came of it.
type decided struct {
	at, done time.Time
	allowed  bool
	err      error
}

// failoverRun is one limiter's part of a failover run.
type failoverRun struct {
	c        failoverCase
	l        *redislimit.Limiter
	keys     []string // the keys counted, decided until the kill
	probes   []string // fresh keys, one a decision: is Redis deciding?
	spent    string   // a key spent before the kill: what its denials meet
	admitted []atomic.Int64
	late     []atomic.Int64 // each key's decisions that failed after the peek
	lastAck  [][]time.Time  // each key's admissions before the kill, by when answered
	before   []time.Duration
	mu       sync.Mutex
	probe    []decided // the probes' decisions
	spentLog []decided
	lost     []int // each key's admissions the promoted replica lacked
}

func failover(t *testing.T, s failoverSetup) {
	ctx := context.Background()
	var runs []*failoverRun
	for i, c := range failoverCases {
		opts := []redislimit.Option{redislimit.WithPrefix(fmt.Sprintf("failover-%d:", i)), redislimit.WithFailureMode(redislimit.FailClosed), redislimit.WithTimeout(failoverTimeout)}
		if !c.cache {
			opts = append(opts, redislimit.WithDenialCache(-1))
		}
		if c.ack {
			opts = append(opts, redislimit.WithReplicaAck(1, 150*time.Millisecond))
		}
		l, err := redislimit.New(s.client, c.algo, []limiters.Limit{failoverQuota}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r := &failoverRun{c: c, l: l}
		if r.keys, err = s.keys(ctx, 3, "user-"); err != nil {
			t.Fatal(err)
		}
		if r.probes, err = s.keys(ctx, 2000, "probe-"); err != nil {
			t.Fatal(err)
		}
		spent, err := s.keys(ctx, 1, "spent-")
		if err != nil {
			t.Fatal(err)
		}
		r.spent = spent[0]
		// Spent before the run: admitted, or denied (an earlier try that
		// failed, its answer late or its ack, spent it). A busy host may
		// fail a try.
		d, err := l.Decide(ctx, limiters.Request{Key: r.spent, N: failoverQuota.N})
		for try := 0; err != nil && try < 20; try++ {
			time.Sleep(50 * time.Millisecond)
			d, err = l.Decide(ctx, limiters.Request{Key: r.spent, N: failoverQuota.N})
		}
		if err != nil {
			t.Fatalf("%v: spending %s: %+v, %v", c, r.spent, d, err)
		}
		r.admitted = make([]atomic.Int64, len(r.keys))
		r.late = make([]atomic.Int64, len(r.keys))
		r.lastAck = make([][]time.Time, len(r.keys))
		runs = append(runs, r)
	}

	// Until the kill: four goroutines a key, a decision each 40ms, and
	// the probes and the spent keys every 5ms, which go on until the end.
	var stopKeys, stopProbes atomic.Bool
	var wg sync.WaitGroup
	decideKeys := func(record bool) {
		for _, r := range runs {
			for k := range r.keys {
				for range 4 {
					wg.Go(func() {
						for !stopKeys.Load() {
							t0 := time.Now()
							d, err := r.l.Decide(ctx, limiters.Request{Key: r.keys[k], N: 1})
							if err == nil && d.Allowed {
								r.admitted[k].Add(1)
								if record {
									r.mu.Lock()
									r.lastAck[k] = append(r.lastAck[k], time.Now())
									r.before = append(r.before, time.Since(t0))
									r.mu.Unlock()
								}
							}
							if err == nil && !d.Allowed && !record {
								return // spent
							}
							if err != nil && !record {
								r.late[k].Add(1)
							}
							time.Sleep(40 * time.Millisecond)
						}
					})
				}
			}
		}
	}
	var probes sync.WaitGroup
	for _, r := range runs {
		probes.Go(func() {
			for i := 0; !stopProbes.Load(); i++ {
				for j, key := range []string{r.probes[i%len(r.probes)], r.spent} {
					t0 := time.Now()
					d, err := r.l.Decide(ctx, limiters.Request{Key: key, N: 1})
					if err != nil && (d.Allowed || !errors.Is(err, redislimit.ErrUnavailable)) {
						t.Errorf("%v: a decision Redis did not make: %+v, %v; want a denial, failing closed, and ErrUnavailable", r.c, d, err)
					}
					if took := time.Since(t0); took > 5*failoverTimeout {
						t.Errorf("%v: a decision took %v with a timeout of %v: it hangs", r.c, took, failoverTimeout)
					}
					r.mu.Lock()
					if j == 0 {
						r.probe = append(r.probe, decided{t0, time.Now(), d.Allowed, err})
					} else {
						r.spentLog = append(r.spentLog, decided{t0, time.Now(), d.Allowed, err})
					}
					r.mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	decideKeys(true)
	time.Sleep(time.Second)
	stopKeys.Store(true)
	victim, err := s.kill(ctx, runs[0].keys[0])
	killed := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// Promoted: every limiter's probes decided by Redis again; those that
	// wait for a replica's ack, once the killed server is back as the
	// replica of the one promoted, restarted when the others recovered.
	// 20s from the kill, and 20s from the restart: the acks wait on
	// Sentinel's own timers (up to 10s to make the old master a replica;
	// recovered 12.7-13.1s after the kill, idle or loaded).
	var restarted time.Time
	for deadline := killed.Add(20 * time.Second); !recovered(runs, killed); time.Sleep(50 * time.Millisecond) {
		if restarted.IsZero() && recovered(plain(runs), killed) {
			if err := s.restart(victim); err != nil {
				t.Fatal(err)
			}
			restarted = time.Now()
			if d := restarted.Add(20 * time.Second); d.After(deadline) {
				deadline = d
			}
		}
		if time.Now().After(deadline) {
			var last []string
			for _, r := range runs {
				r.mu.Lock()
				last = append(last, fmt.Sprintf("%v: %v", r.c, r.probe[len(r.probe)-1].err))
				r.mu.Unlock()
			}
			t.Fatalf("%s: decisions still failing 20s after the master (%s) was killed:\n%s", s.name, victim, strings.Join(last, "\n"))
		}
	}
	for _, r := range runs {
		for k, key := range r.keys {
			d, err := r.l.Peek(ctx, limiters.Request{Key: key, N: 1})
			for try := 0; err != nil && try < 5; try++ { // a busy host may time one out
				d, err = r.l.Peek(ctx, limiters.Request{Key: key, N: 1})
			}
			if err != nil {
				t.Fatalf("%v: peeking %s after the failover: %v", r.c, key, err)
			}
			// What the replica has is the quota less what it saw
			// admitted: the admissions acknowledged and not there are lost.
			r.lost = append(r.lost, d.Remaining-(failoverQuota.N-int(r.admitted[k].Load())))
		}
	}
	stopKeys.Store(false)
	decideKeys(false)
	wg.Wait()
	stopProbes.Store(true)
	probes.Wait()

	t.Logf("%s: the master %s killed, restarted %v later; quota %v a key, 3 keys a limiter", s.name, victim, restarted.Sub(killed).Round(time.Millisecond), failoverQuota)
	t.Logf("%-28s %8s %9s %12s %16s %13s %9s %9s", "limiter", "failing", "recovery", "failed (all denied)", "spent key, cache", "lost (bound)", "beyond", "p50 before")
	for _, r := range runs {
		f := r.failover(killed)
		over, lost := 0, 0
		for k := range r.keys {
			over += int(r.admitted[k].Load()) - failoverQuota.N
			lost += r.lost[k]
			// Exactly the lost writes, but for decisions made by Redis
			// whose answers came too late, which failed.
			if beyond, late := int(r.admitted[k].Load())-failoverQuota.N, int(r.late[k].Load()); beyond > r.lost[k] || beyond < r.lost[k]-late {
				t.Errorf("%s, %v, %s: %d admitted beyond the quota, where the replica lacked %d admissions and %d decisions failed after: the failover cost other than its lost writes", s.name, r.c, r.keys[k], beyond, r.lost[k], late)
			}
		}
		// The bound: what the replica lacked was written in the last
		// moments before the kill, within what its link held (twice the
		// lag: a chunk waits out the lag while the next gathers), and a
		// margin for a busy host.
		if span := r.lostSpan(killed); span > 2*s.lag+200*time.Millisecond {
			t.Errorf("%s, %v: the replica lacked admissions acknowledged %v before the kill, with a link %v behind", s.name, r.c, span, s.lag)
		}
		if r.c.ack && over > 0 {
			t.Errorf("%s, %v: %d admitted beyond the quota with every admission acknowledged by the replica", s.name, r.c, over)
		}
		// The median answer before the kill; none when the host was so busy
		// that no admission was answered before it.
		p50 := "-"
		if slices.Sort(r.before); len(r.before) > 0 {
			p50 = r.before[len(r.before)/2].Round(10 * time.Microsecond).String()
		}
		t.Logf("%-28v %8v %9v %12d %16s %6d (%4v) %9d %9s", r.c, f.failing.Round(time.Millisecond), f.recovery.Round(time.Millisecond), f.failed,
			fmt.Sprintf("%d of %d", f.cached, f.spent), lost, r.lostSpan(killed).Round(time.Millisecond), over, p50)
		if f.failed == 0 && !r.c.cache {
			t.Errorf("%s, %v: no decision failed: was the master of the keys killed?", s.name, r.c)
		}
	}
}

// plain are the runs whose decisions wait for no replica.
func plain(runs []*failoverRun) []*failoverRun {
	var out []*failoverRun
	for _, r := range runs {
		if !r.c.ack {
			out = append(out, r)
		}
	}
	return out
}

// recovered reports whether every run's probes have been decided by Redis
// since the last that failed after killed.
func recovered(runs []*failoverRun, killed time.Time) bool {
	for _, r := range runs {
		r.mu.Lock()
		f := r.failoverLocked(killed)
		r.mu.Unlock()
		if f.recovery == 0 {
			return false
		}
	}
	return true
}

// A failoverFigures is what a run measured of one limiter: from the kill
// to the last probe that failed, and to the first decided by Redis after
// it; how many probes failed; of the spent key's decisions while the
// probes failed, how many the denial cache answered.
type failoverFigures struct {
	failing, recovery time.Duration
	failed            int
	cached, spent     int
}

func (r *failoverRun) failover(killed time.Time) failoverFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failoverLocked(killed)
}

func (r *failoverRun) failoverLocked(killed time.Time) failoverFigures {
	var f failoverFigures
	var last time.Time
	for _, d := range r.probe {
		if d.err != nil && d.done.After(killed) {
			f.failed++
			last = d.done
		}
	}
	if last.IsZero() {
		last = killed
	}
	f.failing = last.Sub(killed)
	for _, d := range r.probe {
		if d.at.After(last) && d.err == nil {
			f.recovery = d.done.Sub(killed)
			break
		}
	}
	for _, d := range r.spentLog {
		if d.at.After(killed) && !d.done.After(last) {
			f.spent++
			if d.err == nil {
				f.cached++
			}
		}
	}
	return f
}

// lostSpan is how far back from the kill the lost admissions of r's keys
// reach (the last ones acknowledged, by the lost count): the replication
// lag they show.
func (r *failoverRun) lostSpan(killed time.Time) time.Duration {
	var span time.Duration
	for k, acks := range r.lastAck {
		if n := r.lost[k]; n > 0 && n <= len(acks) {
			span = max(span, killed.Sub(acks[len(acks)-n]))
		}
	}
	return span
}

// WithReplicaAck's settings are checked, and on a server with no replica
// every decision fails, following the failure mode, its error saying
// that no replica acknowledged it.
func TestReplicaAck(t *testing.T) {
	c := server(t)
	p := prefix(t, c)
	lim := []limiters.Limit{limiters.PerSecond(10)}
	// A Ring on a port nothing listens on: closed at the end, or its
	// heartbeat dials on, and once its pool has failed PoolSize dials a
	// goroutine of go-redis's redials every second for as long as the
	// process runs, which a later test counted as its own leak.
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name   string
		client redislimit.Client
		opts   []redislimit.Option
		want   string
	}{
		{"no replica", c, []redislimit.Option{redislimit.WithReplicaAck(0, 10*time.Millisecond)}, "at least one replica"},
		{"no timeout", c, []redislimit.Option{redislimit.WithReplicaAck(1, 0)}, "a timeout from 1ms"},
		{"past the limiter's", c, []redislimit.Option{redislimit.WithTimeout(100 * time.Millisecond), redislimit.WithReplicaAck(1, 100*time.Millisecond)}, "less than the limiter's, 100ms"},
		{"batching", c, []redislimit.Option{redislimit.WithReplicaAck(1, 10*time.Millisecond), redislimit.WithBatching(redislimit.Batching{})}, "does not combine with batching"},
		{"leases", c, []redislimit.Option{redislimit.WithReplicaAck(1, 10*time.Millisecond), redislimit.WithLeases(time.Second, 0)}, "does not combine with leases"},
		{"ring", ring, []redislimit.Option{redislimit.WithReplicaAck(1, 10*time.Millisecond)}, "not a Ring"},
	} {
		_, err := redislimit.New(tc.client, limiters.GCRA, lim, tc.opts...)
		if !errors.Is(err, limiters.ErrInvalidParameter) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidParameter saying %q", tc.name, err, tc.want)
		}
	}
	for _, mode := range []redislimit.FailureMode{redislimit.FailClosed, redislimit.FailOpen} {
		l, err := redislimit.New(c, limiters.FixedWindow, lim, patient, redislimit.WithPrefix(p), redislimit.WithFailureMode(mode), redislimit.WithReplicaAck(1, 20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.AllowN(context.Background(), "alice", 1)
		if !errors.Is(err, redislimit.ErrNotReplicated) || !errors.Is(err, redislimit.ErrUnavailable) || d.Allowed != (mode == redislimit.FailOpen) {
			t.Errorf("%v, a server with no replica: %s, %v; want the failure mode's decision and ErrNotReplicated", mode, show(d), err)
		}
		// A peek writes nothing and waits for no replica.
		if d, err := l.Peek(context.Background(), limiters.Request{Key: "alice", N: 1}); err != nil || !d.Allowed {
			t.Errorf("%v: a peek: %s, %v", mode, show(d), err)
		}
	}
}
