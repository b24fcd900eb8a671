package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/gate"
	"github.com/ratelab/ratelab/results"
)

// With RATELAB_TEST_MAIN set, the test binary is ratelab itself: what the
// gate's tests start as the two builds.
func TestMain(m *testing.M) {
	if os.Getenv("RATELAB_TEST_MAIN") != "" {
		os.Exit(exitCode(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
	}
	os.Exit(m.Run())
}

// asRatelab makes the test binary a ratelab for the commands the test
// starts, and returns its path.
func asRatelab(t *testing.T) string {
	t.Helper()
	t.Setenv("RATELAB_TEST_MAIN", "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestGate(t *testing.T) {
	exe := asRatelab(t)
	dir := t.TempDir()
	// A threshold of 100%: the plumbing is tested here, the rule in
	// package results, and a test binary under the race detector is
	// too noisy to be judged by 10%.
	small := []string{"--rounds", "6", "--sample", "2ms", "--warm", "1ms", "--limiters", "gcra", "--workloads", "uniform,bursty", "--threshold", "1"}
	out, errOut, code := ratelab(t, "", append([]string{"gate", "--base-bin", exe, "--new-bin", exe, "--out", dir, "--all"}, small...)...)
	if code != 0 {
		t.Fatalf("one build against itself: exit %d, stderr %q, stdout\n%s", code, errOut, out)
	}
	for _, want := range []string{"BASE: " + exe, "NEW:  " + exe, "6 rounds a cell", "95% interval", "whole interval is above 2.00", "│ gcra    │ bursty   │ p90", "No timing regression."} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "│ REGRESSED") {
		t.Errorf("one build against itself regressed:\n%s", out)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "gate.txt"))
	if err != nil || string(saved) != out {
		t.Errorf("gate.txt is not what was printed (%v)", err)
	}
	in, err := os.Open(filepath.Join(dir, "ab.json"))
	if err != nil {
		t.Fatal(err)
	}
	ab, err := gate.ReadAB(in)
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(ab.Cells) != 2 || len(ab.Cells[0].Rounds) != 6 || ab.Meta.Base.Label != exe || ab.Meta.Warm.Duration() != time.Millisecond {
		t.Errorf("ab.json: %d cells of %d rounds, base %q, warm %v; want 2 of 6, base %s, 1ms", len(ab.Cells), len(ab.Cells[0].Rounds), ab.Meta.Base.Label, ab.Meta.Warm.Duration(), exe)
	}

	// The same samples judged again, by a rule that cannot be met.
	again, _, code := ratelab(t, "", "gate", "--judge", filepath.Join(dir, "ab.json"), "--threshold", "0", "--confidence", "0.5", "--all")
	if code > 1 || !strings.Contains(again, "50% interval") || !strings.Contains(again, "above 1.00") {
		t.Errorf("judged again: exit %d\n%s", code, again)
	}
}

func TestGateNoBase(t *testing.T) {
	exe := asRatelab(t)
	dir := t.TempDir()
	old := filepath.Join(dir, "old-ratelab")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho 'ratelab: unknown command \"'$1'\"' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	small := []string{"--rounds", "5", "--sample", "1ms", "--limiters", "gcra", "--workloads", "uniform", "--out", dir}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"a ref the repository has not", []string{"--base", "no-such-ref-anywhere", "--new-bin", exe}, 2,
			`Timings NOT COMPARED: gate: the base cannot be built: the base "no-such-ref-anywhere": it is not a commit, branch or tag`,
			"no base to time against, so no timing was gated"},
		{"said to pass without one, with nothing else to gate", []string{"--base", "no-such-ref-anywhere", "--new-bin", exe, "--no-base-ok"}, 2,
			"Timings NOT COMPARED", "no base to time against and no --baseline: nothing to gate"},
		{"a base from before the worker", []string{"--base-bin", old, "--new-bin", exe}, 2,
			"it predates the A/B gate (its ratelab has no worker command): name a later base", "no base to time against"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := ratelab(t, "", append(append([]string{"gate"}, tt.args...), small...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(strings.ReplaceAll(out, "\n", " "), tt.stdout) {
				t.Errorf("stdout %q, want it to say %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want it to say %q", errOut, tt.stderr)
			}
			// The whole log is kept, the error that ended the run too.
			kept, err := os.ReadFile(filepath.Join(dir, "gate.txt"))
			if err != nil || !strings.Contains(string(kept), tt.stderr) || !strings.Contains(strings.ReplaceAll(string(kept), "\n", " "), tt.stdout) {
				t.Errorf("gate.txt %q (%v), want what the run printed, and %q", kept, err, tt.stderr)
			}
		})
	}
}

