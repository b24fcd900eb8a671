package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/plots"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// What a plan reads and what it leaves: the logs it opens, where its
// results go, how far it has read, and its tables, file and report.

// openLogs gives the logs named (standard input for none or -) as the
// plan's inputs: each file is opened when the merge by time comes to it
// (a fleet's thousand files are not all open at once), after a check
// here that each can be.
func openLogs(names []string, stdin io.Reader) ([]accesslog.Input, error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	var inputs []accesslog.Input
	for _, n := range names {
		if n == "-" {
			inputs = append(inputs, accesslog.Input{Name: "standard input", R: stdin})
			continue
		}
		f, err := os.Open(n)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		f.Close()
		if err == nil && st.IsDir() {
			err = fmt.Errorf("%s is a directory: name its files (%s/*)", n, strings.TrimSuffix(n, "/"))
		}
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, accesslog.Input{Name: n, Open: func() (io.ReadCloser, error) { return os.Open(n) }})
	}
	return inputs, nil
}

// logName names the log of a plan in a few words, as the tables and the
// report's title say it: its file's name, two or three files' names, or
// how many files and from which sources ("576 files from 10.0.1.10 and
// 10.0.1.11").
func logName(inputs []accesslog.Input, sources []accesslog.Source) string {
	var names []string
	for _, in := range inputs {
		names = append(names, filepath.Base(in.Name))
	}
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	files := fmt.Sprintf("%d files", len(names))
	var of []string
	for _, s := range sources {
		of = append(of, s.Name)
	}
	switch {
	case len(sources) < 2:
		return files
	case len(sources) <= 3:
		return files + " from " + strings.Join(of[:len(of)-1], ", ") + " and " + of[len(of)-1]
	}
	return fmt.Sprintf("%s from %d sources", files, len(sources))
}

// planOut is where a plan of logs goes unless --out says: out/plan-NAME,
// NAME the first log's name without its extension (access.log.gz:
// access), so that plans of other logs, and make plan's out/plan, stay.
func planOut(logs []string) string {
	if len(logs) == 0 || logs[0] == "-" {
		return filepath.Join("out", "plan-stdin")
	}
	name := filepath.Base(logs[0])
	for _, ext := range []string{".gz", ".zst", ".bz2", ".xz"} {
		name = strings.TrimSuffix(name, ext)
	}
	if n := strings.TrimSuffix(name, filepath.Ext(name)); n != "" {
		name = n
	}
	return filepath.Join("out", "plan-"+name)
}

// planProgress says how far a plan has read, every few seconds after the
// first few: on a terminal one line redrawn, elsewhere a line every
// progressInterval.
func planProgress(stderr io.Writer) plan.Progress {
	began, last := time.Now(), time.Now()
	term := isTerminal(stderr)
	every := progressInterval
	if term {
		every = time.Second
	}
	return func(lines, requests int, logTime time.Duration) {
		if time.Since(began) < 3*time.Second || time.Since(last) < every {
			return
		}
		last = time.Now()
		end := "\n"
		if term {
			end = "\x1b[K\r"
		}
		fmt.Fprintf(stderr, "plan: %5.1fs  %s lines read, %s requests, %v of the log%s",
			time.Since(began).Seconds(), results.Count(int64(lines)), results.Count(int64(requests)), logTime.Round(time.Second), end)
	}
}

