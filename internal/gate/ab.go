package gate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/ratelab/ratelab/results"
)

// ABSchema is the version of the A/B format this package writes and reads.
// Version 2 keeps one sample of each build a round, each taken after a
// sample of the same build that is not kept.
const ABSchema = 2

// AB is an A/B timing run of the regression gate: two builds of ratelab,
// the base and the new, timed on one machine in the same run, their
// samples taken in turns. Only a ratio of the two builds' timings on the
// same machine is read from it, never a timing alone.
type AB struct {
	// Kind is "ab", telling the file from a lab's results.
	Kind   string `json:"kind"`
	Schema int    `json:"schema"`
	Meta   ABMeta `json:"meta"`
	Cells  []Cell `json:"cells"`
}

// ABMeta says what was compared, where, and how.
type ABMeta struct {
	Base       Build           `json:"base"`
	New        Build           `json:"new"`
	CPU        string          `json:"cpu"`
	Cores      int             `json:"cores"`
	GOMAXPROCS int             `json:"gomaxprocs"`
	Start      time.Time       `json:"start"`
	Elapsed    results.Seconds `json:"elapsed_s"`
	// Rounds is how many rounds each cell was timed in, after one not
	// kept (it makes the limiters and fills them with keys); Sample how
	// long each kept sample lasted, and Warm how long the one before it,
	// not kept, of the same build.
	Rounds int             `json:"rounds"`
	Sample results.Seconds `json:"sample_s"`
	Warm   results.Seconds `json:"warm_s"`
	// Seed drew the order of each round's samples.
	Seed uint64 `json:"seed"`
	// WorkerArgs are the flags both builds' workers were given: the
	// workloads' parameters.
	WorkerArgs []string `json:"worker_args"`
	// Unpaired are the limiters and workloads one build times and the
	// other does not, with which: not compared.
	Unpaired []string `json:"unpaired,omitempty"`
}

