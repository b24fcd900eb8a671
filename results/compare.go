package results

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Tolerance is how far a metric that does not depend on the machine may
// move between two runs of the same tree before compare calls it a change.
// Timings are not among them: two runs' timings are from different moments,
// and often from different machines, so compare shows them and does not
// gate them; ratelab gate times the two builds in one run (package gate).
type Tolerance struct {
	// Memory is how much memory per user may grow, as a fraction, or by
	// MemoryBytes, whichever is more.
	Memory, MemoryBytes float64
	// Allocs is how much allocations per decision may grow, as a
	// fraction, or by AllocsPerDecision, whichever is more.
	Allocs, AllocsPerDecision float64
}

// DefaultTolerance is compare's tolerance (README, "The regression gate").
// Memory per user moved by up to 1.04 bytes of 34 over twelve runs of one
// tree (the table's growth depends on the process's hash seed): 2 bytes is
// 6-10% of a ratelab limiter's, below the 8 of one more field. Allocations
// per decision are 0 on every workload but many-users, where keys are made
// again and the count moved by up to 0.00027 (0.2% of the sliding log's
// 0.13): 0.001 or 5%.
var DefaultTolerance = Tolerance{Memory: 0.02, MemoryBytes: 2, Allocs: 0.05, AllocsPerDecision: 0.001}

// Verdicts of the gate on one metric.
const (
	Regressed   = "REGRESSED"
	Improved    = "improved"
	WithinNoise = "within noise"
	Unchanged   = "unchanged"
	NotGated    = "not gated"
)

// Change is one metric of one limiter on one workload, in two runs.
type Change struct {
	Limiter, Workload, Metric string
	Old, New                  string
	// Delta is the change, formatted: "+12.3%", "+1.00", "+2,000".
	Delta   string
	Verdict string
	// size is how far the metric moved, for ordering: a ratio's log, a
	// count's difference.
	size float64
}

// Comparison is what the gate found between an old run and a new one.
type Comparison struct {
	Old, New  *File
	Tolerance Tolerance
	Changes   []Change
	// Floor is what the harness floor, the time yardstick, did: its
	// decisions per second in the new run over the old, by workload.
	Floor map[string]float64
	// Warnings say what differs between the two runs' machines and
	// toolchains.
	Warnings []string
	// Outside counts the runs of NEW left out because their limiter is
	// kept in a server (Run.Outside).
	Outside int
}

// Regressions counts the changes that fail the gate.
func (c *Comparison) Regressions() int {
	n := 0
	for _, ch := range c.Changes {
		if ch.Verdict == Regressed {
			n++
		}
	}
	return n
}

// MismatchError says why two runs cannot be compared: their parameters
// differ, one has runs the other lacks or skipped, or one has a run twice.
type MismatchError struct {
	Params           []string
	OnlyOld, OnlyNew []string
	// Skipped are runs one file has and the other skipped, with why.
	Skipped []string
	// Twice are runs a file has more than once.
	Twice []string
}

func (e *MismatchError) Error() string {
	var parts []string
	if len(e.Params) > 0 {
		parts = append(parts, "their parameters differ: "+strings.Join(e.Params, "; "))
	}
	list := func(what string, runs []string) {
		if len(runs) == 0 {
			return
		}
		shown := runs[:min(len(runs), 8)]
		more := ""
		if len(runs) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(runs)-len(shown))
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", what, strings.Join(shown, ", "), more))
	}
	list("only OLD has", e.OnlyOld)
	list("only NEW has", e.OnlyNew)
	list("skipped:", e.Skipped)
	list("twice:", e.Twice)
	return "results: the runs do not match up: " + strings.Join(parts, "; ") +
		" (compare runs of the same lab; after changing what it runs, refresh the baseline)"
}

// key identifies a gated run in a file.
type key struct{ limiter, workload, mode string }

func (k key) String() string { return fmt.Sprintf("%s on %s (%s)", k.limiter, k.workload, k.mode) }

// gated returns the runs the gate compares, by key (simulated accuracy,
// every accuracy run's allocations, memory, and timing), the keys in the
// file's order, the keys it has more than once, and why it skipped what it
// skipped, by limiter and workload. Runs of limiters kept in a server
// (Run.Outside) are not gated, run or skipped: the gate must pass the
// same with the server and without it.
func gated(f *File) (runs map[key]Run, order, twice []key, skipped map[[2]string]string) {
	runs, skipped = map[key]Run{}, map[[2]string]string{}
	for _, r := range f.Runs {
		if r.Outside() {
			continue
		}
		if r.SkippedBecause != "" {
			skipped[[2]string{r.Limiter, r.Workload}] = r.SkippedBecause
			continue
		}
		if r.Accuracy != nil || r.Mode == "memory" || r.Mode == "timing" {
			k := key{r.Limiter, r.Workload, r.Mode}
			if _, dup := runs[k]; dup {
				twice = append(twice, k)
				continue
			}
			order = append(order, k)
			runs[k] = r
		}
	}
	return runs, order, twice, skipped
}

