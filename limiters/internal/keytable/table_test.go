package keytable

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// st is a test state: idle from idle on.
type st struct{ v, idle int64 }

func idle(s *st) int64 { return s.idle }

func newTable(t *testing.T, o limiters.Options) *Table[st] {
	t.Helper()
	if o.SweepInterval == 0 {
		o.SweepInterval = -1
	}
	tab := New(5, nil, idle, o)
	t.Cleanup(func() { tab.Close() })
	return tab
}

// get looks key up the way a limiter does.
func get(tab *Table[st], key string, now int64) (st, bool) {
	sh, h := tab.Lock(key)
	defer sh.Unlock()
	if p := sh.Find(h, now); p != nil {
		return *p, true
	}
	return st{}, false
}

func put(tab *Table[st], key string, now int64, s st) {
	sh, h := tab.Lock(key)
	defer sh.Unlock()
	p := sh.Find(h, now)
	if p == nil {
		p = tab.Insert(sh, h, key)
	}
	*p = s
}

// checkInvariants checks every shard: entries in Robin Hood order (home
// slots non-decreasing along each run), no entry before its home, n equal
// to the entries held, load within bounds.
func checkInvariants(t *testing.T, tab *Table[st]) {
	t.Helper()
	for i := range tab.shards {
		sh := &tab.shards[i]
		n := 0
		prev := uint64(0)
		for j, s := range sh.slots {
			if s.h == 0 {
				prev = 0
				continue
			}
			n++
			hh := home(s.h, sh.cap)
			if hh > uint64(j) {
				t.Fatalf("shard %d slot %d: entry before its home %d", i, j, hh)
			}
			if hh < prev {
				t.Fatalf("shard %d slot %d: home %d after home %d in one run", i, j, hh, prev)
			}
			prev = hh
			if sh.Get(s.h) != &sh.slots[j].s {
				t.Fatalf("shard %d slot %d: Get does not find the entry", i, j)
			}
		}
		if n != sh.n {
			t.Fatalf("shard %d holds %d entries, counts %d", i, n, sh.n)
		}
		if sh.limit > 0 && sh.n > sh.limit {
			t.Fatalf("shard %d holds %d keys, cap %d", i, sh.n, sh.limit)
		}
		if sh.n > 0 && uint64(sh.n*maxLoadDen) > sh.cap*maxLoadNum {
			t.Fatalf("shard %d: %d keys in %d home slots, above the load bound", i, sh.n, sh.cap)
		}
	}
}

// Random inserts, updates, deletes and sweeps agree with a map, and keep
// the table's invariants.
func TestAgainstMap(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keepKeys=", keep), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			tab := newTable(t, limiters.Options{KeepKeyNames: keep})
			want := map[string]st{}
			now := int64(0)
			for i := range 200000 {
				key := fmt.Sprint("k", rng.IntN(5000))
				switch r := rng.IntN(100); {
				case r < 60:
					s := st{v: int64(i), idle: now + rng.Int64N(int64(10*time.Second))}
					put(tab, key, now, s)
					want[key] = s
				case r < 90:
					got, ok := get(tab, key, now)
					w, wok := want[key]
					if ok != wok || got != w {
						t.Fatalf("op %d: get(%q) = %v, %v; want %v, %v", i, key, got, ok, w, wok)
					}
				case r < 99:
					tab.Delete(key)
					delete(want, key)
				default:
					now += int64(time.Second)
					tab.Sweep(now)
					for k, s := range want {
						if s.idle <= now-int64(Grace) {
							delete(want, k)
						}
					}
					checkInvariants(t, tab)
				}
			}
			checkInvariants(t, tab)
			if got := tab.Stats().Keys; got != len(want) {
				t.Fatalf("Stats().Keys = %d, want %d", got, len(want))
			}
			names := map[string]bool{}
			err := tab.Walk(t.Context(), func(s *st) limiters.Decision { return limiters.Decision{} }, func(key string, _ limiters.Decision) bool {
				names[key] = true
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != len(want) {
				t.Fatalf("Walk named %d keys, want %d", len(names), len(want))
			}
			if keep {
				for k := range want {
					if !names[k] {
						t.Fatalf("Walk did not name %q", k)
					}
				}
			}
		})
	}
}