// Build is one of the two builds.
type Build struct {
	// Label is what it was asked for as: a git ref, or a binary's path.
	Label string `json:"label"`
	// Commit is the commit it was built from, when known; "+" after it
	// says the tree had changes not committed.
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"go_version"`
}

// Cell is one limiter on one workload, timed in both builds.
type Cell struct {
	Limiter  string    `json:"limiter"`
	Workload string    `json:"workload"`
	Rounds   []ABRound `json:"rounds"`
}

// ABRound is one round of a cell: a sample of each build, taken one after
// the other in the order Order says, A being the base and B the new ("AB"
// or "BA"), each after a sample of its own build not kept. Half the rounds
// of a cell go each way.
type ABRound struct {
	Order string         `json:"order"`
	Base  results.Sample `json:"base"`
	New   results.Sample `json:"new"`
}

// ReadAB reads an A/B file written by WriteAB, refusing another version.
func ReadAB(r io.Reader) (*AB, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var v struct {
		Kind   string `json:"kind"`
		Schema *int   `json:"schema"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, results.Decode(data, &AB{}) // the same error, saying where
	}
	switch {
	case v.Kind != "ab" || v.Schema == nil:
		return nil, fmt.Errorf("%w (kind %q)", ErrNotAB, v.Kind)
	case *v.Schema != ABSchema:
		return nil, fmt.Errorf("%w: the A/B file is version %d, this ratelab reads %d", results.ErrSchema, *v.Schema, ABSchema)
	}
	var f AB
	if err := results.Decode(data, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// WriteAB writes f as indented JSON.
func WriteAB(w io.Writer, f *AB) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// Rule is how the gate judges an A/B run. For each cell and metric, each
// round gives the ratio of the new build's sample to the base's: the new
// build's cost in units of the base's, in the same moment. The estimate is the Hodges-Lehmann median of the ratios'
// logarithms, and the interval its distribution-free confidence interval
// from Wilcoxon's signed-rank test. A metric regressed when the whole
// interval lies above 1 + Threshold (the new build slower by more than the
// threshold, with that confidence), improved when it lies below
// 1/(1 + Threshold).
//
// The order of each round's samples is drawn at random, half the rounds
// each way, and each kept sample follows one of its own build: for two
// builds of one tree each round's ratio is then as likely above 1 as
// below, the signed-rank test's assumption, met by design. (A sample just
// after the other build has run starts with its data out of the cache:
// on many-users, 19% slower on time per decision and 32% on p90 for the
// first 10ms, measured; hence the sample not kept.)
type Rule struct {
	Threshold  float64
	Confidence float64
}

// DefaultRule is the gate's rule (README, "The regression gate").
var DefaultRule = Rule{Threshold: 0.10, Confidence: 0.95}

// Validate reports whether r can judge.
func (r Rule) Validate() error {
	if !(r.Threshold >= 0 && r.Threshold <= 10) {
		return fmt.Errorf("results: the threshold must be a fraction from 0 to 10 (0.1 is 10%%), got %v", r.Threshold)
	}
	if !(r.Confidence >= 0.5 && r.Confidence < 1) {
		return fmt.Errorf("results: the confidence must be at least 0.5 and below 1, got %v", r.Confidence)
	}
	return nil
}

// Verdicts of the A/B gate beside Regressed and Improved: Slower and
// Faster when the interval is clear of 1 but not of the threshold, Same
// when it holds 1.
const (
	Slower = "slower, within threshold"
	Faster = "faster, within threshold"
	Same   = "no change found"
)

// ABChange is the verdict on one metric of one cell.
type ABChange struct {
	Limiter, Workload, Metric string
	// Ratio is the estimate of the new build's figure over the base's,
	// and [Lo, Hi] its confidence interval.
	Ratio, Lo, Hi float64
	// Rounds is how many rounds it is over.
	Rounds  int
	Verdict string
}

// The metrics the A/B gate judges, from each round's pair of samples: the
// mean time of a decision, and the median and 90th percentile of the time
// of one over stretches of consecutive decisions. The mean is the
// sampler's CPU time where both samples have it, else wall time: a
// sample whose process waited for a core (a busy host: 10ms samples
// against the scheduler's slices of a few ms) is charged for the wait in
// wall time, and the gate failed an unchanged tree by 1.22x on
// many-users beside a busy loop per core. The quantiles, of stretches of
// 256 decisions, are met by such a wait in few stretches.
var abMetrics = []struct {
	name string
	of   func(base, new results.Sample) (float64, float64)
}{
	{"time/decision", func(b, n results.Sample) (float64, float64) {
		if b.CPUNS > 0 && n.CPUNS > 0 {
			return b.CPUNS, n.CPUNS
		}
		return 1 / b.ThroughputPerS, 1 / n.ThroughputPerS
	}},
	{"p50", func(b, n results.Sample) (float64, float64) { return b.P50NS, n.P50NS }},
	{"p90", func(b, n results.Sample) (float64, float64) { return b.P90NS, n.P90NS }},
}

// Judge judges every metric of every cell of f by r, regressions first,
// then the rest by how far they moved.
func Judge(f *AB, r Rule) ([]ABChange, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var out []ABChange
	for _, c := range f.Cells {
		for _, m := range abMetrics {
			var logs []float64
			for _, x := range c.Rounds {
				b, n := m.of(x.Base, x.New)
				if valid(b, false) && valid(n, false) {
					logs = append(logs, math.Log(n/b))
				}
			}
			ch := ABChange{Limiter: c.Limiter, Workload: c.Workload, Metric: m.name, Rounds: len(logs)}
			if len(logs) == 0 {
				ch.Verdict = results.Regressed // timed in the base, not in the new: the gate cannot pass it
				ch.Ratio, ch.Lo, ch.Hi = math.NaN(), math.NaN(), math.NaN()
				out = append(out, ch)
				continue
			}
			est, lo, hi := hodgesLehmann(logs, r.Confidence)
			ch.Ratio, ch.Lo, ch.Hi = math.Exp(est), math.Exp(lo), math.Exp(hi)
			limit := math.Log1p(r.Threshold)
			switch {
			case lo > limit:
				ch.Verdict = results.Regressed
			case hi < -limit:
				ch.Verdict = results.Improved
			case lo > 0:
				ch.Verdict = Slower
			case hi < 0:
				ch.Verdict = Faster
			default:
				ch.Verdict = Same
			}
			out = append(out, ch)
		}
	}
	rank := func(v string) int {
		return slices.Index([]string{results.Regressed, results.Improved, Slower, Faster, Same}, v)
	}
	slices.SortStableFunc(out, func(a, b ABChange) int {
		return cmp.Or(cmp.Compare(rank(a.Verdict), rank(b.Verdict)), cmp.Compare(math.Abs(math.Log(b.Ratio)), math.Abs(math.Log(a.Ratio))))
	})
	return out, nil
}

// hodgesLehmann returns the Hodges-Lehmann estimate of the centre of x
// (the median of its Walsh averages, (x[i]+x[j])/2 for i <= j) and the
// confidence interval at level conf that inverts Wilcoxon's signed-rank
// test: from the k-th smallest Walsh average to the k-th largest, k the
// largest for which the test's null distribution puts at most (1-conf)/2
// below k. With too few values for that level, the interval is all of
// them.
func hodgesLehmann(x []float64, conf float64) (est, lo, hi float64) {
	n := len(x)
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range x {
		for j := i; j < n; j++ {
			walsh = append(walsh, (x[i]+x[j])/2)
		}
	}
	slices.Sort(walsh)
	m := len(walsh)
	if m%2 == 1 {
		est = walsh[m/2]
	} else {
		est = (walsh[m/2-1] + walsh[m/2]) / 2
	}
	cdf := signedRankCDF(n)
	alpha := (1 - conf) / 2
	k := 0 // P(T <= k-1) <= alpha
	for k < len(cdf) && cdf[k] <= alpha {
		k++
	}
	if k == 0 {
		return est, walsh[0], walsh[m-1]
	}
	return est, walsh[k-1], walsh[m-k]
}

// signedRankCDFs caches signedRankCDF by n.
var signedRankCDFs sync.Map

// signedRankCDF returns P(T <= t) for t = 0, 1, ..., n(n+1)/2, T the
// Wilcoxon signed-rank statistic of n values under the null hypothesis
// (each rank's sign a fair coin): exact, by adding one rank at a time.
func signedRankCDF(n int) []float64 {
	if v, ok := signedRankCDFs.Load(n); ok {
		return v.([]float64)
	}
	m := n * (n + 1) / 2
	p := make([]float64, m+1)
	p[0] = 1
	top := 0
	for r := 1; r <= n; r++ {
		top += r
		for s := top; s >= 0; s-- {
			v := p[s]
			if s >= r {
				v += p[s-r]
			}
			p[s] = v / 2
		}
	}
	for s := 1; s <= m; s++ {
		p[s] += p[s-1]
	}
	signedRankCDFs.Store(n, p)
	return p
}

// ABRegressions counts the changes that fail the gate.
func ABRegressions(changes []ABChange) int {
	n := 0
	for _, c := range changes {
		if c.Verdict == results.Regressed {
			n++
		}
	}
	return n
}

// WriteJudged writes the verdicts on f for a terminal: what was compared, a
// table of the metrics that moved beyond the threshold (every metric
// when all), and a summary.
func WriteJudged(w io.Writer, f *AB, r Rule, changes []ABChange, all bool) error {
	m := f.Meta
	fmt.Fprintf(w, "BASE: %s\nNEW:  %s\n", m.Base.describe(), m.New.describe())
	if strings.HasSuffix(m.New.Commit, "+") {
		fmt.Fprintln(w, "      (+: with changes not committed)")
	}
	fmt.Fprintln(w, results.Wrap(fmt.Sprintf("Timed in one run on %s, %d cores, in %v: %d rounds a cell, each a sample of %v of each build in turns, AB or BA "+
		"(half each way, at random), each after one of %v of its own build not kept.",
		m.CPU, m.Cores, m.Elapsed.Duration().Round(time.Second), m.Rounds, m.Sample.Duration(), m.Warm.Duration()), 100))
	fmt.Fprintln(w, results.Wrap(fmt.Sprintf("Rule: the ratio NEW/BASE of each round's samples; its Hodges-Lehmann estimate and %.0f%% signed-rank interval; "+
		"REGRESSED when the whole interval is above %.2f, improved when below %.2f. time/decision is the worker's CPU time a decision where both builds read it "+
		"(a wait for a core on a busy host is not charged to a build), p50 and p90 the wall time of stretches of 256 decisions.", 100*r.Confidence, 1+r.Threshold, 1/(1+r.Threshold)), 100))
	if m.Base.GoVersion != m.New.GoVersion {
		fmt.Fprintln(w, results.Wrap(fmt.Sprintf("Warning: the builds' Go versions differ (BASE %s, NEW %s): a compiler's change shows as ratelab's.", m.Base.GoVersion, m.New.GoVersion), 100))
	}
	for _, u := range m.Unpaired {
		fmt.Fprintln(w, results.Wrap("Not compared: "+u+".", 100))
	}
	return WriteVerdicts(w, r, changes, all)
}

// WriteVerdicts writes the table and the summary of WriteJudged alone:
// for rounds timed again, whose builds and rule were said.
func WriteVerdicts(w io.Writer, r Rule, changes []ABChange, all bool) error {
	tally := map[string]int{}
	var rows [][]string
	for _, c := range changes {
		tally[c.Verdict]++
		if all || c.Verdict == results.Regressed || c.Verdict == results.Improved {
			rows = append(rows, []string{c.Limiter, c.Workload, c.Metric, ratioText(c.Ratio), fmt.Sprintf("%s – %s", ratioText(c.Lo), ratioText(c.Hi)), c.Verdict})
		}
	}
	fmt.Fprintln(w)
	if len(rows) > 0 {
		align := []tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
		tb := tablewriter.NewTable(w, tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{Formatting: tw.CellFormatting{AutoFormat: tw.Off}},
			Row:    tw.CellConfig{Alignment: tw.CellAlignment{PerColumn: align}},
		}))
		tb.Header([]string{"limiter", "workload", "metric", "new/base", fmt.Sprintf("%.0f%% interval", 100*r.Confidence), "verdict"})
		if err := tb.Bulk(rows); err != nil {
			return err
		}
		if err := tb.Render(); err != nil {
			return err
		}
	}
	var widest ABChange
	for _, c := range changes {
		if c.Verdict != results.Regressed && c.Verdict != results.Improved && (widest.Metric == "" || math.Abs(math.Log(c.Ratio)) > math.Abs(math.Log(widest.Ratio))) {
			widest = c
		}
	}
	summary := fmt.Sprintf("%d regressed, %d improved, %d slower and %d faster within the threshold, %d with no change found",
		tally[results.Regressed], tally[results.Improved], tally[Slower], tally[Faster], tally[Same])
	if widest.Metric != "" {
		summary += fmt.Sprintf("; the largest move within the threshold: %s on %s, %s %s (%s – %s)", widest.Limiter, widest.Workload, widest.Metric,
			ratioText(widest.Ratio), ratioText(widest.Lo), ratioText(widest.Hi))
	}
	fmt.Fprintln(w, results.Wrap(summary+".", 100))
	if n := ABRegressions(changes); n > 0 {
		_, err := fmt.Fprintf(w, "REGRESSED: %d timing%s slower beyond the threshold.\n", n, plural(n))
		return err
	}
	_, err := fmt.Fprintln(w, "No timing regression.")
	return err
}

// describe says what b is: its label, and the commit it was built from
// when the label does not say it already.
func (b Build) describe() string {
	s := b.Label
	switch {
	case b.Commit == "":
	case strings.HasPrefix(b.Label, strings.TrimSuffix(b.Commit, "+")):
		s = b.Commit // a commit id: the short one says as much
	default:
		s += " at " + b.Commit
	}
	return s + ", " + b.GoVersion
}

// ratioText formats a ratio as "1.23×".
func ratioText(v float64) string {
	if math.IsNaN(v) {
		return "missing"
	}
	return fmt.Sprintf("%.3f×", v)
}

// ErrNotAB reports a file that is not an A/B file.
var ErrNotAB = errors.New("results: not an A/B file")

// valid reports whether v is a measurement: positive (or zero, when zero
// is allowed) and finite.
func valid(v float64, zeroOK bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (v > 0 || zeroOK && v == 0)
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
