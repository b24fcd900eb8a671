// Command ratelab is the face of the ratelab limiters and lab: it runs the
// lab (bench), gates a run against a baseline (compare, merge), draws a saved
// run's report again (report), replays traces through any limiter
// (replay), serves them over HTTP (serve), shows them at work (demo) and
// judges a limiter behind HTTP from the outside (probe) and finds the limit
// an access log's traffic wants (plan).
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
	"time"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/probe"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The first interrupt asks the command to stop; a second, while it
	// cannot (a read of a terminal or a pipe that waits), kills it.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is bad input, or a bad command line said without pointing
// at help: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// commandLineError is a command line its command cannot run: a flag it
// does not define, a value a flag cannot take, arguments it does not
// want. Exit status 2, after one line saying what is wrong and one
// pointing at the command's help (its usage, some ninety lines, would
// bury the error).
type commandLineError struct {
	command string // whose help to point at
	err     error
}

func (e commandLineError) Error() string { return e.err.Error() }
func (e commandLineError) Unwrap() error { return e.err }

// badUsage returns err, about the command line of fs's command, as a
// commandLineError.
func badUsage(fs *flag.FlagSet, err error) error {
	return commandLineError{fs.Name(), err}
}

// exitCode prints err, if any, and returns the exit status for it: 0 for
// none, 2 for bad usage or input, 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	var bad commandLineError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		fmt.Fprintln(stderr, message(err))
		fmt.Fprintf(stderr, "see 'ratelab %s --help'\n", bad.command)
		return 2
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, message(err))
		return 2
	}
	fmt.Fprintln(stderr, message(err))
	return 1
}

// message is err as printed: "ratelab bench: ..." for an error of a
// command, which starts with the command's name, and "ratelab: ..." for
// any other.
func message(err error) string {
	msg := err.Error()
	for _, c := range commands() {
		if strings.HasPrefix(msg, c.name+": ") {
			return "ratelab " + msg
		}
	}
	return "ratelab: " + msg
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
		{"probe", "judge a rate limiter behind HTTP from the outside: what it runs, how it strays", runProbe},
		{"plan", "what limit to set: a policy from an access log (plan merge: from its shards)", runPlan},
		{"worker", "time decisions on request, for the gate (it runs one in each build)", runWorker},
	}
}

const overview = `ratelab: rate limiters, and the lab that measures them.

Usage:

	ratelab COMMAND [flags] [args]

Commands:

%s
Run "ratelab COMMAND --help" for a command's flags and examples.

The six algorithms: fixed-window, sliding-log, sliding-counter (N per
window: --limit 100/min) and token-bucket, leaky-bucket, gcra (a rate and
a burst: --limit "5/s burst 10"); every command writes a limit the same
way. Each is a package documented with its formula, its memory and its
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
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := nearest(name, names); near != "" {
		return usagef("unknown command %q: did you mean %s? (ratelab help lists the commands)", name, near)
	}
	return usagef("unknown command %q; the commands: %s (ratelab help says what each does)", name, strings.Join(names, ", "))
}

// modes are the modes the command reports on a results file with: the
// lab's, the probe's and the plan's.
func modes() report.Modes {
	return append(append(harness.Modes(), probe.Modes()...), plan.Modes()...)
}

// progressInterval is how often the lab's progress is said in a log: often
// enough to show it is not stuck, seldom enough to keep the log short.
const progressInterval = 10 * time.Second

// labProgress returns where the lab's progress goes: stderr itself on a
// terminal, one line redrawn in place; elsewhere (a file, a pipe, CI) a
// harness.ProgressLog, a line every progressInterval. stop ends it, once
// the lab is done.
func labProgress(stderr io.Writer) (progress io.Writer, stop func()) {
	if isTerminal(stderr) {
		return stderr, func() {}
	}
	log := harness.NewProgressLog(stderr, progressInterval)
	return log, func() { log.Close() }
}

// given returns the names of the flags set on the command line.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// helpWidth is the columns a command's help fits in: an ordinary
// terminal's, as the tables.
const helpWidth = 120

// printDefaults prints fs's flags as flag.PrintDefaults does, each one's
// words wrapped to fit helpWidth beside their indent (four spaces and a
// tab: eight columns).
func printDefaults(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		head := "  -" + f.Name
		if name != "" {
			head += " " + name
		}
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0" || def == "0s":
		case strings.HasSuffix(fmt.Sprintf("%T", f.Value), ".stringValue"):
			usage += fmt.Sprintf(" (default %q)", def)
		default:
			usage += fmt.Sprintf(" (default %v)", def)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", head, strings.ReplaceAll(results.Wrap(usage, helpWidth-8), "\n", "\n    \t"))
	})
}

// parseFlags parses args with fs, flags and arguments in any order, as
// people type them ("ratelab report out/results.json --out /tmp/r"); a
// "--" ends the flags. fs.Args() is then the arguments alone. --help
// prints fs's usage to stdout and returns flag.ErrHelp; a bad flag is a
// commandLineError, in the flag package's words.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package's, on every error, is not wanted
	defer func() { fs.Usage = usage }()
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(stdout)
			usage()
			return err
		case err != nil:
			return badUsage(fs, fmt.Errorf("%s: %w", fs.Name(), asTyped(goneFlag(err), args, fs)))
		}
		// Parse stops before the first argument, or just after a "--".
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// The arguments alone, after a "--", make fs.Args() those arguments.
	return fs.Parse(append([]string{"--"}, positional...))
}