// A key cap holds however many live keys arrive, and counts what it had
// to forget early.
func TestMaxKeys(t *testing.T) {
	for _, max := range []int{1, 10, 1000, 100000} {
		tab := newTable(t, limiters.Options{MaxKeys: max})
		for i := range 3 * max {
			put(tab, fmt.Sprint(i), 0, st{idle: 1 << 60}) // never idle
		}
		checkInvariants(t, tab)
		stats := tab.Stats()
		if stats.Keys > max {
			t.Errorf("MaxKeys %d: holds %d keys", max, stats.Keys)
		}
		if stats.Keys < max/2 {
			t.Errorf("MaxKeys %d: holds only %d keys", max, stats.Keys)
		}
		if stats.Evicted != int64(3*max-stats.Keys) {
			t.Errorf("MaxKeys %d: Evicted = %d, want %d", max, stats.Evicted, 3*max-stats.Keys)
		}
	}
}

// Under a cap, idle keys go first, and the ones nearest to idle next.
func TestMaxKeysForgetsIdleFirst(t *testing.T) {
	// 1000 keys of which 100 busy, then 100 more busy ones: 200 busy
	// keys fit in any shard's share of the cap, so only idle keys go.
	tab := newTable(t, limiters.Options{MaxKeys: 1000})
	now := int64(time.Hour)
	for i := range 1000 {
		idle := now - int64(time.Hour) // idle long ago
		if i%10 == 1 {
			idle = now + int64(time.Hour) // busy
		}
		put(tab, fmt.Sprint(i), now, st{idle: idle})
	}
	for i := range 100 {
		put(tab, fmt.Sprint("new", i), now, st{idle: now + int64(time.Hour)})
	}
	for i := 1; i < 1000; i += 10 {
		if _, ok := get(tab, fmt.Sprint(i), now); !ok {
			t.Fatalf("busy key %d was forgotten while idle keys could go", i)
		}
	}
	if ev := tab.Stats().Evicted; ev != 0 {
		t.Fatalf("Evicted = %d, want 0: only idle keys needed to go", ev)
	}
}

// A sweep gives the memory back.
func TestSweepFreesMemory(t *testing.T) {
	tab := newTable(t, limiters.Options{})
	for i := range 100000 {
		put(tab, fmt.Sprint(i), 0, st{idle: int64(i)})
	}
	if s := tab.Stats(); s.Keys != 100000 || s.Slots < 100000 {
		t.Fatalf("after 100000 inserts: %+v", s)
	}
	tab.Sweep(50000 + int64(Grace)) // keys idle at 50000 and before go
	checkInvariants(t, tab)
	if s := tab.Stats(); s.Keys != 100000-50001 || s.Slots > 4*s.Keys {
		t.Fatalf("after sweeping half: %+v", s)
	}
	tab.Sweep(int64(time.Hour))
	if s := tab.Stats(); s.Keys != 0 || s.Slots != 0 {
		t.Fatalf("after sweeping everything: %+v, want nothing held", s)
	}
}

// The background sweeper forgets idle keys of a limiter driven by its
// clock, and Close stops it (synctest reports a goroutine left behind).
func TestSweeperAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := New(5, nil, idle, limiters.Options{SweepInterval: time.Minute})
		now := tab.Now()
		for i := range 1000 {
			put(tab, fmt.Sprint(i), now, st{idle: now + int64(time.Duration(i)*time.Second)})
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		// Swept at now+60s, less the second of grace: keys idle by
		// now+59s are gone.
		if got := tab.Stats().Keys; got != 1000-60 {
			t.Errorf("after one sweep: %d keys, want %d", got, 1000-60)
		}
		time.Sleep(20 * time.Minute)
		synctest.Wait()
		if got := tab.Stats().Keys; got != 0 {
			t.Errorf("after 20 minutes: %d keys, want 0", got)
		}
		tab.Close()
		tab.Close() // twice is fine
	})
}