// Compare compares cur, a new run, with base, the baseline, under tol. It
// returns a *MismatchError when the two are not runs of the same lab.
func Compare(base, cur *File, tol Tolerance) (*Comparison, error) {
	if err := sameLab(base, cur); err != nil {
		return nil, err
	}
	om, order, otwice, oskip := gated(base)
	nm, newOrder, ntwice, nskip := gated(cur)
	mis := &MismatchError{}
	only := func(k key, other map[[2]string]string, which string, list *[]string) {
		if why, ok := other[[2]string{k.limiter, k.workload}]; ok {
			mis.Skipped = append(mis.Skipped, fmt.Sprintf("%s skipped %s: %s", which, k, why))
			return
		}
		*list = append(*list, k.String())
	}
	for _, k := range order {
		if _, ok := nm[k]; !ok {
			only(k, nskip, "NEW", &mis.OnlyOld)
		}
	}
	for _, k := range newOrder {
		if _, ok := om[k]; !ok {
			only(k, oskip, "OLD", &mis.OnlyNew)
		}
	}
	for _, k := range otwice {
		mis.Twice = append(mis.Twice, "OLD has "+k.String())
	}
	for _, k := range ntwice {
		mis.Twice = append(mis.Twice, "NEW has "+k.String())
	}
	if len(mis.OnlyOld)+len(mis.OnlyNew)+len(mis.Skipped)+len(mis.Twice) > 0 {
		return nil, mis
	}

	c := &Comparison{Old: base, New: cur, Tolerance: tol, Floor: map[string]float64{}, Warnings: machineDiffers(base, cur)}
	for _, r := range cur.Runs {
		if r.Outside() && r.SkippedBecause == "" {
			c.Outside++
		}
	}
	for _, k := range order {
		o, n := om[k], nm[k]
		switch {
		case o.Accuracy != nil:
			c.accuracy(k, o, n)
		case k.mode == "memory":
			c.memory(k, o, n)
		case k.mode == "timing":
			c.timing(k, o, n)
		}
	}
	slices.SortStableFunc(c.Changes, func(a, b Change) int {
		rank := func(v string) int {
			return slices.Index([]string{Regressed, Improved, WithinNoise, NotGated, Unchanged}, v)
		}
		return cmp.Or(cmp.Compare(rank(a.Verdict), rank(b.Verdict)), cmp.Compare(math.Abs(b.size), math.Abs(a.size)))
	})
	return c, nil
}

// machineDiffers lists what differs between the machines two runs were
// made on.
func machineDiffers(base, cur *File) []string {
	var out []string
	o, n := base.Meta, cur.Meta
	if o.CPU != n.CPU || o.Cores != n.Cores || o.GOMAXPROCS != n.GOMAXPROCS {
		out = append(out, fmt.Sprintf("the machines differ (OLD: %s, %d cores, GOMAXPROCS %d; NEW: %s, %d cores, GOMAXPROCS %d): their timings say nothing of each other",
			o.CPU, o.Cores, o.GOMAXPROCS, n.CPU, n.Cores, n.GOMAXPROCS))
	}
	if o.GoVersion != n.GoVersion {
		out = append(out, fmt.Sprintf("the Go versions differ (OLD %s, NEW %s): a compiler's change shows as ratelab's", o.GoVersion, n.GoVersion))
	}
	return out
}

// sameLab reports, as a *MismatchError, parameters of the two runs that
// make their numbers incomparable.
func sameLab(base, cur *File) error {
	o, n := base.Meta.Params, cur.Meta.Params
	var diff []string
	check := func(name string, a, b any) {
		if a != b {
			diff = append(diff, fmt.Sprintf("%s %v in OLD, %v in NEW", name, a, b))
		}
	}
	check("seed", base.Meta.Seed, cur.Meta.Seed)
	check("quick", o.Quick, n.Quick)
	check("limit", o.Limit, n.Limit)
	check("window", o.Window.Duration(), n.Window.Duration())
	check("users", o.Users, n.Users)
	check("attackers", o.Attackers, n.Attackers)
	check("many users", o.ManyUsers, n.ManyUsers)
	check("simulated time", o.Simulated.Duration(), n.Simulated.Duration())
	check("real-time accuracy scale", o.RealTimeAccuracyScale, n.RealTimeAccuracyScale)
	if len(diff) > 0 {
		return &MismatchError{Params: diff}
	}
	return nil
}

