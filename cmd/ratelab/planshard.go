package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A plan in shards: ratelab plan --shard I/N --summary FILE, then
// ratelab plan merge.

// shardFlag reads --shard: I/N, or N with I from JOB_COMPLETION_INDEX (a
// Kubernetes Indexed Job's); it and --summary go together, and --current
// decides requests, which a shard cannot.
func shardFlag(shard, summary, current string) (index, of int, err error) {
	switch {
	case shard == "":
		return 0, 0, errors.New("--summary FILE is where --shard I/N writes: give both")
	case summary == "":
		return 0, 0, errors.New("--shard I/N writes a summary: give --summary FILE")
	case current != "":
		return 0, 0, errors.New("--current decides requests over the whole log: give it to ratelab plan merge")
	}
	i, n, explicit := strings.Cut(shard, "/")
	if !explicit {
		n, i = i, os.Getenv("JOB_COMPLETION_INDEX")
		if i == "" {
			return 0, 0, fmt.Errorf("--shard %s: no index: I/N, or N with JOB_COMPLETION_INDEX set (a Kubernetes Indexed Job sets it)", shard)
		}
	}
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	of, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil || of < 1 || of > 10_000 || index < 0 || index >= of {
		return 0, 0, fmt.Errorf("--shard %s (index %q): want I/N, I from 0 to N-1, N from 1 to 10000", shard, i)
	}
	return index, of, nil
}

// writeShard sums up shard index of of and writes it to path.
func writeShard(ctx context.Context, r *accesslog.Reader, c plan.Config, index, of int, path string, stdout, stderr io.Writer) error {
	began := time.Now()
	s, err := plan.Summarize(ctx, r, c, index, of, planProgress(stderr))
	if errors.Is(err, context.Canceled) {
		return err
	}
	if err != nil {
		return usageError{err}
	}
	for _, u := range s.Unseen {
		fmt.Fprintf(stderr, "plan: %s\n", u)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	w := bufio.NewWriter(f)
	if err := s.Write(w); err != nil {
		f.Close()
		return fmt.Errorf("plan: %s: %w", path, err)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("plan: %s: %w", path, err)
	}
	took := time.Since(began)
	next := fmt.Sprintf("ratelab plan merge turns shards 0 to %d into the plan", of-1)
	if of == 1 {
		next = "ratelab plan merge " + path + " turns it into the plan"
	}
	fmt.Fprintln(stdout, results.Wrap(fmt.Sprintf("Shard %d of %d: %s keys of %s summed up from %s lines in %.1fs (%s lines a second%s): %s. %s.",
		index, of, results.Count(int64(len(s.Keys))), results.Count(int64(s.Requests)), results.Count(int64(s.Lines)), took.Seconds(),
		results.Count(int64(float64(s.Lines)/max(took.Seconds(), 1e-3))), peakRSS(), path, next), 100))
	return nil
}

const planMergeUsage = `Usage:

	ratelab plan merge [flags] SHARD...

Merge turns the summaries ratelab plan --shard I/N --summary FILE wrote,
shards 0 to N-1 of one log, into its plan: the policy, the envelope, the
frontier, the classes and the tiers of one pass over the log, exactly.
Each shard reads the whole log and sums up only its keys, so the shards
run where the log is, one a machine (docs/plan.md: a Kubernetes Indexed
Job, then the merge). A merged plan decides no request: whom the policy
refuses is exact (each key's least bursts and envelope), how many of
their requests is not said. --periods, --rates and --refused must be
the shards' own (the merge says which shard differs); the policy's
--spare, --outliers, --margin, --headroom and --no-tiers are the
merge's to choose; --key names the key in the nginx lines it writes.

Examples:

	ratelab plan --shard 0/2 --summary s0.bin access.log
	ratelab plan --shard 1/2 --summary s1.bin access.log
	ratelab plan merge --emit nginx s0.bin s1.bin

Flags:
`

// runPlanMerge merges shards into a plan and prints it as plan does.
func runPlanMerge(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan merge", flag.ContinueOnError)
	var f planFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), planMergeUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c, _, err := f.check()
	switch {
	case err != nil:
		return badUsage(fs, fmt.Errorf("plan merge: %w", err))
	case len(c.Limits) > 0:
		return badUsage(fs, errors.New("plan merge: --limits: a sweep decides every request, which a merge of summaries cannot; plan the whole log for one"))
	case c.Current != nil:
		return badUsage(fs, errors.New("plan merge: --current decides requests, which a merge of summaries cannot"))
	case fs.NArg() == 0:
		return badUsage(fs, errors.New("plan merge: no SHARD given: the files ratelab plan --shard I/N --summary FILE wrote"))
	}
	var shards []*plan.Shard
	for _, name := range fs.Args() {
		file, err := os.Open(name)
		if err != nil {
			return usageError{fmt.Errorf("plan merge: %w", err)}
		}
		s, err := plan.ReadShard(bufio.NewReader(file), name)
		file.Close()
		if err != nil {
			return usageError{err}
		}
		shards = append(shards, s)
	}
	p, err := plan.Merge(c, shards)
	if err != nil {
		return usageError{err}
	}
	if f.out == "" {
		f.out = filepath.Join("out", "plan-merged")
	}
	return printPlan(stdout, &f, p, shardsOf(len(shards)), f.settings(fs))
}

// coresFlag checks --cores: 2 or more, and neither a shard of the log
// planCores is how many cores a plan runs on: --cores (0: every core),
// one for a shard, which is a machine's part of the plan, and for a
// sweep, which decides every request with every limiter on every core
// in one pass.
func planCores(cores int, shard, summary string, sweep bool) (int, error) {
	switch {
	case cores < 0 || cores > 256:
		return 0, fmt.Errorf("--cores %d: want 1 to 256, or 0 for every core", cores)
	case (shard != "" || summary != "") && cores > 1:
		return 0, errors.New("--cores plans the whole log on this machine; --shard and --summary are a machine's part of it")
	case sweep && cores > 1:
		return 0, errors.New("--cores: a sweep (--limits) decides every request with every limiter, on every core, in one pass: drop --cores")
	case shard != "" || summary != "" || sweep:
		return 1, nil
	case cores == 0:
		return runtime.GOMAXPROCS(0), nil
	}
	return cores, nil
}

// shardsOf names the log of a merged plan: "the log in 3 shards".
func shardsOf(n int) string {
	if n == 1 {
		return "the log in 1 shard"
	}
	return fmt.Sprintf("the log in %d shards", n)
}
