package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/results"
)

// ratelab runs the command line and returns its output and exit status.
func ratelab(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	code = exitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

func TestReplayExample1(t *testing.T) {
	out, errOut, code := ratelab(t, "", "replay", "--algo", "token-bucket", "--limit", "1/s burst 5", "testdata/example1.csv")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	golden.Check(t, "example1.golden", []byte(out))
	// The three bucket algorithms give the same answers.
	for _, a := range []string{"leaky-bucket", "gcra"} {
		again, _, _ := ratelab(t, "", "replay", "--algo", a, "--limit", "1/s burst 5", "testdata/example1.csv")
		if again != out {
			t.Errorf("%s replays example 1 differently from token-bucket:\n%s", a, again)
		}
	}
}

func TestReplayStdin(t *testing.T) {
	trace := "0,a\n0,a\n0,a,3\n"
	for _, args := range [][]string{{}, {"-"}} {
		out, _, code := ratelab(t, trace, append([]string{"replay", "--algo", "sliding-log", "--limit", "2/min"}, args...)...)
		want := `{"t":0,"key":"a","n":1,"allowed":true,"limit":2,"remaining":1,"retry_after":0,"reset_after":60}
{"t":0,"key":"a","n":1,"allowed":true,"limit":2,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"a","n":3,"allowed":false,"limit":2,"remaining":0,"retry_after":null,"reset_after":60}
`
		if code != 0 || out != want {
			t.Errorf("replay %v: exit %d, output\n%s\nwant\n%s", args, code, out, want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	replay := []string{"replay", "--algo", "fixed-window", "--limit", "2/s"}
	for _, tt := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{"no command", "", nil, 2, "", "no command given"},
		{"unknown command", "", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"help", "", []string{"help"}, 0, "Commands:", ""},
		{"--help", "", []string{"--help"}, 0, "replay", ""},
		{"help replay", "", []string{"help", "replay"}, 0, "TRACE is a CSV file", ""},
		{"replay --help", "", []string{"replay", "--help"}, 0, "ratelab replay --algo ALGO", ""},
		{"bad flag", "", []string{"replay", "--colour"}, 2, "", "flag provided but not defined: --colour"},
		{"no algo", "", []string{"replay"}, 2, "", "--algo or --config is required"},
		{"unknown algo", "", []string{"replay", "--algo", "magic"}, 2, "", `unknown algorithm "magic"`},
		{"no limit", "", []string{"replay", "--algo", "sliding-log"}, 2, "", "sliding-log needs --limit, as in --limit 100/min"},
		{"a limit without a period", "", []string{"replay", "--algo", "sliding-log", "--limit", "3"}, 2, "", `invalid value "3" for flag --limit: limiters: not a rate: "3": no / between the count and the period`},
		{"a burst on a window", "", []string{"replay", "--algo", "fixed-window", "--limit", "3/s burst 2"}, 2, "", "fixed-window has no burst"},
		{"zero limit", "", []string{"replay", "--algo", "fixed-window", "--limit", "0/s"}, 2, "", "the count is zero"},
		{"negative window", "", []string{"replay", "--algo", "fixed-window", "--limit", "1/-1s"}, 2, "", `the period "-1s" is not a unit`},
		{"huge burst", "", []string{"replay", "--algo", "gcra", "--limit", "1/1000s burst 2000000000"}, 2, "", "years to refill"},
		{"--window is gone", "", []string{"replay", "--algo", "sliding-log", "--window", "1m"}, 2, "", "replay: --window is gone: the limit is one flag, --limit N/PERIOD (--limit 100 --window 1m is --limit 100/min)"},
		{"--capacity is gone", "", []string{"replay", "--algo", "gcra", "--capacity", "1", "--rate", "NaN"}, 2, "", `replay: --capacity is gone: the limit is one flag, --limit "R/s burst C"`},
		{"--rate is gone", "", []string{"replay", "--algo", "gcra", "--rate", "5"}, 2, "", `replay: --rate is gone`},
		{"unknown backend", "", append(replay, "--backend", "etcd"), 2, "", `--backend "etcd": want memory or redis`},
		{"redis url without redis", "", append(replay, "--redis-url", "redis://x"), 2, "", "--redis-url is for --backend redis"},
		{"bad redis url", "", append(replay, "--backend", "redis", "--redis-url", "http://x"), 2, "", "--redis-url"},
		{"redis down", "0,a\n", append(replay, "--backend", "redis", "--redis-url", "redis://127.0.0.1:1/0"), 1, "", "no answer from Redis at 127.0.0.1:1"},
		{"two traces", "", append(replay, "a", "b"), 2, "", "one trace at most"},
		{"missing file", "", append(replay, "testdata/nope.csv"), 2, "", "no such file"},
		{"malformed line", "0,a\n0.5,b\n1,c,zero\n2,d\n", replay, 2, `"key":"b"`, "standard input: line 3: cost \"zero\" is not a positive integer"},
		{"malformed time", "# c\nsoon,a\n", replay, 2, "", `line 2: time "soon" is not a number`},
		{"config and algo", "", []string{"replay", "--config", "x.yaml", "--algo", "gcra"}, 2, "", "--config gives the algorithm and the limits; --algo is not for it"},
		{"config with a typo", "", []string{"replay", "--config", "testdata/typo.yaml"}, 2, "", "testdata/typo.yaml:7: tiers.pro[1].nmae: unknown field: did you mean name?"},
		{"time going back", "1,a\n3,b\n2,a\n", replay, 2, `"t":3`, "line 3: time 2 is before line 2's 3: a trace must be in time order"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := ratelab(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.stderr)
			}
		})
	}
}

func TestBench(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := ratelab(t, "", "bench", "--limiters", "fixed-window,sliding-log,gcra", "--workloads", "boundary-attack",
		"--modes", "simulated", "--attackers", "3", "--simulated", "5s", "--limit", "10/s", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"boundary-attack", "fixed-window", "2.00", "Simulated time:", filepath.Join(out, "results.json")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if s := besidesProgress(stderr); s != "" {
		t.Errorf("stderr %q, want nothing but progress", s)
	}
	for _, want := range []string{"Which limiter should I pick?", "Avoid where clients can time the window edge: fixed-window", "Report: " + filepath.Join(out, "report.html")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, name := range []string{"results.json", "tables.md", "tables.txt", "report.html", "report.md", "charts/edge.png", "charts/edge.svg", "charts/accuracy.png"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestReport(t *testing.T) {
	run := t.TempDir()
	if _, stderr, code := ratelab(t, "", "bench", "--limiters", "fixed-window,gcra", "--workloads", "boundary-attack",
		"--modes", "simulated,memory", "--attackers", "2", "--many-users", "1000", "--simulated", "3s", "--limit", "10/s", "--out", run); code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	results := filepath.Join(run, "results.json")
	elsewhere := filepath.Join(t.TempDir(), "new")
	stdout, stderr, code := ratelab(t, "", "report", "--out", elsewhere, results)
	if code != 0 || stderr != "" || !strings.Contains(stdout, filepath.Join(elsewhere, "report.html")) {
		t.Fatalf("report --out: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, name := range []string{"report.html", "report.md", "charts/edge.png", "charts/memory.svg"} {
		if st, err := os.Stat(filepath.Join(elsewhere, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	// By default, beside the results.
	os.Remove(filepath.Join(run, "report.html"))
	if _, stderr, code := ratelab(t, "", "report", results); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(run, "report.html")); err != nil {
		t.Error(err)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"schema": 2, "meta": {`), 0o644)
	for _, tt := range []struct {
		args []string
		says string
	}{
		{nil, "want one RESULTS.json, got 0"},
		{[]string{results, results}, "want one RESULTS.json, got 2"},
		{[]string{"--colour", results}, "flag provided but not defined"},
		{[]string{"/nonexistent/results.json"}, "no such file"},
		{[]string{bad}, bad},
	} {
		_, stderr, code := ratelab(t, "", append([]string{"report"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.says) {
			t.Errorf("report %v: exit %d, stderr %q; want 2 saying %q", tt.args, code, stderr, tt.says)
		}
	}
}

// Progress is redrawn in place only on a terminal: not in a file, not in
// a pipe, not in a buffer, where it is a line now and then.
func TestProgressOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"file": f, "pipe": w, "buffer": &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("a %s taken for a terminal", name)
		}
		progress, stop := labProgress(out)
		if _, ok := progress.(*harness.ProgressLog); !ok {
			t.Errorf("the lab's progress in a %s is a %T, want a *harness.ProgressLog", name, progress)
		}
		stop()
	}
}

// besidesProgress is stderr without the lab's progress lines.
func besidesProgress(stderr string) string {
	var rest strings.Builder
	for line := range strings.Lines(stderr) {
		if !strings.HasPrefix(line, "lab: ") {
			rest.WriteString(line)
		}
	}
	return rest.String()
}

func TestBenchTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.csv")
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "%.3f,user-%d\n", float64(i)*0.01, i%3)
	}
	os.WriteFile(trace, []byte(b.String()), 0o644)
	stdout, stderr, code := ratelab(t, "", "bench", "--limiters", "fixed-window,sliding-log", "--workloads", "uniform", "--users", "2",
		"--modes", "simulated", "--simulated", "4s", "--limit", "10/s", "--trace", trace, "--out", dir)
	if code != 0 || !strings.Contains(stdout, "trace ") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	os.WriteFile(trace, []byte("0,a\n1,a,x\n"), 0o644)
	if _, stderr, code := ratelab(t, "", "bench", "--trace", trace, "--out", dir); code != 2 || !strings.Contains(stderr, "line 2") {
		t.Errorf("malformed trace: exit %d, %q", code, stderr)
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--limiters", "magic"}, `unknown limiter "magic"`},
		{[]string{"--modes", "fast"}, `unknown mode "fast"`},
		{[]string{"--workloads", "spiky"}, `unknown workload "spiky"`},
		{[]string{"--goroutines", "1,two"}, `"two" is not a number`},
		{[]string{"--limit", "0/s"}, "the count is zero"},
		{[]string{"--limit", "100/s burst 10"}, "has no burst"},
		{[]string{"--seed", "-1"}, "invalid value"},
		{[]string{"extra"}, `no arguments, got "extra"`},
		{[]string{"--rate", "NaN"}, "offered rate"},
		{[]string{"--rate", "3e9"}, "offered rate"},
		{[]string{"--limit", "100/1ms"}, "would have about"},
		{[]string{"--limit", "100/min"}, "at least two windows"},
		{[]string{"--window", "1s"}, "bench: --window is gone: the limit is one flag, --limit N/PERIOD"},
		{[]string{"--trace", "/nonexistent.csv"}, "no such file"},
		{[]string{"--redis=false", "--redis-url", "redis://127.0.0.1:6379/0"}, "--redis-url is for the Redis rows"},
		{[]string{"--redis=false", "--limiters", "gcra (redis)"}, "gcra (redis) is kept in Redis"},
		{[]string{"--redis-url", "http://127.0.0.1:6379"}, "the Redis URL"},
	} {
		_, stderr, code := ratelab(t, "", append([]string{"bench"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.says) {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 saying %q", tt.args, code, stderr, tt.says)
		}
	}
	stdout, _, code := ratelab(t, "", "bench", "--help")
	if code != 0 || !strings.Contains(stdout, "ratelab bench [flags]") {
		t.Errorf("bench --help: exit %d, %q", code, stdout)
	}
}

func TestCompare(t *testing.T) {
	old := filepath.Join("..", "..", "results", "testdata", "gate-old.json")
	same := filepath.Join("..", "..", "results", "testdata", "gate-new.json")
	dir := t.TempDir()
	// variant writes the second run changed by change, and returns its path.
	variant := func(name string, change func(*results.File)) string {
		f, err := results.ReadFile(same)
		if err != nil {
			t.Fatal(err)
		}
		change(f)
		path := filepath.Join(dir, name)
		if err := results.WriteFile(path, f); err != nil {
			t.Fatal(err)
		}
		return path
	}
	moreAllowed := variant("accuracy.json", func(f *results.File) {
		for i, r := range f.Rows {
			if r.Limiter == "sliding-counter" && r.Workload == "bursty" && r.Mode == "simulated" {
				f.Rows[i].Add(results.Admitted, results.UnitCount, r.Get(results.Admitted)+3)
				f.Rows[i].Add(results.FalseAllows, results.UnitCount, r.Get(results.FalseAllows)+3)
			}
		}
	})
	otherSeed := variant("seed.json", func(f *results.File) { f.Meta.Seed = 7 })
	notJSON := filepath.Join(dir, "not.json")
	if err := os.WriteFile(notJSON, []byte("{\"schema\": 3, \"rows\": [\n  {\"limiter\": }\n]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{"noise", []string{old, same}, 0, "No regression.", ""},
		{"noise, all", []string{"--all", old, same}, 0, "within noise", ""},
		{"a changed count", []string{old, moreAllowed}, 1, "REGRESSED: 2 metrics beyond tolerance.", "2 metrics regressed"},
		{"the table says what", []string{old, moreAllowed}, 1, "sliding-counter │ bursty   │ false allows", ""},
		{"other parameters", []string{old, otherSeed}, 2, "", "seed 1 in OLD, 7 in NEW"},
		{"unreadable", []string{old, notJSON}, 2, "", "NEW: " + notJSON + ": results: line 2, column 15: invalid character"},
		{"missing", []string{filepath.Join(dir, "nope.json"), same}, 2, "", "OLD: open"},
		{"one file", []string{old}, 2, "", "want two files, OLD.json and NEW.json, got 1"},
		{"bad tolerance", []string{"--memory-tolerance", "-1", old, same}, 2, "", "--memory-tolerance must be a fraction from 0 to 10"},
		{"a tolerance of time, which compare has no more", []string{"--time-tolerance", "0.4", old, same}, 2, "", "flag provided but not defined: --time-tolerance"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := ratelab(t, "", append([]string{"compare"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.stderr)
			}
		})
	}
}

func TestMergeCommand(t *testing.T) {
	a := filepath.Join("..", "..", "results", "testdata", "gate-old.json")
	b := filepath.Join("..", "..", "results", "testdata", "gate-new.json")
	out := filepath.Join(t.TempDir(), "baseline.json")
	stdout, stderr, code := ratelab(t, "", "merge", "--out", out, a, b)
	if code != 0 || !strings.Contains(stdout, "2 runs of the lab pooled") {
		t.Fatalf("merge: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, stderr, code := ratelab(t, "", "compare", out, b); code != 0 {
		t.Errorf("compare with the merged baseline: exit %d: %s", code, stderr)
	}
	if _, stderr, code := ratelab(t, "", "merge", a, b); code != 2 || !strings.Contains(stderr, "want --out FILE") {
		t.Errorf("merge without --out: exit %d: %s", code, stderr)
	}
}

// The configuration in internal/config/testdata drives replay: three tiers, two of
// them composite, a user assigned, one overridden, and everyone else in
// the default tier.
func TestReplayConfig(t *testing.T) {
	var trace strings.Builder
	trace.WriteString("t,key,n\n")
	for i := range 40 { // alice (pro: 10/s and 300/h) at 10 a second: the hour runs out
		fmt.Fprintf(&trace, "%.1f,alice\n", float64(i)*0.1)
	}
	for i := range 301 {
		fmt.Fprintf(&trace, "%.1f,alice\n", 4+float64(i)*0.1)
	}
	trace.WriteString("40,frank\n40,frank\n40,frank\n40,carol\n40,carol\n")
	out, errOut, code := ratelab(t, trace.String(), "replay", "--config", filepath.Join("..", "..", "internal", "config", "testdata", "tiers.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type line struct {
		T        float64 `json:"t"`
		Key      string  `json:"key"`
		Allowed  bool    `json:"allowed"`
		Tier     string  `json:"tier"`
		DeniedBy string  `json:"denied_by"`
	}
	var lines []line
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var line line
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if len(lines) != 346 {
		t.Fatalf("%d lines, want 346", len(lines))
	}
	// Her 10/s denies now and then (the sliding counter's estimate); once
	// 300 are in, the hour denies everything.
	admitted, afterHour := 0, 0
	for _, l := range lines[:341] {
		if l.Tier != "pro" {
			t.Fatalf("alice in tier %q, want pro", l.Tier)
		}
		switch {
		case admitted == 300:
			afterHour++
			if l.Allowed || l.DeniedBy != "hourly" {
				t.Errorf("alice at %v after her 300: %+v, want denied by the hourly limit", l.T, l)
			}
		case l.Allowed:
			admitted++
		case l.DeniedBy != "10/s":
			t.Errorf("alice at %v: denied by %q before her hour ran out, want 10/s", l.T, l.DeniedBy)
		}
	}
	if admitted != 300 || afterHour == 0 {
		t.Errorf("alice: %d admitted, then %d denied by the hour; want 300, then some", admitted, afterHour)
	}
	for i, want := range []struct {
		key, tier, deniedBy string
		allowed             bool
	}{
		{"frank", "free", "", true}, {"frank", "free", "", true}, {"frank", "free", "2/s", false},
		{"carol", "", "", true}, {"carol", "", "1/s", false},
	} {
		l := lines[341+i]
		if l.Key != want.key || l.Tier != want.tier || l.DeniedBy != want.deniedBy || l.Allowed != want.allowed {
			t.Errorf("line %d: %+v, want %+v", 341+i, l, want)
		}
	}
}

func TestDemo(t *testing.T) {
	out, errOut, code := ratelab(t, "", "demo")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden.Check(t, "demo.golden", []byte(out)) // piped: plain text
	for i, line := range strings.Split(out, "\n") {
		if w := columns(line); w > helpWidth {
			t.Errorf("the demo's line %d is %d columns, more than %d:\n%s", i+1, w, helpWidth, line)
		}
	}
	out, _, code = ratelab(t, "", "demo", "--json")
	var doc struct {
		Scenes []struct {
			Title string `json:"title"`
			Steps []struct {
				Allowed  bool   `json:"allowed"`
				DeniedBy string `json:"denied_by"`
			} `json:"steps"`
		} `json:"scenes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Scenes) != 6 || len(doc.Scenes[5].Steps) != 102 || doc.Scenes[5].Steps[100].DeniedBy != "100/h" {
		t.Errorf("demo --json: exit %d, %v, %d scenes", code, err, len(doc.Scenes))
	}
	if out, _, _ := ratelab(t, "", "demo", "--color", "always"); !strings.Contains(out, "\x1b[") {
		t.Error("demo --color always: no colour")
	}
	if _, errOut, code := ratelab(t, "", "demo", "--color", "sometimes"); code != 2 || !strings.Contains(errOut, "--color must be auto, always or never") {
		t.Errorf("demo --color sometimes: exit %d: %s", code, errOut)
	}
}

// bench --config runs the configuration's limiter beside the others:
// timed and weighed, its accuracy not judged against an N per W it does
// not have, and never picked.
func TestBenchConfig(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := ratelab(t, "", "bench", "--limiters", "gcra", "--workloads", "uniform", "--modes", "simulated,memory,timing",
		"--users", "5", "--many-users", "2000", "--simulated", "3s", "--timing-rounds", "2", "--limit", "10/s",
		"--config", filepath.Join("..", "..", "internal", "config", "testdata", "tiers.yaml"), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := results.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, r := range f.Rows {
		if r.Limiter != "config" {
			continue
		}
		modes[r.Mode] = true
		if r.Setting(results.OwnLimits) == "" || r.Algorithm != "sliding-counter" {
			t.Errorf("config's row %+v: want own limits, sliding-counter", r)
		}
		if r.Mode == "" && !strings.Contains(r.Skipped, "its limits are its own") {
			t.Errorf("config's accuracy run: %+v", r)
		}
	}
	if !modes[""] || !modes["memory"] || !modes["timing"] {
		t.Errorf("config ran in %v, want skipped accuracy, memory and timing", modes)
	}
	picks := strings.Index(stdout, "Which limiter should I pick?")
	if picks < 0 || strings.Contains(stdout[picks:], "config") {
		t.Errorf("no picks, or config among them:\n%s", stdout)
	}
	if _, stderr, code := ratelab(t, "", "bench", "--config", "testdata/typo.yaml", "--out", out); code != 2 || !strings.Contains(stderr, "typo.yaml:7: tiers.pro[1].nmae") {
		t.Errorf("bench --config with a typo: exit %d: %s", code, stderr)
	}
}
