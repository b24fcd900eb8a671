package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/limiters/redistest"
	"github.com/ratelab/ratelab/results"
)

// Comparing two runs of the lab is the gate's daily use: it works on what
// bench --quick writes, with every limiter and every mode the quick lab
// runs (on two workloads and smaller, to fit a test). A run compared with
// itself passes; with a run of another seed, compare says the seeds
// differ, and nothing else. (It used to stop at "twice: OLD has
// fixed-window on llm": the ways of charging of the llm mode were one run
// each to compare.)
func TestCompareLabRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab twice")
	}
	small := []string{"bench", "--quick", "--workloads", "uniform,anchored-attack", "--users", "10", "--attackers", "4", "--many-users", "2000", "--simulated", "3s",
		"--goroutines", "1,2", "--realtime", "10ms", "--timing-rounds", "1", "--http-time", "50ms",
		"--redis-url", "redis://" + redistest.Require(t) + "/0"}
	dir := t.TempDir()
	// The two labs run side by side: most of a quick lab's time is spent
	// waiting (real-time replays, paced HTTP), and they share nothing.
	run := func(name string, more ...string) (string, <-chan error) {
		out := filepath.Join(dir, name)
		done := make(chan error, 1)
		go func() {
			defer close(done)
			if _, stderr, code := ratelab(t, "", append(append(small, more...), "--out", out)...); code != 0 {
				done <- fmt.Errorf("bench %v: exit %d: %s", more, code, stderr)
			}
		}()
		return filepath.Join(out, "results.json"), done
	}
	one, oneDone := run("one", "--seed", "1")
	other, otherDone := run("other", "--seed", "2", "--modes", "simulated")
	for _, done := range []<-chan error{oneDone, otherDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f, err := results.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	charges := map[string]int{}
	for _, r := range f.RowsOf("llm") {
		charges[r.Limiter]++
	}
	if charges["fixed-window"] < 2 {
		t.Fatalf("fixed-window charged %d ways on llm: want the case compare used to refuse", charges["fixed-window"])
	}

	stdout, stderr, code := ratelab(t, "", "compare", one, one)
	if code != 0 || !strings.Contains(stdout, "No regression.") {
		t.Errorf("a run against itself: exit %d, stderr %q, stdout\n%s", code, stderr, stdout)
	}
	_, stderr, code = ratelab(t, "", "compare", one, other)
	if code != 2 || !strings.Contains(stderr, "seed 1 in OLD, 2 in NEW") || strings.Contains(stderr, "twice") || strings.Contains(stderr, "only") {
		t.Errorf("another seed: exit %d, want 2 and the seeds named alone; stderr %q", code, stderr)
	}
}
