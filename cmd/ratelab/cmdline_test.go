package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parseFlags takes flags and arguments in any order, as people type
// them, until a "--".
func TestParseFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		out  string
		all  bool
		rest []string
		err  string // a part of it; "" for none
	}{
		{args: nil},
		{args: []string{"a.json", "b.json"}, rest: []string{"a.json", "b.json"}},
		{args: []string{"--out", "d", "a.json"}, out: "d", rest: []string{"a.json"}},
		{args: []string{"a.json", "--out", "d"}, out: "d", rest: []string{"a.json"}},
		{args: []string{"a.json", "--all", "b.json", "-out=d"}, out: "d", all: true, rest: []string{"a.json", "b.json"}},
		{args: []string{"-", "--all"}, all: true, rest: []string{"-"}}, // "-" is an argument: standard input
		// "--" ends the flags: what follows is arguments, dashes or not.
		{args: []string{"a.json", "--", "--all", "-b.json"}, rest: []string{"a.json", "--all", "-b.json"}},
		{args: []string{"--", "a.json", "--out", "d"}, rest: []string{"a.json", "--out", "d"}},
		{args: []string{"a.json", "--nope"}, err: "t: flag provided but not defined: --nope"},
		{args: []string{"a.json", "--out"}, err: "t: flag needs an argument: --out"},
		{args: []string{"a.json", "--all=maybe"}, err: `t: invalid boolean value "maybe" for --all`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		out := fs.String("out", "", "")
		all := fs.Bool("all", false, "")
		fs.Usage = func() { t.Errorf("parseFlags(%q) showed the usage", tt.args) }
		err := parseFlags(fs, tt.args, nil)
		switch {
		case tt.err != "":
			if !errors.As(err, new(commandLineError)) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseFlags(%q) = %v, want a command-line error saying %q", tt.args, err, tt.err)
			}
		case err != nil:
			t.Errorf("parseFlags(%q) = %v", tt.args, err)
		case *out != tt.out || *all != tt.all || !slices.Equal(fs.Args(), tt.rest):
			t.Errorf("parseFlags(%q): --out %q, --all %v, arguments %q; want %q, %v, %q", tt.args, *out, *all, fs.Args(), tt.out, tt.all, tt.rest)
		}
	}
}

// A bad command line is said in one line, then where the help is: the
// usage, some ninety lines, would bury it.
func TestBadCommandLine(t *testing.T) {
	type row struct {
		args []string
		says string // the first line, after "ratelab COMMAND: "
	}
	rows := []row{
		{[]string{"compare", "--tolerance", "x", "a.json", "b.json"}, "flag provided but not defined: --tolerance"},
		{[]string{"compare", "a.json", "b.json", "--memory-tolerance", "x"}, `invalid value "x" for flag --memory-tolerance: parse error`},
		{[]string{"compare", "--memory-tolerance", "-1", "a.json", "b.json"}, "--memory-tolerance must be a fraction from 0 to 10 (0.02 is 2%), got -1"},
		{[]string{"compare", "a.json"}, "want two files, OLD.json and NEW.json, got 1"},
		{[]string{"report"}, "want one RESULTS.json, got 0 arguments"},
		{[]string{"report", "a.json", "b.json", "c.json"}, "want one RESULTS.json, got 3 arguments"},
		{[]string{"report", "a.json", "--out"}, "flag needs an argument: --out"},
		{[]string{"merge", "--out", "m.json"}, "want --out FILE and at least one RUN.json"},
		{[]string{"bench", "--quick", "extra"}, `no arguments, got "extra"`},
		{[]string{"replay", "a.csv", "--algo", "gcra", "b.csv"}, "one trace at most, got 2"},
		{[]string{"replay", "--algo", "magic"}, `--algo: limiters: invalid parameter: unknown algorithm "magic" (want one of fixed-window, sliding-log, sliding-counter, token-bucket, leaky-bucket, gcra)`},
		{[]string{"demo", "--color", "sometimes"}, `--color must be auto, always or never, got "sometimes"`},
		{[]string{"gate", "--base", "main", "extra"}, `no arguments, got "extra"`},
		{[]string{"worker", "extra"}, `no arguments, got "extra"`},
	}
	for _, c := range commands() {
		rows = append(rows, row{[]string{c.name, "--nope"}, "flag provided but not defined: --nope"})
	}
	for _, tt := range rows {
		stdout, stderr, code := ratelab(t, "", tt.args...)
		want := "ratelab " + tt.args[0] + ": " + tt.says + "\nsee 'ratelab " + tt.args[0] + " --help'\n"
		if code != 2 || stdout != "" || stderr != want {
			t.Errorf("ratelab %s: exit %d, stdout %q, stderr\n%s\nwant 2, nothing, and\n%s", strings.Join(tt.args, " "), code, stdout, stderr, want)
		}
	}
}

