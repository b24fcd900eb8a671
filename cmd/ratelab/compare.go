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

Compare compares a run of the lab (NEW) with a baseline (OLD) on what does
not depend on the machine, and prints every metric that moved beyond its
tolerance, with the verdict: the committed half of the regression gate
(ratelab gate --baseline runs it). Exit status 0 when nothing regressed,
1 when something did, 2 when the files cannot be compared (unreadable,
another schema version, other parameters, runs that do not match up).

What it compares, and how:

	accuracy         in simulated time, exactly: the numbers are a pure
	                 function of the seed and the code, so any change is a
	                 regression until the baseline is refreshed on purpose
	allocations      per decision in steady state, within 5% or 0.001
	memory           bytes per user, within 2% or 2 bytes

Timings are shown with --all, never gated: two runs of the lab are made
at different moments, often on different machines, and a timing from one
says little of the other. ratelab gate times the two builds in one run.

Examples:

	ratelab compare results/baseline.json out/gate/lab/results.json
	ratelab compare --all old.json new.json

Flags:
`

func runCompare(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	tol := results.DefaultTolerance
	all := fs.Bool("all", false, "list every metric compared that moved, within noise too")
	fs.Float64Var(&tol.Memory, "memory-tolerance", tol.Memory, "how much bytes per user may grow, as a fraction (or by 2 bytes)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), compareUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return badUsage(fs, fmt.Errorf("compare: want two files, OLD.json and NEW.json, got %d", fs.NArg()))
	}
	if !(tol.Memory >= 0 && tol.Memory <= 10) {
		return badUsage(fs, fmt.Errorf("compare: --memory-tolerance must be a fraction from 0 to 10 (0.02 is 2%%), got %v", tol.Memory))
	}
	c, err := compareFiles(fs.Arg(0), fs.Arg(1), tol)
	var mis *results.MismatchError
	switch {
	case errors.As(err, &mis), errors.Is(err, results.ErrNothingGated):
		return usageError{fmt.Errorf("compare: %s and %s: %w", fs.Arg(0), fs.Arg(1), err)}
	case errors.As(err, new(usageError)):
		return err
	case err != nil:
		return fmt.Errorf("compare: %w", err)
	}
	if err := c.Write(stdout, *all); err != nil {
		return err
	}
	if n := c.Regressions(); n > 0 {
		return regressionError{"compare", n}
	}
	return nil
}

// compareFiles compares the results files at old and cur.
func compareFiles(old, cur string, tol results.Tolerance) (*results.Comparison, error) {
	base, err := results.ReadFile(old)
	if err != nil {
		return nil, usageError{fmt.Errorf("compare: OLD: %w", err)}
	}
	now, err := results.ReadFile(cur)
	if err != nil {
		return nil, usageError{fmt.Errorf("compare: NEW: %w", err)}
	}
	return results.Compare(base, now, tol, modes().Results())
}

// regressionError is a gate that failed: exit status 1, the table having
// said what regressed.
type regressionError struct {
	command string
	n       int
}

func (e regressionError) Error() string { return e.command + ": " + metrics(e.n) + " regressed" }

// metrics says "1 metric" or "n metrics".
func metrics(n int) string {
	if n == 1 {
		return "1 metric"
	}
	return fmt.Sprintf("%d metrics", n)
}
