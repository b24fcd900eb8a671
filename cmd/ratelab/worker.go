package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/gate"
)

const workerUsage = `Usage:

	ratelab worker [flags]

Worker is what ratelab gate runs in each of the two builds it compares:
it times one decision of ratelab's limiters in memory, one sample at a
time, on request. It says hello (a JSON line: the protocol's version and
what it can time), then reads one JSON request a line on standard input,
{"limiter":"gcra","workload":"uniform","sample_ns":10000000}, and answers
each with one line, {"sample":{...}} or {"error":"..."}, until its input
ends. The flags say what the workloads are; both builds are given the
same.

Flags:
`

func runWorker(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var c harness.Config
	c.Flags(fs)
	seedFlag(fs, &c)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), workerUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badUsage(fs, fmt.Errorf("worker: no arguments, got %q", fs.Arg(0)))
	}
	s, err := harness.NewSampler(c)
	if err != nil {
		return usageError{fmt.Errorf("worker: %w", err)}
	}
	defer s.Close()
	if err := gate.Serve(ctx, s, stdin, stdout); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}