// printPlan prints p's tables and writes its file and report to dir.
func printPlan(stdout io.Writer, pf *planFlags, p *plan.Plan, log string, settings map[string]string) error {
	f := p.File(log, settings)
	fmt.Fprintf(stdout, "%s\n\n", results.Wrap(p.Verdict(), 100))
	for _, tb := range report.Tables(f, plan.Modes()) {
		if err := tb.Text(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	saved, beside, err := savePlan(stdout, pf, p, f, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, results.Wrap(planSaid(p, saved, filepath.Join(pf.out, "report.html"), beside), 100))
	return nil
}

// savePlan writes the plan's results file f, its report, and what it
// writes for nginx and the library into --out (printing those --emit
// names), and returns the results file's path and what it wrote beside
// it, as the last line says it.
func savePlan(stdout io.Writer, pf *planFlags, p *plan.Plan, f *results.File, log string) (saved, beside string, err error) {
	dir := pf.out
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("plan: %w", err)
	}
	saved = filepath.Join(dir, "plan.json")
	if err := results.WriteFile(saved, f); err != nil {
		return "", "", fmt.Errorf("plan: %w", err)
	}
	if _, err := plots.WriteReport(dir, f, plan.Modes(), saved); err != nil {
		return "", "", fmt.Errorf("plan: the report: %w", err)
	}
	if tf := p.TierFile(log); tf != nil {
		tiers := filepath.Join(dir, "tiers.yaml")
		if err := os.WriteFile(tiers, tf, 0o644); err != nil {
			return "", "", fmt.Errorf("plan: %w", err)
		}
		beside = "; the bucket as ratelab serve --config: " + tiers
	}
	key, err := accesslog.ParseKey(pf.key) // checked with the flags
	if err != nil {
		return "", "", fmt.Errorf("plan: %w", err)
	}
	emitted := []struct{ name, text, emit string }{
		{"nginx.conf", p.Nginx(key, log), "nginx"},
		{"nginx-windows.conf", p.NginxWindows(key, log), "nginx"},
		{"ratelab-go.txt", p.Go(log), "ratelab"},
		{"tiers.yaml", string(p.TierFile(log)), "ratelab"},
	}
	var written []string
	for _, e := range emitted {
		if e.text == "" {
			continue
		}
		if e.name != "tiers.yaml" {
			written = append(written, e.name)
			if err := os.WriteFile(filepath.Join(dir, e.name), []byte(e.text), 0o644); err != nil {
				return "", "", fmt.Errorf("plan: %w", err)
			}
		}
		if slices.Contains(strings.Split(pf.emit, ","), e.emit) {
			fmt.Fprintf(stdout, "%s (%s)\n\n%s\n", map[string]string{"nginx": "For nginx", "ratelab": "For ratelab"}[e.emit], filepath.Join(dir, e.name), e.text)
		}
	}
	if len(written) > 0 {
		beside += "; for nginx and the library: " + strings.Join(written, ", ") + " beside it (--emit prints them)"
	}
	var made []string
	for _, prod := range p.Config.Products {
		text, err := p.ProductConfig(prod, key, log, pf.backend)
		if err != nil {
			return "", "", err
		}
		if text == "" {
			continue
		}
		path := filepath.Join(dir, prod.File())
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return "", "", fmt.Errorf("plan: %w", err)
		}
		made = append(made, prod.File())
		fmt.Fprintf(stdout, "For %s (%s)\n\n%s\n", prod.Title(), path, text)
	}
	if len(made) > 0 {
		beside += "; for the products asked: " + strings.Join(made, ", ")
	}
	return saved, beside, nil
}

// planSaid is the plan's last line: what was planned, how fast, and
// where its results and report went (saved, page), with beside.
func planSaid(p *plan.Plan, saved, page, beside string) string {
	clients := results.Count(int64(p.Clients)) + " clients"
	if p.Clients == 1 {
		clients = "1 client"
	}
	if p.Merged > 0 {
		return fmt.Sprintf("Merged %s into the plan of %s requests of %s in %.1fs (%s lines a second%s): the policy and whom it refuses, exactly; what it refuses in requests is not decided (a plan of the whole log decides it). Results: %s; the report: %s%s",
			strings.TrimPrefix(shardsOf(p.Merged), "the log in "), results.Count(int64(p.Decided)), clients, p.Took.Seconds(), results.Count(int64(float64(p.Lines)/max(p.Took.Seconds(), 1e-3))), peakRSS(), saved, page, beside)
	}
	what := "the policy alone (--limits adds a sweep)"
	if n := len(p.Config.Limits); n > 0 {
		what = fmt.Sprintf("the policy and a sweep of %d limits, %d algorithms", n, len(p.Config.Algorithms))
	}
	on := ""
	if p.Cores > 1 {
		on = fmt.Sprintf(" on %d cores", p.Cores)
	}
	held := peakRSS()
	if held != "" && p.Memory > 0 {
		held += fmt.Sprintf("; --memory %s", bytesWords(p.Memory))
	}
	took := fmt.Sprintf("%s, in %.1fs (%s lines a second%s)", on, p.Took.Seconds(), results.Count(int64(float64(p.Lines)/max(p.Took.Seconds(), 1e-3))), held)
	if p.Undecided != "" {
		return fmt.Sprintf("Planned %s requests of %s, %s%s: whom the policy refuses, exactly; what it refuses in requests is not decided: %s. Results: %s; the report: %s%s",
			results.Count(int64(p.Decided)), clients, what, took, p.Undecided, saved, page, beside)
	}
	return fmt.Sprintf("Planned %s requests of %s, %s%s. Results: %s; the report: %s%s",
		results.Count(int64(p.Decided)), clients, what, took, saved, page, beside)
}
