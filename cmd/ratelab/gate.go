package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/internal/gate"
	"github.com/ratelab/ratelab/results"
)

const gateUsage = `Usage:

	ratelab gate --base REF [flags]
	ratelab gate --base-bin OLD --new-bin NEW [flags]

Gate is the regression gate for time. It builds two ratelabs, the base
(the commit, branch or tag REF, checked out into a temporary worktree)
and the new one (the working tree, as it is), and times both in this one
run on this one machine: each runs as a worker (ratelab worker), and the
gate takes their samples in turns, one of each build a round, AB or BA
(half the rounds each way, at random), each after a sample of its own
build not kept (--warm: a worker that sat idle while the other ran finds
its data out of the cache), every one of ratelab's six limiters on every
workload, round after round. Each round's ratio of the new build's sample
to the base's is one paired measurement, taken in one spell of the
machine; over the rounds, each metric (time per decision, p50 and p90 of
its time over stretches of 256 decisions) gets the Hodges-Lehmann
estimate of the ratio and its confidence interval from Wilcoxon's
signed-rank test. A metric regressed when its whole interval lies above
1 + --threshold: slower beyond the threshold, with that confidence. The
cells with a metric that regressed are then timed again, by fresh
workers, in rounds of another seed; a regression stands when the same
metric of the same cell regresses again. A spell of a shared machine
passes so; a build slower by its code is slower again.

With --baseline, it also runs the new build's quick lab in simulated time
and for memory, and compares it with that committed baseline, as ratelab
compare does: accuracy exactly, allocations per decision and bytes per
user within their tolerances. Those do not depend on the machine; times
do, and are never compared with figures from elsewhere.

A base that cannot be built (not in this clone's history, a shallow
clone, a build that fails, a build too old to have a worker) fails the
gate, saying why, unless --no-base-ok, which then gates the committed
figures alone and says so. CI must not set it.

Exit status 0 when nothing regressed, 1 when something did, 2 for bad
flags, a base that cannot be built or a baseline that cannot be read.
It writes ab.json (every sample, for ratelab gate --judge), ab-again.json
(the samples timed again, if any), lab/ (the quick lab's results) and
gate.txt (what it printed) into --out.

Examples:

	ratelab gate --base main
	ratelab gate --base v1.4.0 --baseline results/baseline.json
	ratelab gate --base-bin ./ratelab-old --new-bin ./ratelab-new --workloads many-users
	ratelab gate --judge out/gate/ab.json --threshold 0.05

Flags:
`

func runGate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	f := gateFlags{plan: gate.Plan{Seed: 1}, rule: gate.DefaultRule}
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), gateUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	if f.judge != "" {
		return judgeAgain(f.judge, f.rule, f.all, stdout)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	var log strings.Builder
	w := io.MultiWriter(stdout, &log)
	// The whole output is kept, and the error that ended the run, if any.
	defer func() {
		if err != nil {
			fmt.Fprintf(&log, "ratelab: %v\n", err)
		}
		results.WriteAtomic(filepath.Join(f.out, "gate.txt"), []byte(log.String()))
	}()
	step := func(string) {}
	if isTerminal(stderr) {
		step = func(what string) { fmt.Fprint(stderr, "\r\033[Kgate: ", what, "…") }
		defer fmt.Fprint(stderr, "\r\033[K")
	}
	return f.run(ctx, w, step)
}

// gateFlags are gate's flags.
type gateFlags struct {
	base, baseBin, newBin, pkg, baseline, judge, out string
	limiters, workloads                              string
	noBaseOK, quick, all                             bool
	plan                                             gate.Plan
	rule                                             gate.Rule
}

func (f *gateFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.base, "base", "", "the git commit, branch or tag to time the working tree against")
	fs.StringVar(&f.baseBin, "base-bin", "", "a built ratelab to use as the base, in place of building --base")
	fs.StringVar(&f.newBin, "new-bin", "", "a built ratelab to use as the new build, in place of building the working tree")
	fs.StringVar(&f.pkg, "pkg", "./cmd/ratelab", "the package of the ratelab command, built in each tree")
	fs.StringVar(&f.baseline, "baseline", "", "also compare the new build's quick lab with this committed baseline (accuracy, allocations, memory)")
	fs.BoolVar(&f.noBaseOK, "no-base-ok", false, "when the base cannot be built, gate only the committed figures, saying so, instead of failing (CI must not set this)")
	fs.StringVar(&f.judge, "judge", "", "judge the samples of an earlier gate's ab.json again, with this run's --threshold and --confidence, instead of timing")
	fs.StringVar(&f.out, "out", "out/gate", "the folder results go to")
	fs.IntVar(&f.plan.Rounds, "rounds", 30, "rounds each limiter is timed in on each workload")
	fs.DurationVar(&f.plan.Sample, "sample", 10*time.Millisecond, "how long each kept sample lasts")
	fs.DurationVar(&f.plan.Warm, "warm", 10*time.Millisecond, "how long the sample of the same build before each kept one lasts, not kept")
	fs.Uint64Var(&f.plan.Seed, "order-seed", 1, "the seed of the order of each round's samples")
	fs.Float64Var(&f.rule.Threshold, "threshold", f.rule.Threshold, "how much slower a metric may be, as a fraction, before the whole of its interval above it is a regression")
	fs.Float64Var(&f.rule.Confidence, "confidence", f.rule.Confidence, "the confidence of each metric's interval")
	fs.StringVar(&f.limiters, "limiters", "", "comma-separated limiters to time (default ratelab's six)")
	fs.StringVar(&f.workloads, "workloads", "", "comma-separated workloads (default all four)")
	fs.BoolVar(&f.quick, "quick", true, "the quick lab's workloads (100,000 users on many-users); --quick=false for the full lab's (1,000,000)")
	fs.BoolVar(&f.all, "all", false, "list every metric, not only those beyond the threshold")
}

