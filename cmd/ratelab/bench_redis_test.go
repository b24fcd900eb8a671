package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/limiters/redistest"

	"github.com/ratelab/ratelab/results"
)

// bench runs the Redis rows on the server at --redis-url beside the
// others: a sample decided as in memory, and the picks for one process
// still made from the limiters in memory. (The harness's tests weigh them.)
func TestBenchRedis(t *testing.T) {
	addr := redistest.Require(t)
	out := t.TempDir()
	stdout, stderr, code := ratelab(t, "", "bench", "--quick", "--limiters", "gcra,gcra (redis),redis_rate", "--workloads", "boundary-attack",
		"--modes", "simulated", "--attackers", "3", "--simulated", "3s", "--limit", "10/s",
		"--redis-url", "redis://"+addr+"/0", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "no Redis at") {
		t.Fatalf("no Redis at %s (set REDIS_ADDR, or run the tests with tools/with-redis):\n%s", addr, stdout)
	}
	prose := strings.Join(strings.Fields(stdout), " ") // the notes, unwrapped
	for _, want := range []string{
		"│ boundary-attack │ gcra (redis) │ 10/1s (C/R) │      120 │       60 │    60 │      0 │      0 │   1.00 │",
		"Each row kept in a server decided as the same algorithm in memory did on the same requests, all 120 of them.",
		"Skipped: redis_rate on boundary-attack: accuracy not measured",
		"Never more than N in any window: gcra. ",
	} {
		if !strings.Contains(stdout, want) && !strings.Contains(prose, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if picks := stdout[strings.Index(stdout, "Which limiter should I pick?"):]; strings.Contains(picks, "(redis)") {
		t.Errorf("a Redis row picked for one process:\n%s", picks)
	}
	if s := besidesProgress(stderr); s != "" {
		t.Errorf("stderr %q, want nothing but progress", s)
	}
	f, err := results.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Meta.Setting("redis-addr"); a != addr+"/0" || strings.Contains(a, "redis://") {
		t.Errorf("redis-addr = %q, want the server %s/0", a, addr)
	}
}

// Without a server, bench runs the rest and says so, once, naming the
// server it tried: --redis-url's, else REDIS_ADDR's. Nothing but the
// lab's progress goes to standard error (go-redis's own log is silenced).
func TestBenchNoRedis(t *testing.T) {
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	env, flag := closed(), closed()
	t.Setenv("REDIS_ADDR", env)
	for _, tt := range []struct {
		args []string
		addr string
	}{
		{nil, env},
		{[]string{"--redis-url", "redis://" + flag + "/0"}, flag},
	} {
		args := append([]string{"bench", "--limiters", "gcra,gcra (redis),redis_rate", "--workloads", "uniform", "--modes", "simulated",
			"--users", "3", "--simulated", "3s", "--limit", "10/s", "--out", t.TempDir()}, tt.args...)
		stdout, stderr, code := ratelab(t, "", args...)
		want := "Skipped: gcra (redis), redis_rate on uniform: no Redis at " + tt.addr + ": connect: connection refused; point the lab at a server"
		if code != 0 || !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) || !strings.Contains(stdout, "│ uniform  │ gcra    │") {
			t.Errorf("%v: exit %d, want 0, the rest run and %q:\n%s", tt.args, code, want, stdout)
		}
		if s := besidesProgress(stderr); s != "" {
			t.Errorf("%v: stderr %q, want nothing but progress", tt.args, s)
		}
	}
	stdout, _, code := ratelab(t, "", "bench", "--redis=false", "--limiters", "gcra,sliding-log", "--workloads", "uniform", "--modes", "simulated",
		"--users", "3", "--simulated", "3s", "--limit", "10/s", "--out", t.TempDir())
	if code != 0 || strings.Contains(stdout, "redis") {
		t.Errorf("--redis=false: exit %d, and Redis is mentioned:\n%s", code, stdout)
	}
}