func (c *Comparison) add(k key, metric, was, is, delta, verdict string, size float64) {
	c.Changes = append(c.Changes, Change{Limiter: k.limiter, Workload: k.workload, Metric: metric, Old: was, New: is, Delta: delta, Verdict: verdict, size: size})
}

// missing records a measurement OLD has and NEW lacks (or has as zero,
// negative or NaN): the lab broke, or the limiter did, and either way the
// gate cannot pass it.
func (c *Comparison) missing(k key, metric, was string) {
	c.add(k, metric, was, "missing", "", Regressed, math.Inf(1))
}

// valid reports whether v is a measurement: positive (or zero, when zero
// is allowed) and finite.
func valid(v float64, zeroOK bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (v > 0 || zeroOK && v == 0)
}

// accuracy compares an accuracy run: in simulated time exactly, any change
// a regression (the numbers are a pure function of the seed and the code);
// in real time not at all, the clock being real. Allocations either way.
func (c *Comparison) accuracy(k key, o, n Run) {
	oa, na := o.Accuracy, n.Accuracy
	exact := k.mode == "simulated"
	counts := []struct {
		name     string
		old, new int64
	}{
		{"requests", o.Decisions, n.Decisions},
		{"admitted", oa.Admitted, na.Admitted},
		{"false allows", oa.FalseAllow, na.FalseAllow},
		{"false denies", oa.FalseDeny, na.FalseDeny},
	}
	for _, m := range counts {
		verdict := Unchanged
		switch {
		case m.old != m.new && exact:
			verdict = Regressed
		case m.old != m.new:
			verdict = NotGated
		}
		if verdict != Unchanged {
			c.add(k, m.name, count(m.old), count(m.new), signed(count(m.new-m.old), m.new-m.old), verdict, float64(m.new-m.old))
		}
	}
	if oa.MaxWindowRatio != na.MaxWindowRatio {
		verdict := NotGated
		if exact {
			verdict = Regressed
		}
		c.add(k, "most in any W", ratio2(oa.MaxWindowRatio), ratio2(na.MaxWindowRatio),
			fmt.Sprintf("%+.4f", na.MaxWindowRatio-oa.MaxWindowRatio), verdict, na.MaxWindowRatio-oa.MaxWindowRatio)
	}
	if o.AllocsPerDecision == nil {
		return
	}
	ov := *o.AllocsPerDecision
	if n.AllocsPerDecision == nil || !valid(*n.AllocsPerDecision, true) {
		c.missing(k, "allocs/decision", strconv.FormatFloat(ov, 'f', 4, 64))
		return
	}
	nv := *n.AllocsPerDecision
	d := nv - ov
	allowed := max(c.Tolerance.Allocs*ov, c.Tolerance.AllocsPerDecision)
	verdict := WithinNoise
	switch {
	case d == 0:
		return
	case d > allowed:
		verdict = Regressed
	case -d > allowed:
		verdict = Improved
	}
	c.add(k, "allocs/decision", strconv.FormatFloat(ov, 'f', 4, 64), strconv.FormatFloat(nv, 'f', 4, 64), fmt.Sprintf("%+.4f", d), verdict, d)
}

// memory compares bytes per user.
func (c *Comparison) memory(k key, o, n Run) {
	ov, nv := o.BytesPerUser, n.BytesPerUser
	switch {
	case !valid(ov, false):
		return
	case !valid(nv, false):
		c.missing(k, "bytes/user", strconv.FormatFloat(ov, 'f', 1, 64))
		return
	case ov == nv:
		return
	}
	allowed := max(c.Tolerance.Memory*ov, c.Tolerance.MemoryBytes)
	verdict := WithinNoise
	switch {
	case nv-ov > allowed:
		verdict = Regressed
	case ov-nv > allowed:
		verdict = Improved
	}
	c.add(k, "bytes/user", strconv.FormatFloat(ov, 'f', 1, 64), strconv.FormatFloat(nv, 'f', 1, 64), percentChange(ov, nv), verdict, math.Log(nv/ov))
}