func TestGateBadFlags(t *testing.T) {
	notAB := filepath.Join("..", "..", "results", "testdata", "gate-old.json")
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no base", nil, "want --base REF or --base-bin FILE"},
		{"an empty base", []string{"--base", ""}, "--base is empty"},
		{"two bases", []string{"--base", "main", "--base-bin", "x"}, "give one"},
		{"too few rounds", []string{"--base", "main", "--rounds", "2"}, "rounds must be from 5 to 1000"},
		{"a sample too short", []string{"--base", "main", "--sample", "1us"}, "a sample lasts from 1ms to 10s"},
		{"a warm-up too long", []string{"--base", "main", "--warm", "1m"}, "a warm-up lasts from 0 to 10s"},
		{"a negative threshold", []string{"--base", "main", "--threshold", "-0.1"}, "the threshold must be a fraction"},
		{"a baseline not there", []string{"--base", "main", "--baseline", "nope.json"}, "gate: the baseline: open nope.json"},
		{"judging what is not an A/B file", []string{"--judge", notAB}, "not an A/B file"},
		{"arguments", []string{"--base", "main", "extra"}, `no arguments, got "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := ratelab(t, "", append([]string{"gate"}, tt.args...)...)
			if code != 2 || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.stderr)
			}
		})
	}
}

// TestGateCommitted runs the committed half of the gate, on a lab small
// enough for a test: its baseline made by the same lab, then one with an
// accuracy count changed.
func TestGateCommitted(t *testing.T) {
	exe := asRatelab(t)
	lab := []string{"bench", "--modes", "simulated", "--limiters", "gcra,sliding-log", "--workloads", "uniform", "--users", "5", "--simulated", "3s", "--redis=false"}
	defer func(was []string) { committedLab = was }(committedLab)
	committedLab = lab
	dir := t.TempDir()
	if _, errOut, code := ratelab(t, "", append(lab, "--out", filepath.Join(dir, "baseline"))...); code != 0 {
		t.Fatalf("the baseline's lab: exit %d, %s", code, errOut)
	}
	baseline := filepath.Join(dir, "baseline", "results.json")
	f, err := results.ReadFile(baseline)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range f.Rows {
		if r.Limiter == "gcra" && r.Has(results.Admitted) {
			f.Rows[i].Add(results.Admitted, results.UnitCount, r.Get(results.Admitted)-1)
		}
	}
	changed := filepath.Join(dir, "changed.json")
	if err := results.WriteFile(changed, f); err != nil {
		t.Fatal(err)
	}
	gate := []string{"gate", "--base", "no-such-ref-anywhere", "--new-bin", exe, "--no-base-ok", "--out", filepath.Join(dir, "gate")}
	out, errOut, code := ratelab(t, "", append(gate, "--baseline", baseline)...)
	if code != 0 || !strings.Contains(out, "No regression.") || !strings.Contains(out, "the gate passes on the committed figures alone; no timing was gated") {
		t.Errorf("the same lab: exit %d, stderr %q, stdout\n%s", code, errOut, out)
	}
	out, _, code = ratelab(t, "", append(gate, "--baseline", changed)...)
	if code != 1 || !strings.Contains(out, "│ gcra    │ uniform  │ admitted") {
		t.Errorf("an accuracy count changed: exit %d, want 1 and the count named, stdout\n%s", code, out)
	}
}