// check checks the flags of fs together and completes the plan.
func (f *gateFlags) check(fs *flag.FlagSet) error {
	bad := func(err error) error { return badUsage(fs, err) }
	if fs.NArg() > 0 {
		return bad(fmt.Errorf("gate: no arguments, got %q", fs.Arg(0)))
	}
	if err := f.rule.Validate(); err != nil {
		return bad(fmt.Errorf("gate: %w", err))
	}
	if f.judge != "" {
		return nil
	}
	switch {
	case given(fs)["base"] && f.base == "":
		return bad(errors.New("gate: --base is empty (make gate reads it from results/gate-base: is the file there?)"))
	case f.base == "" && f.baseBin == "":
		return bad(errors.New("gate: want --base REF or --base-bin FILE"))
	case f.base != "" && f.baseBin != "":
		return bad(errors.New("gate: --base and --base-bin each name the base: give one"))
	}
	if err := f.plan.Validate(); err != nil {
		return bad(err)
	}
	f.plan.Limiters, f.plan.Workloads = list(f.limiters), list(f.workloads)
	f.plan.WorkerArgs = []string{"--quick=" + strconv.FormatBool(f.quick)}
	if f.baseline != "" {
		if _, err := results.ReadFile(f.baseline); err != nil {
			return usageError{fmt.Errorf("gate: the baseline: %w", err)}
		}
	}
	return nil
}

// run builds the two builds, compares the new one's quick lab with the
// baseline if any, times both A/B, and judges the timings, writing to w
// and saying each step.
func (f *gateFlags) run(ctx context.Context, w io.Writer, step func(string)) error {
	builds, err := gate.Pair{BaseRef: f.base, BaseBin: f.baseBin, NewBin: f.newBin, Pkg: f.pkg}.Make(ctx, filepath.Join(f.out, "bin"), step)
	if err != nil {
		return err
	}
	failed := 0
	if f.baseline != "" { // the committed figures, which do not depend on the machine
		step("the new build's quick lab, in simulated time and for memory")
		n, err := committed(ctx, builds.NewBin, f.baseline, filepath.Join(f.out, "lab"), f.all, w)
		if err != nil {
			return err
		}
		failed += n
		fmt.Fprintln(w)
	}
	ab, err := builds.Time(ctx, f.plan, step)
	switch {
	case errors.Is(err, gate.ErrNoBase):
		return f.noBase(w, err, failed)
	case err != nil:
		return err
	}
	if err := writeAB(filepath.Join(f.out, "ab.json"), ab); err != nil {
		return err
	}
	changes, err := gate.Judge(ab, f.rule)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "== Timings: both builds in this one run, A/B ==")
	if err := gate.WriteJudged(w, ab, f.rule, changes, f.all); err != nil {
		return err
	}
	samples := filepath.Join(f.out, "ab.json")
	if n := gate.ABRegressions(changes); n > 0 {
		if changes, err = f.again(ctx, builds.Time, changes, w, step); err != nil {
			return err
		}
		samples += " and " + filepath.Join(f.out, "ab-again.json")
	}
	return verdict(w, failed+gate.ABRegressions(changes), samples)
}