// A table driven only by explicit times is swept as of the newest time it
// saw, never as of the wall clock: a simulation in 1970 keeps its keys.
func TestSweeperIgnoresWallClockForExplicitTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := New(5, nil, idle, limiters.Options{SweepInterval: time.Second})
		defer tab.Close()
		for i := range 100 {
			put(tab, fmt.Sprint(i), 1000, st{idle: 5000})
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := tab.Stats().Keys; got != 100 {
			t.Fatalf("explicit-time table after an hour of sweeps: %d keys, want 100", got)
		}
	})
}

// A table nobody closes stops its sweeper once it is unreachable.
func TestUnreachableTableStopsSweeper(t *testing.T) {
	tabs := make([]*Table[st], 10)
	for i := range tabs {
		tabs[i] = New(5, nil, idle, limiters.Options{SweepInterval: time.Hour})
	}
	running := runtime.NumGoroutine()
	runtime.KeepAlive(tabs)
	tabs = nil
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > running-10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 10s after dropping 10 tables, want at most %d", runtime.NumGoroutine(), running-10)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// The coarse clock moves with time while it runs, and Stop ends its
// goroutine.
func TestCoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := limiters.NewCoarseClock(time.Millisecond)
		t1 := c.Now()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if got := c.Now().Sub(t1); got < 9*time.Millisecond || got > 11*time.Millisecond {
			t.Errorf("coarse clock moved %v in 10ms", got)
		}
		tab := New(5, nil, idle, limiters.Options{Clock: c, SweepInterval: -1})
		if d := time.Duration(tab.Now() - c.Now().UnixNano()); d != 0 {
			t.Errorf("table on a coarse clock reads %v off it", d)
		}
		c.Stop()
		c.Stop()
	})
}

// Walk may run while keys arrive: the race detector watches, and every key
// it names is a real name when names are kept.
func TestWalkWhileInserting(t *testing.T) {
	tab := newTable(t, limiters.Options{KeepKeyNames: true})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20000 {
			put(tab, fmt.Sprint("k", i), 0, st{idle: 1 << 60})
		}
	}()
	for walking := true; walking; {
		select {
		case <-done:
			walking = false
		default:
		}
		err := tab.Walk(t.Context(), func(s *st) limiters.Decision { return limiters.Decision{} }, func(key string, _ limiters.Decision) bool {
			if len(key) == 0 || key[0] != 'k' {
				t.Errorf("Walk named a key %q", key)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Looking at a limiter (Peek, Walk) does not make its sweeper switch to
// the wall clock: a table driven by explicit times in the past keeps its
// keys however often it is looked at.
func TestLookingDoesNotChangeSweeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := New(5, nil, idle, limiters.Options{SweepInterval: time.Second})
		defer tab.Close()
		past := int64(1e18) // 2001
		for i := range 100 {
			put(tab, fmt.Sprint(i), past, st{idle: past + int64(time.Hour)})
		}
		k := NewKeys(any(nil), "test", tab, func(s *st, now int64, n int) limiters.Decision { return limiters.Decision{} }, nil, nil)
		k.Peek(t.Context(), limiters.Request{Key: "1", N: 1})
		k.Walk(t.Context(), func(string, limiters.Decision) bool { return true })
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := tab.Stats().Keys; got != 100 {
			t.Fatalf("after Peek, Walk and a minute of sweeps: %d keys, want 100", got)
		}
	})
}

func TestDeniedIsTheOneLimit(t *testing.T) {
	if want := limiters.Denials(0).Deny(0, true); Denied != want {
		t.Fatalf("Denied = %#x, want %#x", Denied, want)
	}
}