// --help and -h, wherever they are, show the whole usage, on standard
// output, and succeed.
func TestHelp(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}, {c.name, "x.json", "--help"}} {
			stdout, stderr, code := ratelab(t, "", args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage:\n\n\tratelab "+c.name) || !strings.Contains(stdout, "Flags:\n") {
				t.Errorf("ratelab %s: exit %d, stderr %q, stdout %.60q...; want 0, nothing, the usage", strings.Join(args, " "), code, stderr, stdout)
			}
			for i, line := range strings.Split(stdout, "\n") {
				if w := columns(line); w > helpWidth {
					t.Errorf("ratelab %s: line %d is %d columns, more than %d:\n%s", strings.Join(args, " "), i+1, w, helpWidth, line)
				}
			}
		}
	}
}

// Flags may follow the arguments, as people type them.
func TestFlagsAfterArguments(t *testing.T) {
	old := filepath.Join("..", "..", "results", "testdata", "gate-old.json")
	cur := filepath.Join("..", "..", "results", "testdata", "gate-new.json")
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if _, stderr, code := ratelab(t, "", "bench", "--limiters", "fixed-window,gcra", "--workloads", "boundary-attack",
		"--modes", "simulated", "--attackers", "2", "--simulated", "3s", "--limit", "10/s", "--out", run); code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	results := filepath.Join(run, "results.json")
	report := filepath.Join(dir, "report")
	merged := filepath.Join(dir, "merged.json")
	golden, err := os.ReadFile(filepath.Join("testdata", "example1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{[]string{"report", results, "--out", report}, 0, "Report: " + filepath.Join(report, "report.html"), ""},
		{[]string{"compare", old, cur, "--all"}, 0, "within noise", ""}, // said with --all only
		{[]string{"compare", old, "--all", cur}, 0, "within noise", ""},
		{[]string{"merge", old, cur, "--out", merged}, 0, merged + ": 2 runs of the lab pooled", ""},
		{[]string{"replay", "testdata/example1.csv", "--algo", "token-bucket", "--limit", "1/s burst 5"}, 0, string(golden), ""},
		// After "--", a flag is an argument.
		{[]string{"compare", "--", old, cur, "--all"}, 2, "", "want two files, OLD.json and NEW.json, got 3"},
		{[]string{"report", "--out", report, "--", "-results.json"}, 2, "", "open -results.json: no such file"},
	} {
		stdout, stderr, code := ratelab(t, "", tt.args...)
		if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("ratelab %s: exit %d, stdout\n%s\nstderr %q; want %d, %q and %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
	for _, name := range []string{"report.html", "report.md", "charts/edge.svg"} {
		if _, err := os.Stat(filepath.Join(report, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(merged); err != nil {
		t.Error(err)
	}
}

// columns is how wide line shows in a terminal: a tab to the next
// multiple of eight, a rune a column.
func columns(line string) int {
	n := 0
	for _, r := range line {
		if r == '\t' {
			n += 8 - n%8
			continue
		}
		n++
	}
	return n
}
