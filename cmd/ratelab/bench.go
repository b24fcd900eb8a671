package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/plots"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// benchUsage is bench's help; %s is the modes, from results.Modes.
const benchUsage = `Usage:

	ratelab bench [flags]

Bench is the lab: it drives every limiter, ratelab's six algorithms and the
peers (x/time/rate, go-limiter, throttled), through the same workloads and
measures each in every mode (--modes names some; the default is all of
them, --quick all but the outage runs):

%s
The Redis rows are ratelab's six algorithms kept in Redis, "gcra (redis)"
and so on, GCRA again with batching ("gcra (redis batched)") and with its
users packed into hashes ("gcra (redis packed)"), and go-redis/redis_rate
(a GCRA on Redis), on the server at
--redis-url (or $REDIS_ADDR). Each of their decisions is a round trip to
the server, so they run on less: their accuracy on a sample of each
workload (and decision for decision against the same algorithm in
memory), shorter real-time runs paced at 1,000 a second, and the server's
memory per key at fewer keys; they are not timed, and ratelab compare
leaves them out. Their keys are under a prefix of the run's own, removed
when done. Without a server the lab runs the rest and says the Redis rows
were skipped, and why; --redis=false leaves them out.

The fleet mode runs GCRA on Redis as a fleet: four processes, each with a
client and a limiter of its own, sharing the server, the requests routed
to them at random or by key (sticky): "gcra fleet (plain)", one round
trip a decision; "(batched)"; "(cached)", Redis's denials remembered in
each process (exact); and "gcra fleet (lease)" and "token-bucket fleet
(lease)", which lease units of a key's quota for a tenth of the window
(approximate, within a stated bound). It measures round trips a decision
and an admission, accuracy, decisions a second and the server's CPU.

Workloads: uniform (steady, a little over the limit), bursty (on/off,
five times the limit then silence), boundary-attack (a full quota just
before and just after every window edge), anchored-attack (the same, at
the edges of windows that start at each key's first request, every other
one; measured for accuracy only), many-users (a million users,
Zipf-skewed). Every limiter is given the same limit, --limit N/PERIOD
(100/s): N per window for the window algorithms, a burst of N refilled
over the period for the buckets.

It writes results.json (the public format), tables.md and tables.txt, the
charts (charts/*.png and *.svg) and the report that ties them together
(report.html, one page that opens from disk, and report.md) into --out, and
prints the tables and which limiter to pick for which need. What a run
takes on two kinds of host is in README.md (make bench, make bench-quick).
The same --seed gives the same simulated runs, byte for byte.

Examples:

	ratelab bench --quick
	ratelab bench --limiters gcra,go-limiter --workloads boundary-attack --modes simulated

Flags:
`

func runBench(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var f benchFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), benchUsage, modeList())
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c, err := f.labConfig(fs)
	if err != nil {
		return err
	}
	if f.out == "" {
		f.out = "out"
		if c.Quick {
			f.out = filepath.Join("out", "quick")
		}
	}
	if c.Redis.URL != "" {
		redis.SetLogger(quietRedis{}) // a server that does not answer is said once, in the results
	}
	progress, stop := labProgress(stderr)
	res, err := harness.Lab(ctx, c, progress)
	stop()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	paths, err := report.WriteDir(f.out, res, modes())
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := printLab(stdout, res, paths); err != nil {
		return err
	}
	// Last, so that a report that cannot be drawn loses nothing else.
	if _, err := plots.WriteReport(f.out, res, modes(), paths[0]); err != nil {
		return fmt.Errorf("bench: the results are saved, but not the report: %w", err)
	}
	fmt.Fprintln(stdout, reportLine(f.out))
	return nil
}

// benchFlags are bench's flags: the lab's settings (harness.Config.Flags,
// each mode's declared in its file), and what bench adds.
type benchFlags struct {
	c                            harness.Config
	trace, config, redisURL, out string
	redis                        bool
}

