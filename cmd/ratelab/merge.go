package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ratelab/ratelab/results"
)

const mergeUsage = `Usage:

	ratelab merge --out FILE RUN.json...

Merge pools runs of one lab (the same tree, parameters and seed, run one
after the other) into one results file, for a regression baseline that
sits in the middle of the machine's noise rather than wherever one run
landed: the timing rounds of every run, the medians of memory per user
and of allocations per decision, and the simulated accuracy, which must
be the same in every run. make baseline pools three quick runs.

Examples:

	ratelab merge --out results/baseline.json \
	    out/baseline/1/results.json out/baseline/2/results.json out/baseline/3/results.json

Flags:
`

func runMerge(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	out := fs.String("out", "", "the file to write (required)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), mergeUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return badUsage(fs, errors.New("merge: want --out FILE and at least one RUN.json"))
	}
	files := make([]*results.File, fs.NArg())
	for i, path := range fs.Args() {
		f, err := results.ReadFile(path)
		if err != nil {
			return usageError{fmt.Errorf("merge: %w", err)}
		}
		files[i] = f
	}
	merged, err := results.Merge(modes().Results(), files...)
	if err != nil {
		return usageError{fmt.Errorf("merge: %w", err)}
	}
	if err := results.WriteFile(*out, merged); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	fmt.Fprintf(stdout, "%s: %d runs of the lab pooled\n", *out, len(files))
	return nil
}
