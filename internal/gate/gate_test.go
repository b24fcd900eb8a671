package gate

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/results"
)

// The test binary is also the worker the tests start: with GATE_TEST_WORKER
// set, it plays the worker that variable names instead of running the
// tests.
func TestMain(m *testing.M) {
	if kind := os.Getenv("GATE_TEST_WORKER"); kind != "" {
		os.Exit(fakeWorker(kind, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeWorker is a worker of the given kind: "ok" serves fakeSampler,
// slowed by its --slow flag; the others fail in one way each.
func fakeWorker(kind string, args []string) int {
	switch kind {
	case "old": // a ratelab from before the worker
		fmt.Fprintln(os.Stderr, `ratelab: unknown command "worker"`)
		return 2
	case "other-protocol":
		fmt.Println(`{"protocol": 99, "limiters": ["gcra"], "workloads": ["uniform"]}`)
		return 0
	case "not-a-worker":
		fmt.Println("hello, world")
		return 0
	case "dies":
		fmt.Println(`{"protocol": 1, "limiters": ["gcra"], "workloads": ["uniform"]}`)
		fmt.Fprintln(os.Stderr, "panic: the limiter broke")
		return 3
	case "hangs":
		fmt.Println(`{"protocol": 1, "limiters": ["gcra"], "workloads": ["uniform"]}`)
		time.Sleep(time.Minute)
		return 0
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	slow := fs.Float64("slow", 1, "how much slower than the others this build is")
	limiters := fs.String("limiters", "fixed-window,gcra", "")
	once := fs.String("slow-once", "", "slower by --slow only when this file is not there, and it is made: the first worker started")
	if len(args) == 0 || args[0] != "worker" || fs.Parse(args[1:]) != nil {
		fmt.Fprintln(os.Stderr, "bad arguments:", args)
		return 2
	}
	if *once != "" {
		if f, err := os.OpenFile(*once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err != nil {
			*slow = 1 // a worker started before this one was the slow one
		} else {
			f.Close()
		}
	}
	s := &fakeSampler{slow: *slow, limiters: strings.Split(*limiters, ",")}
	if err := Serve(context.Background(), s, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fakeSampler answers at once with 100ns a decision times slow, give or
// take a little that depends on nothing but the count of samples so far.
type fakeSampler struct {
	slow     float64
	limiters []string
	n        int
}

func (s *fakeSampler) Limiters() []string  { return s.limiters }
func (s *fakeSampler) Workloads() []string { return []string{"uniform", "many-users"} }

func (s *fakeSampler) Sample(_ context.Context, limiter, workload string, d time.Duration) (results.Sample, error) {
	if !slices.Contains(s.limiters, limiter) {
		return results.Sample{}, fmt.Errorf("no limiter %q", limiter)
	}
	s.n++
	ns := 100 * s.slow * (1 + 0.03*math.Sin(float64(s.n)))
	return results.Sample{ThroughputPerS: 1e9 / ns, P50NS: ns, P90NS: 1.2 * ns}, nil
}

// start starts the test binary as a worker of the given kind.
func start(t *testing.T, kind, label string, args ...string) (*worker, error) {
	t.Helper()
	t.Setenv("GATE_TEST_WORKER", kind)
	w, err := startWorker(context.Background(), label, os.Args[0], args)
	if err == nil {
		t.Cleanup(func() { w.Close() })
	}
	return w, err
}

func TestRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		slow string
		want string
	}{
		{"the same build", "1", Same},
		{"a new build 1.5 times slower", "1.5", results.Regressed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, err := start(t, "ok", "base")
			if err != nil {
				t.Fatal(err)
			}
			cur, err := start(t, "ok", "new", "--slow", tt.slow)
			if err != nil {
				t.Fatal(err)
			}
			plan := Plan{Rounds: 12, Sample: time.Millisecond, Warm: time.Millisecond, Seed: 1}
			f, err := runPair(context.Background(), base, cur, plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Cells) != 4 {
				t.Fatalf("%d cells, want 4 (2 limiters on 2 workloads)", len(f.Cells))
			}
			var firsts []string
			for _, c := range f.Cells {
				if len(c.Rounds) != 12 {
					t.Errorf("%s on %s: %d rounds, want 12", c.Limiter, c.Workload, len(c.Rounds))
				}
				orders := map[string]int{}
				first := ""
				for _, r := range c.Rounds {
					orders[r.Order]++
					first += r.Order[:1]
				}
				if orders["AB"] != 6 || orders["BA"] != 6 {
					t.Errorf("%s on %s: orders %v, want 6 AB and 6 BA", c.Limiter, c.Workload, orders)
				}
				firsts = append(firsts, first)
			}
			if slices.Equal(firsts, slices.Repeat(firsts[:1], len(firsts))) {
				t.Errorf("every cell's rounds go in the same order, %s: want each drawn apart", firsts[0])
			}
			changes, err := Judge(f, DefaultRule)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				if c.Verdict != tt.want {
					t.Errorf("%s on %s, %s: %s (%.3f×), want %s", c.Limiter, c.Workload, c.Metric, c.Verdict, c.Ratio, tt.want)
				}
			}
		})
	}
}

func TestRunUnpaired(t *testing.T) {
	base, err := start(t, "ok", "base", "--limiters", "gcra,sliding-log")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := start(t, "ok", "new", "--limiters", "gcra,token-bucket")
	if err != nil {
		t.Fatal(err)
	}
	f, err := runPair(context.Background(), base, cur, Plan{Rounds: 5, Sample: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cells {
		if c.Limiter != "gcra" {
			t.Errorf("timed %s, which only one build has", c.Limiter)
		}
	}
	want := []string{"limiter token-bucket, which only the new build has", "limiter sliding-log, which only the base has"}
	if !slices.Equal(f.Meta.Unpaired, want) {
		t.Errorf("unpaired %q, want %q", f.Meta.Unpaired, want)
	}
	if _, err := runPair(context.Background(), base, cur, Plan{Rounds: 5, Sample: time.Millisecond, Limiters: []string{"leaky-bucket"}}, nil); err == nil ||
		!strings.Contains(err.Error(), `neither build has a limiter "leaky-bucket"`) {
		t.Errorf("a limiter neither has: error %v", err)
	}
	if _, err := runPair(context.Background(), base, cur, Plan{Rounds: 5, Sample: time.Millisecond, Limiters: []string{"sliding-log"}}, nil); err == nil ||
		!strings.Contains(err.Error(), "no limiter in common") {
		t.Errorf("a limiter only one has: error %v", err)
	}
}

func TestStartRefuses(t *testing.T) {
	for _, tt := range []struct {
		kind, says string
	}{
		{"old", `unknown command "worker"`},
		{"other-protocol", "protocol version 99, this gate version 1"},
		{"not-a-worker", `is not a ratelab worker: it said "hello, world"`},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			_, err := start(t, tt.kind, "base")
			if err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "the base build") {
				t.Errorf("error %v, want one naming the base build and saying %q", err, tt.says)
			}
		})
	}
	if _, err := startWorker(context.Background(), "base", filepath.Join(t.TempDir(), "nothing"), nil); err == nil {
		t.Error("a binary that is not there: no error")
	}
}

func TestWorkerFails(t *testing.T) {
	w, err := start(t, "dies", "new")
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Sample("gcra", "uniform", time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the new build") || !strings.Contains(err.Error(), "panic: the limiter broke") {
		t.Errorf("error %v, want one naming the build and saying what it said", err)
	}

	w, err = start(t, "hangs", "new")
	if err != nil {
		t.Fatal(err)
	}
	w.timeout = 100 * time.Millisecond
	began := time.Now()
	_, err = w.Sample("gcra", "uniform", time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %v, want one saying the worker did not answer", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("a worker that hangs held the gate for %v", took)
	}

	w, err = start(t, "ok", "new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Sample("leaky-bucket", "uniform", time.Millisecond); err == nil || !strings.Contains(err.Error(), `no limiter "leaky-bucket"`) {
		t.Errorf("a limiter the worker has not: error %v", err)
	}
	if _, err := w.Sample("gcra", "uniform", time.Millisecond); err != nil {
		t.Errorf("after an error the worker answers no more: %v", err)
	}
}

func TestServeBadRequest(t *testing.T) {
	var out bytes.Buffer
	err := Serve(context.Background(), &fakeSampler{limiters: []string{"gcra"}}, strings.NewReader(`{"limiter":"gcra","colour":"red"}`+"\n"), &out)
	if err == nil || !strings.Contains(err.Error(), "request 1") {
		t.Errorf("error %v, want one naming request 1", err)
	}
	if !strings.Contains(out.String(), `"protocol":1`) {
		t.Errorf("no hello before the error: %q", out.String())
	}
	err = Serve(context.Background(), &fakeSampler{}, io.MultiReader(), io.Discard)
	if err != nil {
		t.Errorf("an input that ends at once: %v", err)
	}
}

// gitRepo makes a git repository of a module whose command prints what,
// one commit per entry, and returns its folder and commits.
func gitRepo(t *testing.T, what ...string) (dir string, commits []string) {
	t.Helper()
	dir = t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := git(context.Background(), dir, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("init", "--quiet")
	write(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.22\n")
	for _, w := range what {
		write(t, filepath.Join(dir, "cmd", "app", "main.go"), w)
		run("add", ".")
		run("commit", "--quiet", "-m", "a commit")
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func program(says string) string {
	return "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"" + says + "\") }\n"
}

// says runs bin and returns what it printed.
func says(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three programs")
	}
	dir, commits := gitRepo(t, program("one"), program("two"))
	bins := t.TempDir()
	ctx := context.Background()

	commit, err := buildRef(ctx, dir, commits[0], "./cmd/app", filepath.Join(bins, "base"))
	if err != nil {
		t.Fatal(err)
	}
	if commit != commits[0][:12] || says(t, filepath.Join(bins, "base")) != "one" {
		t.Errorf("built %s saying %q, want %.12s saying one", commit, says(t, filepath.Join(bins, "base")), commits[0])
	}
	if wt, _ := git(ctx, dir, "worktree", "list"); strings.Count(wt, "\n") != 0 {
		t.Errorf("the base's worktree is left behind:\n%s", wt)
	}

	write(t, filepath.Join(dir, "cmd", "app", "main.go"), program("three"))
	commit, err = buildTree(ctx, dir, "./cmd/app", filepath.Join(bins, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if commit != commits[1][:12]+"+" || says(t, filepath.Join(bins, "new")) != "three" {
		t.Errorf("built %s saying %q, want %.12s+ (changed) saying three", commit, says(t, filepath.Join(bins, "new")), commits[1])
	}

	// A ref the repository does not have; one that does not build.
	if _, err := buildRef(ctx, dir, "no-such-branch", "./cmd/app", filepath.Join(bins, "x")); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "not a commit") {
		t.Errorf("an unknown ref: error %v", err)
	}
	if _, err := buildRef(ctx, dir, commits[0], "./cmd/nothing", filepath.Join(bins, "x")); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "go build") {
		t.Errorf("a package that is not there: error %v", err)
	}
	if _, err := buildRef(ctx, t.TempDir(), "HEAD", "./cmd/app", filepath.Join(bins, "x")); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "not in a git repository") {
		t.Errorf("no repository: error %v", err)
	}

	// A shallow clone has the last commit only.
	shallow := filepath.Join(t.TempDir(), "shallow")
	if _, err := git(ctx, dir, "clone", "--quiet", "--depth", "1", "file://"+dir, shallow); err != nil {
		t.Fatal(err)
	}
	if _, err := buildRef(ctx, shallow, commits[0], "./cmd/app", filepath.Join(bins, "x")); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "shallow") {
		t.Errorf("a shallow clone: error %v, want one that says it is shallow", err)
	}
}

// A regression stands when the cells that regressed, timed again by
// fresh workers in rounds of another seed, regress again: a build slower
// by 1.5 in every worker is confirmed, on every metric of every cell; one
// slower only in the first worker it starts (a spell of the machine) is
// not, and the rounds again time only the cells that regressed.
func TestAgainConfirms(t *testing.T) {
	t.Setenv("GATE_TEST_WORKER", "ok")
	dir := t.TempDir()
	wrap := func(name string, args ...string) string {
		path := filepath.Join(dir, name)
		script := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\" %s\n", os.Args[0], strings.Join(args, " "))
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	plan := Plan{Rounds: 8, Sample: time.Millisecond, Warm: time.Millisecond, Seed: 1, Limiters: []string{"gcra"}}
	for _, tt := range []struct {
		name      string
		new       string
		confirmed int
	}{
		{"slower in every worker", wrap("always", "--slow", "1.5"), 6},
		{"slower in the first worker alone", wrap("once", "--slow", "1.5", "--slow-once", filepath.Join(dir, "started")), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &builds{BaseBin: os.Args[0], NewBin: tt.new}
			first, err := b.Time(context.Background(), plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			judged, err := Judge(first, DefaultRule)
			if err != nil {
				t.Fatal(err)
			}
			if n := ABRegressions(judged); n != 6 {
				t.Fatalf("%d regressed at first, want 6 (3 metrics of gcra on 2 workloads)", n)
			}
			// One cell regressed alone: the rounds again time it alone.
			one := Again(plan, judged[:1])
			if !slices.Equal(one.Limiters, []string{"gcra"}) || len(one.Workloads) != 1 || one.Seed == plan.Seed || one.Rounds != plan.Rounds {
				t.Errorf("again of one regression: %+v, want gcra on one workload, another seed, as many rounds", one)
			}
			again, err := b.Time(context.Background(), Again(plan, judged), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Cells) != 2 {
				t.Errorf("timed again %d cells, want the 2 that regressed", len(again.Cells))
			}
			rejudged, err := Judge(again, DefaultRule)
			if err != nil {
				t.Fatal(err)
			}
			if got := Confirmed(judged, rejudged); len(got) != tt.confirmed {
				t.Errorf("%d confirmed, want %d: %+v", len(got), tt.confirmed, got)
			}
		})
	}
}