// again times the cells that regressed once more, by fresh workers in
// rounds of another seed, writes what it found to w and ab-again.json,
// and returns the regressions that showed again: those alone fail the
// gate.
func (f *gateFlags) again(ctx context.Context, timeAB func(context.Context, gate.Plan, func(string)) (*gate.AB, error), changes []gate.ABChange, w io.Writer, step func(string)) ([]gate.ABChange, error) {
	plan := gate.Again(f.plan, changes)
	step(fmt.Sprintf("timing again what regressed: %s on %s", strings.Join(plan.Limiters, ", "), strings.Join(plan.Workloads, ", ")))
	ab, err := timeAB(ctx, plan, step)
	if err != nil {
		return nil, err
	}
	if err := writeAB(filepath.Join(f.out, "ab-again.json"), ab); err != nil {
		return nil, err
	}
	again, err := gate.Judge(ab, f.rule)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Timed again: the cells that regressed, by fresh workers, in rounds of another seed ==")
	fmt.Fprintf(w, "%d cells in %v, %d rounds each.\n", len(ab.Cells), ab.Meta.Elapsed.Duration().Round(time.Second), ab.Meta.Rounds)
	if err := gate.WriteVerdicts(w, f.rule, again, f.all); err != nil {
		return nil, err
	}
	confirmed := gate.Confirmed(changes, again)
	fmt.Fprintln(w, results.Wrap(fmt.Sprintf("A regression stands when it shows again: %d of %d did.", len(confirmed), gate.ABRegressions(changes)), 100))
	return confirmed, nil
}

// noBase says that the base could not be built (err), and passes the gate
// on the committed figures alone (failed of them regressed) if
// --no-base-ok allows it.
func (f *gateFlags) noBase(w io.Writer, err error, failed int) error {
	fmt.Fprintln(w, results.Wrap(fmt.Sprintf("Timings NOT COMPARED: %v.", err), 100))
	switch {
	case !f.noBaseOK:
		return usageError{fmt.Errorf("gate: no base to time against, so no timing was gated (--no-base-ok gates the committed figures alone)")}
	case f.baseline == "":
		return usageError{fmt.Errorf("gate: no base to time against and no --baseline: nothing to gate")}
	}
	fmt.Fprintln(w, "--no-base-ok: the gate passes on the committed figures alone; no timing was gated.")
	return verdict(w, failed, "")
}

// verdict says whether the gate passed, and fails it when failed metrics
// regressed; samples is where the timings' samples are, if any.
func verdict(w io.Writer, failed int, samples string) error {
	if failed == 0 {
		if samples != "" {
			fmt.Fprintln(w, "\nThe gate passed.")
		}
		return nil
	}
	if samples != "" {
		fmt.Fprintf(w, "\nThe gate FAILED: %s regressed. Samples: %s\n", metrics(failed), samples)
	}
	return regressionError{"gate", failed}
}

// committedLab is the lab whose figures are committed: what make baseline
// runs.
var committedLab = []string{"bench", "--quick", "--modes", "simulated,memory", "--redis=false"}

// committed runs newBin's quick lab in simulated time and for memory into
// dir and compares it with the baseline, writing the comparison to w. It
// returns how many metrics regressed.
func committed(ctx context.Context, newBin, baseline, dir string, all bool, w io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, newBin, append(committedLab, "--out", dir)...)
	outText, err := cmd.CombinedOutput()
	if werr := results.WriteAtomic(dir+".txt", outText); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return 0, fmt.Errorf("gate: the new build's lab: %v: %s", err, strings.TrimSpace(lastLines(string(outText), 5)))
	}
	old, err := results.ReadFile(baseline)
	if err != nil {
		return 0, usageError{fmt.Errorf("gate: the baseline: %w", err)}
	}
	cur, err := results.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return 0, fmt.Errorf("gate: the new build's lab: %w", err)
	}
	c, err := results.Compare(old, cur, results.DefaultTolerance, modes().Results())
	if err != nil {
		return 0, usageError{fmt.Errorf("gate: the committed baseline %s and the new build's lab: %w", baseline, err)}
	}
	fmt.Fprintln(w, "== Committed figures: the new build's quick lab against", baseline, "==")
	if err := c.Write(w, all); err != nil {
		return 0, err
	}
	return c.Regressions(), nil
}

// judgeAgain judges a saved ab.json with rule.
func judgeAgain(path string, rule gate.Rule, all bool, stdout io.Writer) error {
	in, err := os.Open(path)
	if err != nil {
		return usageError{fmt.Errorf("gate: %w", err)}
	}
	defer in.Close()
	ab, err := gate.ReadAB(in)
	if err != nil {
		return usageError{fmt.Errorf("gate: %s: %w", path, err)}
	}
	changes, err := gate.Judge(ab, rule)
	if err != nil {
		return err
	}
	if err := gate.WriteJudged(stdout, ab, rule, changes, all); err != nil {
		return err
	}
	if n := gate.ABRegressions(changes); n > 0 {
		return regressionError{"gate", n}
	}
	return nil
}

func writeAB(path string, ab *gate.AB) error {
	var b strings.Builder
	if err := gate.WriteAB(&b, ab); err != nil {
		return err
	}
	return results.WriteAtomic(path, []byte(b.String()))
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