func (f *benchFlags) define(fs *flag.FlagSet) {
	f.c.Flags(fs)
	seedFlag(fs, &f.c)
	fs.StringVar(&f.trace, "trace", "", "also run this trace (a t,key[,n] CSV, as for replay) as workload \"trace\"")
	fs.StringVar(&f.config, "config", "", "also run the limiter this configuration file describes (its tiers; users not listed are in its default tier), as limiter \"config\"")
	fs.StringVar(&f.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "the Redis server of the Redis rows, as redis://[user:password@]host:port/db; $REDIS_ADDR (host:port), when set, before the default")
	fs.BoolVar(&f.redis, "redis", true, "run the Redis rows (ratelab's algorithms on Redis, and go-redis/redis_rate); --redis=false leaves them out")
	fs.StringVar(&f.out, "out", "", "the folder results go to (default out, and out/quick with --quick: a quick run leaves the full one's)")
}

// labConfig is the lab's configuration the flags of fs give, checked, with
// the trace and the configuration file they name read.
func (f *benchFlags) labConfig(fs *flag.FlagSet) (harness.Config, error) {
	c, set := f.c, given(fs)
	if fs.NArg() > 0 {
		return c, badUsage(fs, fmt.Errorf("bench: no arguments, got %q", fs.Arg(0)))
	}
	switch addr := os.Getenv("REDIS_ADDR"); {
	case !f.redis && set["redis-url"]:
		return c, usagef("bench: --redis-url is for the Redis rows, which --redis=false leaves out")
	case !f.redis:
	case set["redis-url"] || addr == "":
		c.Redis.URL = f.redisURL
	default:
		c.Redis.URL = "redis://" + addr + "/0"
	}
	if err := c.Defaults().Validate(); err != nil {
		return c, usageError{fmt.Errorf("bench: %w", err)}
	}
	var err error
	if f.trace != "" {
		if c.Trace, err = readTrace(f.trace); err != nil {
			return c, usageError{fmt.Errorf("bench: %w", err)}
		}
	}
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return c, usageError{fmt.Errorf("bench: %w", err)}
		}
		c.Extra = append(c.Extra, harness.TiersSubject("config", cfg.Tiers))
	}
	return c, nil
}

// readTrace reads the trace at path as a workload.
func readTrace(path string) (*workloads.Workload, error) {
	in, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	w, err := workloads.FromTrace(workloads.NewTraceReader(in))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case len(w.Arrivals) == 0:
		return nil, fmt.Errorf("%s has no requests", path)
	}
	return w, nil
}

// printLab prints what the lab found: its tables, what it skipped, which
// limiter to pick for which need, and where it saved the results (paths).
func printLab(stdout io.Writer, f *results.File, paths []string) error {
	fmt.Fprintf(stdout, "%s\n\n", results.Wrap(report.MetaLine(f), 100))
	for _, t := range report.Tables(f, modes()) {
		if err := t.Text(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	if s := report.SimulationSpeed(f); s != "" {
		fmt.Fprintln(stdout, s)
	}
	for _, s := range report.Skipped(f) {
		fmt.Fprintln(stdout, strings.ReplaceAll(results.Wrap("Skipped: "+s, 100), "\n", "\n  "))
	}
	if err := report.WritePicks(stdout, f, modes()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nThe lab took %v. Results: %s\n", f.Meta.Elapsed.Duration().Round(time.Second), strings.Join(paths, ", "))
	return nil
}

// list splits a comma-separated flag, dropping blanks.
func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// isTerminal reports whether f, a command's standard input, output or
// error, is a terminal (or another device).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// seedFlag defines --seed on fs, the seed of c's workloads: 1 unless
// given.
func seedFlag(fs *flag.FlagSet, c *harness.Config) {
	fs.Uint64Var(&c.Seed, "seed", 1, "the seed of every workload")
}

// modeNames are the lab's modes, in the order it runs them.
func modeNames() []string {
	var out []string
	for _, m := range harness.Modes() {
		out = append(out, m.Name)
	}
	return out
}

// modeList is the lab's modes, a name and what it measures a line, for
// bench's help.
func modeList() string {
	var b strings.Builder
	for _, m := range harness.Modes() {
		about := strings.ReplaceAll(results.Wrap(m.About, 58), "\n", "\n\t            ")
		fmt.Fprintf(&b, "\t%-11s %s\n", m.Name, about)
	}
	return b.String()
}
