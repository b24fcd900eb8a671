package peers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/liveheap"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// The benchmarks measure ratelab's six limiters and the peers in one run,
// through the same interface, on the same fixtures:
//
//	BenchmarkDecide/lim=L/clock=C/keys=K/limit=M/procs=P
//	BenchmarkMemory/lim=L/keys=1M
//
// lim is an algorithm of ratelab or a peer; clock is mono (a monotonic
// reading per decision, the default), coarse (limiters.CoarseClock at 1ms)
// or own (a peer's); keys is hot (one key), zipf100k or uniform100k (100,000
// keys of 16 bytes, all present before timing, asserted); limit is strict
// (100 per second, burst 100: a hot key is mostly denied) or unlimited (every
// call admitted); procs is how many goroutines decide at once. ns/op is wall
// time per decision.

const (
	nKeys  = 100_000
	seqLen = 1 << 20
	hotKey = "user-00000012345"
)

var (
	strict    = limiters.Limit{N: 100, Per: time.Second}
	unlimited = limiters.Limit{N: 1 << 30, Per: time.Hour}
)

// subject is one limiter under test. new returns it ready to be called
// through one interface, as a peer's adapter is, and registers with tb what
// must be stopped after.
type subject struct {
	name, clock string
	new         func(tb testing.TB, w limiters.Limit) limiters.Limiter
}

func subjects() []subject {
	var out []subject
	for _, a := range limiters.Algorithms() {
		for _, clock := range []string{"mono", "coarse"} {
			out = append(out, subject{name: string(a), clock: clock, new: func(tb testing.TB, w limiters.Limit) limiters.Limiter {
				if a == limiters.SlidingLog && w.N > 1<<26 {
					// Unlimited for a log: keep a millisecond of
					// timestamps, not an hour of them.
					w = limiters.Limit{N: 1 << 26, Per: time.Millisecond}
				}
				var opts []limiters.Option
				if clock == "coarse" {
					c := limiters.NewCoarseClock(time.Millisecond)
					tb.Cleanup(c.Stop)
					opts = append(opts, limiters.WithClock(c))
				}
				l, err := composite.NewAlgorithm(a, w, opts...)
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { l.Close() })
				return l
			}})
		}
	}
	short := map[string]string{"x/time/rate": "xrate"}
	for _, p := range All() {
		name := p.Name
		if s, ok := short[name]; ok {
			name = s
		}
		out = append(out, subject{name: name, clock: "own", new: func(tb testing.TB, w limiters.Limit) limiters.Limiter {
			l, err := p.New(w)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { l.Close() })
			return l
		}})
	}
	return out
}

// fixture holds the keys and the order they are asked in.
type fixture struct {
	keys    []string
	zipf    []int32
	uniform []int32
}

var fix = func() *fixture {
	f := &fixture{keys: make([]string, nKeys), zipf: make([]int32, seqLen), uniform: make([]int32, seqLen)}
	for i := range f.keys {
		f.keys[i] = fmt.Sprintf("user-%011d", i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.1, 1, nKeys-1)
	for i := range f.zipf {
		f.zipf[i] = int32(z.Uint64())
		f.uniform[i] = int32(rng.IntN(nKeys))
	}
	return f
}()

// count reports how many keys l holds, if it can tell.
func count(l limiters.Limiter) (int, bool) {
	switch l := l.(type) {
	case interface{ Stats() limiters.Stats }:
		return l.Stats().Keys, true
	case *xrate:
		return l.Len(), true
	}
	return 0, false
}

func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	for _, s := range subjects() {
		for _, c := range []struct {
			keys, limit string
			procs       []int
		}{
			{"hot", "unlimited", []int{1}},
			{"hot", "strict", []int{1, 2}},
			{"zipf100k", "strict", []int{1, 2}},
			{"uniform100k", "strict", []int{2}},
		} {
			for _, procs := range c.procs {
				name := fmt.Sprintf("lim=%s/clock=%s/keys=%s/limit=%s/procs=%d", s.name, s.clock, c.keys, c.limit, procs)
				b.Run(name, func(b *testing.B) {
					w := strict
					if c.limit == "unlimited" {
						w = unlimited
					}
					l := s.new(b, w)
					seq := fix.zipf
					if c.keys == "uniform100k" {
						seq = fix.uniform
					}
					if c.keys != "hot" {
						for _, k := range fix.keys {
							l.AllowN(ctx, k, 1)
						}
						if n, ok := count(l); ok && n != nKeys {
							b.Fatalf("fixture: the limiter holds %d keys, want %d", n, nKeys)
						}
					}
					// Finish the collection the setup started: the timed
					// loop allocates nothing, but a mark phase still
					// running would take a quarter of the CPU from it.
					runtime.GC()
					// key is the i-th key asked for.
					key := func(i int) string {
						if c.keys == "hot" {
							return hotKey
						}
						return fix.keys[seq[i&(seqLen-1)]]
					}
					var admitted atomic.Int64
					if procs == 1 {
						i, got := 0, int64(0)
						for b.Loop() {
							if d, _ := l.AllowN(ctx, key(i), 1); d.Allowed {
								got++
							}
							i++
						}
						admitted.Add(got)
					} else {
						if runtime.GOMAXPROCS(0) < procs {
							b.Skipf("GOMAXPROCS %d < %d", runtime.GOMAXPROCS(0), procs)
						}
						var gid atomic.Int64
						b.SetParallelism(procs / runtime.GOMAXPROCS(0))
						b.ResetTimer() // b.Loop does this itself; RunParallel does not
						b.RunParallel(func(pb *testing.PB) {
							i, got := int(gid.Add(1))*7919, int64(0)
							for pb.Next() {
								if d, _ := l.AllowN(ctx, key(i), 1); d.Allowed {
									got++
								}
								i++
							}
							admitted.Add(got)
						})
					}
					// A strict hot key must be mostly denied, an
					// unlimited one always admitted: otherwise the
					// benchmark measures some other path.
					ratio := float64(admitted.Load()) / float64(b.N)
					switch {
					case c.limit == "unlimited" && ratio != 1:
						b.Fatalf("fixture: %.3f of calls admitted under the unlimited limit", ratio)
					case c.limit == "strict" && c.keys == "hot" && b.N > 10000 && ratio > 0.5:
						b.Fatalf("fixture: %.3f of calls admitted for a hot key under a strict limit", ratio)
					}
					b.ReportMetric(ratio, "admitted/op")
				})
			}
		}
	}
}

// BenchmarkMemory measures the live heap per key of a limiter holding a
// million keys of 16 bytes, one request each, after garbage collection.
// The keys are the limiter's to keep or drop: the benchmark holds none.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	for _, s := range subjects() {
		if s.clock == "coarse" {
			continue // the clock does not change what a key costs
		}
		b.Run(fmt.Sprintf("lim=%s/keys=1M", s.name), func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := liveheap.Bytes()
				l := s.new(b, strict)
				for i := range n {
					l.AllowN(ctx, fmt.Sprintf("user-%011d", i), 1)
				}
				after := liveheap.Bytes()
				if got, ok := count(l); ok && got != n {
					b.Fatalf("fixture: the limiter holds %d keys, want %d", got, n)
				}
				runtime.KeepAlive(l)
				l.Close()
				perKey = float64(after-before) / n
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(0, "ns/op")
		})
	}
}
