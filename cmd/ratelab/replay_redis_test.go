package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters/redistest"
)

// TestReplayRedisSameAsMemory replays random traces with every algorithm
// on both backends: the outputs must be the same, line for line.
func TestReplayRedisSameAsMemory(t *testing.T) {
	addr := redistest.Require(t)
	r := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	for _, algo := range []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"} {
		t.Run(algo, func(t *testing.T) {
			for trial := range 3 {
				var trace strings.Builder
				at := time.Duration(r.Int64N(int64(time.Hour)))
				for range 300 {
					at += time.Duration(r.ExpFloat64() * float64(40*time.Millisecond))
					n := 1
					if r.IntN(6) == 0 {
						n = 1 + r.IntN(8)
					}
					fmt.Fprintf(&trace, "%.9f,user%d,%d\n", at.Seconds(), r.IntN(4), n)
				}
				args := []string{"replay", "--algo", algo}
				if strings.HasSuffix(algo, "window") || strings.HasPrefix(algo, "sliding") {
					args = append(args, "--limit", fmt.Sprintf("%d/%v", 1+r.IntN(6), time.Duration(1+r.Int64N(int64(time.Second)))))
				} else {
					capacity := 1 + r.IntN(6)
					args = append(args, "--limit", fmt.Sprintf("%d/s burst %d", 1+r.IntN(20), capacity))
				}
				mem, errOut, code := ratelab(t, trace.String(), args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errOut)
				}
				red, errOut, code := ratelab(t, trace.String(), append(args, "--backend", "redis", "--redis-url", "redis://"+addr+"/0")...)
				if code != 0 {
					t.Fatalf("%v --backend redis: exit %d: %s", args, code, errOut)
				}
				if strings.Count(mem, "\n") != 300 || !strings.Contains(mem, `"allowed":false`) {
					t.Fatalf("trial %d: the trace should give 300 decisions, some denied:\n%s", trial, mem)
				}
				if red != mem {
					ml, rl := strings.Split(mem, "\n"), strings.Split(red, "\n")
					for i := range ml {
						if i >= len(rl) || ml[i] != rl[i] {
							t.Fatalf("%v: line %d differs:\n  memory %s\n  redis  %s", args, i+1, ml[i], rl[min(i, len(rl)-1)])
						}
					}
					t.Fatalf("%v: outputs differ", args)
				}
			}
		})
	}
}

// TestReplayTiersRedisSameAsMemory replays a random trace through a
// configuration of tiers (two with the same limits, which must not share
// a user's quota) and an override, kept in memory and in Redis: the
// outputs, tiers and denying limits included, must be the same.
func TestReplayTiersRedisSameAsMemory(t *testing.T) {
	addr := redistest.Require(t)
	const tiers = `algorithm: %s
backend: %s
default_tier: free
tiers:
  free: [{rate: 3/s, name: per-second}, {rate: 10/min, name: per-minute}]
  trial: [{rate: 3/s, name: per-second}, {rate: 10/min, name: per-minute}]
  "pro {x}": [20/s]
users:
  bob: trial
  carol: "pro {x}"
overrides:
  "dan{1}": [2/s]
`
	r := rand.New(rand.NewPCG(4, uint64(time.Now().UnixNano())))
	var trace strings.Builder
	users := []string{"alice", "bob", "carol", "dan{1}", "erin"}
	at := 0.0
	for range 400 {
		at += r.ExpFloat64() * 0.05
		fmt.Fprintf(&trace, "%.6f,%s\n", at, users[r.IntN(len(users))])
	}
	dir := t.TempDir()
	for _, algo := range []string{"sliding-counter", "gcra"} {
		var out [2]string
		for i, backend := range []string{"memory", "redis"} {
			path := dir + "/" + algo + "-" + backend + ".yaml"
			if err := os.WriteFile(path, fmt.Appendf(nil, tiers, algo, backend), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, errOut, code := ratelab(t, trace.String(), "replay", "--config", path, "--redis-url", "redis://"+addr+"/0")
			if code != 0 {
				t.Fatalf("%s on %s: exit %d: %s", algo, backend, code, errOut)
			}
			out[i] = stdout
		}
		if !strings.Contains(out[0], `"denied_by":"per-minute"`) || !strings.Contains(out[0], `"tier":"trial"`) {
			t.Fatalf("%s: the trace should reach the per-minute limit and the trial tier:\n%s", algo, out[0])
		}
		if out[0] != out[1] {
			ml, rl := strings.Split(out[0], "\n"), strings.Split(out[1], "\n")
			for i := range ml {
				if i >= len(rl) || ml[i] != rl[i] {
					t.Fatalf("%s: line %d differs:\n  memory %s\n  redis  %s", algo, i+1, ml[i], rl[min(i, len(rl)-1)])
				}
			}
		}
	}
}
