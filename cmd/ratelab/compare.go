package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ratelab/ratelab/results"
)

const compareUsage = `Usage:

	ratelab compare [flags] OLD.json NEW.json

Compare is the regression gate: it compares a run of the lab (NEW) with a
baseline (OLD) and prints every gated metric that moved beyond its
tolerance, with the verdict. Exit status 0 when nothing regressed, 1 when
something did, 2 when the files cannot be compared (unreadable, another
schema version, other parameters, runs that do not match up).

What it compares, and how:

	accuracy         in simulated time, exactly: the numbers are a pure
	                 function of the seed and the code, so any change is a
	                 regression until the baseline is refreshed on purpose
	allocations      per decision in steady state, within 5% or 0.001
	memory           bytes per user, within 2% or 2 bytes
	time             each of ratelab's limiters' cost against the harness
	                 floor sampled just before and after it in the same
	                 run (time per decision, p50 and p90), within 40%; the
	                 peers' costs are shown with --all, not gated

Time is never compared as an absolute: on a shared machine the same code
runs 1.6 times as fast one second as the next, and the floor's samples
around a limiter's slow down with it. The tolerances are what twelve runs
of one tree on a 2-core VM moved by, with a margin (README, "The
regression gate").

Examples:

	ratelab compare results/baseline.json out/gate/results.json
	ratelab compare --all old.json new.json

Flags:
`

func runCompare(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	tol := results.DefaultTolerance
	all := fs.Bool("all", false, "list every metric compared that moved, within noise too")
	fs.Float64Var(&tol.Time, "time-tolerance", tol.Time, "how much a cost against the floor may grow, as a fraction")
	fs.Float64Var(&tol.Memory, "memory-tolerance", tol.Memory, "how much bytes per user may grow, as a fraction (or by 2 bytes)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), compareUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.SetOutput(stderr)
		fs.Usage()
		return usagef("compare: want two files, OLD.json and NEW.json, got %d", fs.NArg())
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--time-tolerance", tol.Time}, {"--memory-tolerance", tol.Memory}} {
		if !(f.v >= 0 && f.v <= 10) {
			return usagef("compare: %s must be a fraction from 0 to 10 (0.4 is 40%%), got %v", f.name, f.v)
		}
	}
	base, err := results.ReadFile(fs.Arg(0))
	if err != nil {
		return usageError{fmt.Errorf("compare: OLD: %w", err)}
	}
	cur, err := results.ReadFile(fs.Arg(1))
	if err != nil {
		return usageError{fmt.Errorf("compare: NEW: %w", err)}
	}
	c, err := results.Compare(base, cur, tol)
	var mis *results.MismatchError
	switch {
	case errors.As(err, &mis):
		return usageError{fmt.Errorf("compare: %s and %s: %w", fs.Arg(0), fs.Arg(1), err)}
	case err != nil:
		return fmt.Errorf("compare: %w", err)
	}
	if err := c.Write(stdout, *all); err != nil {
		return err
	}
	if n := c.Regressions(); n > 0 {
		return regressionError{n}
	}
	return nil
}

// regressionError is a gate that failed: exit status 1, the table having
// said what regressed.
type regressionError struct{ n int }

func (e regressionError) Error() string {
	if e.n == 1 {
		return "compare: 1 metric regressed"
	}
	return fmt.Sprintf("compare: %d metrics regressed", e.n)
}