// timing shows how a limiter's cost against the harness floor sampled
// around it moved, not gated: the two runs were made at different moments,
// and the floor cancels a machine's speed, not its kind.
func (c *Comparison) timing(k key, o, n Run) {
	if isFloor(o) {
		tput := func(x Round) float64 { return x.ThroughputPerS }
		if was, is := MedianOf(o.Rounds, tput), MedianOf(n.Rounds, tput); valid(was, false) && valid(is, false) {
			c.Floor[k.workload] = is / was
		}
		return
	}
	oc, ok := Costs(o)
	if !ok {
		return
	}
	nc, _ := Costs(n)
	for _, m := range []struct {
		name     string
		old, new float64
	}{
		{"time/decision", oc.Throughput, nc.Throughput},
		{"p50", oc.P50, nc.P50},
		{"p90", oc.P90, nc.P90},
	} {
		name := m.name + " × floor"
		switch {
		case !valid(m.old, false):
			continue
		case !valid(m.new, false):
			c.add(k, name, strconv.FormatFloat(m.old, 'f', 2, 64), "missing", "", NotGated, math.Inf(1))
			continue
		case m.new == m.old:
			continue
		}
		c.add(k, name, strconv.FormatFloat(m.old, 'f', 2, 64), strconv.FormatFloat(m.new, 'f', 2, 64), percentChange(m.old, m.new), NotGated, math.Log(m.new/m.old))
	}
}

func ratio2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// signed puts a plus before a positive formatted number.
func signed(s string, v int64) string {
	if v > 0 {
		return "+" + s
	}
	return s
}

// percentChange formats is against was as a signed percentage; a change
// that rounds to nothing is "0.0%", never "-0.0%".
func percentChange(was, is float64) string {
	if was == 0 {
		return "new"
	}
	p := 100 * (is/was - 1)
	if math.Abs(p) < 0.05 {
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", p)
}

// Write writes the comparison for a terminal: what was compared, a table
// of the changes (those within noise too when all), and the verdict.
func (c *Comparison) Write(w io.Writer, all bool) error {
	fmt.Fprintf(w, "OLD: %s, %s, %s\nNEW: %s, %s, %s\n",
		c.Old.Meta.Start.Format("2006-01-02 15:04 MST"), c.Old.Meta.CPU, c.Old.Meta.GoVersion,
		c.New.Meta.Start.Format("2006-01-02 15:04 MST"), c.New.Meta.CPU, c.New.Meta.GoVersion)
	fmt.Fprintln(w, Wrap(fmt.Sprintf("Tolerance: memory %.0f%% or %.0f bytes, allocations %.0f%% or %.3f a decision; accuracy in simulated time exact. "+
		"Timings are shown, not gated (ratelab gate times two builds in one run).",
		100*c.Tolerance.Memory, c.Tolerance.MemoryBytes, 100*c.Tolerance.Allocs, c.Tolerance.AllocsPerDecision), 100))
	for _, warn := range c.Warnings {
		fmt.Fprintln(w, Wrap("Warning: "+warn+".", 100))
	}
	if len(c.Floor) > 0 {
		var speeds []string
		for _, wl := range workloadOrder(c.New) {
			if v, ok := c.Floor[wl]; ok {
				speeds = append(speeds, fmt.Sprintf("%s %s", wl, percentChange(1, v)))
			}
		}
		fmt.Fprintf(w, "The harness floor, the yardstick, ran at NEW/OLD: %s (the machine's speed, cancelled out, not gated).\n", strings.Join(speeds, ", "))
	}
	tally := map[string]int{}
	var rows [][]string
	for _, ch := range c.Changes {
		tally[ch.Verdict]++
		if all || ch.Verdict == Regressed || ch.Verdict == Improved {
			rows = append(rows, []string{ch.Limiter, ch.Workload, ch.Metric, ch.Old, ch.New, ch.Delta, ch.Verdict})
		}
	}
	fmt.Fprintln(w)
	if len(rows) > 0 {
		align := []tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
		tb := tablewriter.NewTable(w, tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{Formatting: tw.CellFormatting{AutoFormat: tw.Off}},
			Row:    tw.CellConfig{Alignment: tw.CellAlignment{PerColumn: align}},
		}))
		tb.Header([]string{"limiter", "workload", "metric", "old", "new", "change", "verdict"})
		if err := tb.Bulk(rows); err != nil {
			return err
		}
		if err := tb.Render(); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("%d regressed, %d improved, %d within noise, %d changed but not gated", tally[Regressed], tally[Improved], tally[WithinNoise], tally[NotGated])
	fmt.Fprintln(w, Wrap(summary+".", 100))
	if c.Outside > 0 {
		fmt.Fprintln(w, Wrap(fmt.Sprintf("Not compared: NEW's %d run%s of limiters kept in Redis (a server outside the process, which the gate cannot count on being there).", c.Outside, plural(c.Outside)), 100))
	}
	if n := c.Regressions(); n > 0 {
		_, err := fmt.Fprintf(w, "REGRESSED: %d metric%s beyond tolerance.\n", n, plural(n))
		return err
	}
	_, err := fmt.Fprintln(w, "No regression.")
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// workloadOrder lists f's workloads in the order its runs have them.
func workloadOrder(f *File) []string {
	var out []string
	for _, r := range f.Runs {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}
