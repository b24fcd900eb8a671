// Command ratelab is the face of the ratelab limiters and lab: it runs the
// lab (bench), gates a run against a baseline (compare, merge), draws a saved
// run's report again (report), replays traces through any limiter
// (replay), serves them over HTTP (serve) and shows them at work (demo).
//
// Run "ratelab help" for the commands and "ratelab help COMMAND" for one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is a bad command line or bad input: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode prints err, if any, and returns the exit status for it: 0 for
// none, 2 for bad usage or input, 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "ratelab:", err)
		return 2
	}
	fmt.Fprintln(stderr, "ratelab:", err)
	return 1
}

// command is one subcommand: its name, a line for the overview, and what
// runs it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"bench", "the lab: every limiter and its peers, through the same workloads", runBench},
		{"gate", "the regression gate: time two builds in one run, A/B, and judge the new", runGate},
		{"compare", "compare a run of the lab with a baseline (accuracy, allocations, memory)", runCompare},
		{"merge", "pool runs of one lab into one file, for a baseline", runMerge},
		{"report", "draw the charts and the report of a saved run again", runReport},
		{"replay", "decide a trace of requests with any limiter, one JSON line each", runReplay},
		{"serve", "an HTTP server that rate-limits requests and echoes each decision", runServe},
		{"demo", "a narrated walk through the limiters at work, in simulated time", runDemo},
		{"worker", "time decisions on request, for the gate (it runs one in each build)", runWorker},
	}
}

const overview = `ratelab: rate limiters, and the lab that measures them.

Usage:

	ratelab COMMAND [flags] [args]

Commands:

%s
Run "ratelab COMMAND --help" for a command's flags and examples.

The six algorithms: fixed-window, sliding-log, sliding-counter (limit N per
window W) and token-bucket, leaky-bucket, gcra (capacity C, rate R per
second). Each is a package documented with its formula, its memory and its
worst case: go doc github.com/ratelab/ratelab/limiters/gcra, for one.
`

func usage(w io.Writer) {
	var b strings.Builder
	for _, c := range commands() {
		fmt.Fprintf(&b, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, overview, b.String())
}

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return usagef("no command given")
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdin, stdout, stderr)
		}
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	usage(stderr)
	return usagef("unknown command %q", name)
}

// parseFlags parses args with fs, printing fs's usage to stderr on a bad
// flag (or to stdout on --help).
// given returns the names of the flags set on the command line.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// badUsage returns err as a usage error, after printing fs's usage to
// stderr.
func badUsage(fs *flag.FlagSet, stderr io.Writer, err error) error {
	fs.SetOutput(stderr)
	fs.Usage()
	return usageError{err}
}

func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return err
	case err != nil:
		fs.SetOutput(stderr)
		fs.Usage()
		return usageError{err}
	}
	return nil
}
