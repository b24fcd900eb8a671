package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ratelab/ratelab/plots"
	"github.com/ratelab/ratelab/results"
)

const reportUsage = `Usage:

	ratelab report [--out DIR] RESULTS.json

Report draws the charts of a run that ratelab bench saved, without running
it again, and writes them (PNG and SVG, in DIR/charts) with the report that
ties the run's tables and charts together: DIR/report.html, one page that
opens from disk with its charts inside it, and DIR/report.md, its Markdown
twin. DIR is the folder RESULTS.json is in, unless --out says otherwise.
ratelab bench does the same at the end of every run.

Examples:

	ratelab report out/results.json
	ratelab report --out /tmp/old-run saved/results.json

Flags:
`

func runReport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	out := fs.String("out", "", "the folder the charts and the report go to (default: the folder of RESULTS.json)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reportUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badUsage(fs, fmt.Errorf("report: want one RESULTS.json, got %d arguments", fs.NArg()))
	}
	in := fs.Arg(0)
	f, err := results.ReadFile(in)
	if err != nil {
		return usageError{fmt.Errorf("report: %w", err)}
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(in)
	}
	if _, err := plots.WriteReport(dir, f, modes(), in); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintln(stdout, reportLine(dir))
	return nil
}

// reportLine says where the report in dir is.
func reportLine(dir string) string {
	return fmt.Sprintf("Report: %s (Markdown: %s; charts in %s)",
		filepath.Join(dir, "report.html"), filepath.Join(dir, "report.md"), filepath.Join(dir, plots.ChartDir))
}
