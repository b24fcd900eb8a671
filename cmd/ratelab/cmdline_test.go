package main

import (
	"strings"
	"testing"
)

// A bad command line is said in one line, then where the help is: the
// usage, some ninety lines, would bury it.
func TestBadCommandLine(t *testing.T) {
	type row struct {
		args []string
		says string // the first line, after "ratelab COMMAND: "
	}
	rows := []row{
		{[]string{"compare", "--tolerance", "x", "a.json", "b.json"}, "flag provided but not defined: -tolerance"},
		{[]string{"compare", "--memory-tolerance", "x", "a.json", "b.json"}, `invalid value "x" for flag -memory-tolerance: parse error`},
		{[]string{"compare", "--memory-tolerance", "-1", "a.json", "b.json"}, "--memory-tolerance must be a fraction from 0 to 10 (0.02 is 2%), got -1"},
		{[]string{"compare", "a.json"}, "want two files, OLD.json and NEW.json, got 1"},
		{[]string{"report"}, "want one RESULTS.json, got 0 arguments"},
		{[]string{"report", "a.json", "b.json", "c.json"}, "want one RESULTS.json, got 3 arguments"},
		{[]string{"report", "--out"}, "flag needs an argument: -out"},
		{[]string{"merge", "--out", "m.json"}, "want --out FILE and at least one RUN.json"},
		{[]string{"bench", "--quick", "extra"}, `no arguments, got "extra"`},
		{[]string{"replay", "--algo", "gcra", "a.csv", "b.csv"}, "one trace at most, got 2"},
		{[]string{"replay", "--algo", "magic"}, `--algo: limiters: invalid parameter: unknown algorithm "magic" (want one of fixed-window, sliding-log, sliding-counter, token-bucket, leaky-bucket, gcra)`},
		{[]string{"demo", "--color", "sometimes"}, `--color must be auto, always or never, got "sometimes"`},
		{[]string{"gate", "--base", "main", "extra"}, `no arguments, got "extra"`},
		{[]string{"worker", "extra"}, `no arguments, got "extra"`},
	}
	for _, c := range commands() {
		rows = append(rows, row{[]string{c.name, "--nope"}, "flag provided but not defined: -nope"})
	}
	for _, tt := range rows {
		stdout, stderr, code := ratelab(t, "", tt.args...)
		want := "ratelab " + tt.args[0] + ": " + tt.says + "\nsee 'ratelab " + tt.args[0] + " --help'\n"
		if code != 2 || stdout != "" || stderr != want {
			t.Errorf("ratelab %s: exit %d, stdout %q, stderr\n%s\nwant 2, nothing, and\n%s", strings.Join(tt.args, " "), code, stdout, stderr, want)
		}
	}
}

// --help and -h show the whole usage, on standard output, and succeed.
func TestHelp(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			stdout, stderr, code := ratelab(t, "", args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage:\n\n\tratelab "+c.name) || !strings.Contains(stdout, "Flags:\n") {
				t.Errorf("ratelab %s: exit %d, stderr %q, stdout %.60q...; want 0, nothing, the usage", strings.Join(args, " "), code, stderr, stdout)
			}
		}
	}
}
