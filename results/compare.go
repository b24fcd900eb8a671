package results

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
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

// Gate is a metric of a mode's rows that compare compares between two
// runs, by a Rule, and merge pools.
type Gate struct {
	// Metric is the metric's name in the rows; Label its name in
	// compare's table.
	Metric, Label string
	Check         Check
	// Digits is how many digits after the point compare shows (0: a
	// count, with thousands separators); Relative shows a change as a
	// percentage.
	Digits   int
	Relative bool
	// Value, if set, derives the value compared from a row that has
	// Metric (a cost against the floor from a timing row's rounds).
	Value func(Row) (float64, bool)
}

// Check is how compare judges a change of a gated metric.
type Check int

const (
	// CheckExact: any change regresses; a number that is a function of the
	// seed and the code alone (accuracy in simulated time). Merge
	// refuses files that differ in it.
	CheckExact Check = iota
	// CheckShown: a change is shown, not gated (accuracy on the real clock).
	CheckShown
	// CheckAllocs and CheckMemory: a change beyond the tolerance for allocations
	// per decision, or for memory per user, regresses or improves.
	// Merge takes their median.
	CheckAllocs
	CheckMemory
	// CheckCost: a timing against the floor, shown, not gated; a missing one
	// is not a regression either.
	CheckCost
)

func (g Gate) value(r Row) (float64, bool) {
	if !r.Has(g.Metric) {
		return 0, false
	}
	if g.Value != nil {
		return g.Value(r)
	}
	return r.Value(g.Metric)
}

func (g Gate) format(v float64) string {
	if g.Digits == 0 {
		return Count(int64(v))
	}
	return strconv.FormatFloat(v, 'f', g.Digits, 64)
}

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
	// Outside counts the rows of NEW left out because their limiter is
	// kept in a server (Row.Outside).
	Outside int
	// shared are the limiter, workload and mode of the rows that share
	// them with others, told apart by their settings.
	shared map[key]bool
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

// key identifies a gated row in a file: its mode, workload, limiter and
// settings.
type key struct{ limiter, workload, mode, config string }

func keyOf(r Row) key {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(r.Config)) {
		kv = append(kv, k+"="+r.Config[k])
	}
	return key{r.Limiter, r.Workload, r.Mode, strings.Join(kv, ", ")}
}

func (k key) String() string {
	where := k.mode
	if k.config != "" {
		where += ", " + k.config
	}
	if k.workload == "" {
		return fmt.Sprintf("%s (%s)", k.limiter, where)
	}
	return fmt.Sprintf("%s on %s (%s)", k.limiter, k.workload, where)
}

// on is where a change of the row of k was measured, for the table of
// changes: its workload, and its settings when others of its limiter,
// workload and mode are gated too (the ways of charging of llm).
func (k key) on(shared bool) string {
	w := cmp.Or(k.workload, k.mode)
	if shared && k.config != "" {
		w += " (" + k.config + ")"
	}
	return w
}

// shared lists the limiter, workload and mode of keys that more than one
// key has.
func shared(keys []key) map[key]bool {
	n := map[key]int{}
	for _, k := range keys {
		k.config = ""
		n[k]++
	}
	out := map[key]bool{}
	for k, c := range n {
		if c > 1 {
			out[k] = true
		}
	}
	return out
}

// gated returns the rows the gate compares, by key (those of a mode with
// gates that have a gated metric), the keys in the file's order, the keys
// it has more than once, and why it skipped what it skipped, by limiter
// and workload (a skipped row may name no mode: the lab skips a limiter on
// a workload in every mode at once). Rows of limiters kept in a server
// (Row.Outside) are not gated, measured or skipped: the gate must pass the
// same with the server and without it.
//
// Decisions, which every row counts, does not make a row gated alone: it
// is compared in the rows another gated metric makes gated (the accuracy
// rows of the real-time mode, not its throughput and latency rows).
func gated(f *File, ms Modes) (rows map[key]Row, order, twice []key, skipped map[[2]string]string) {
	rows, skipped = map[key]Row{}, map[[2]string]string{}
	for _, r := range f.Rows {
		if r.Outside() {
			continue
		}
		if r.Skipped != "" {
			skipped[[2]string{r.Limiter, r.Workload}] = r.Skipped
			continue
		}
		if !slices.ContainsFunc(ms.gates(r.Mode), func(g Gate) bool { return g.Metric != Decisions && r.Has(g.Metric) }) {
			continue
		}
		k := keyOf(r)
		if _, dup := rows[k]; dup {
			twice = append(twice, k)
			continue
		}
		order = append(order, k)
		rows[k] = r
	}
	return rows, order, twice, skipped
}

// ErrNothingGated is two runs with no row the gate compares: of modes
// with no gates (a probe's, a plan's).
var ErrNothingGated = errors.New("nothing to compare")

// Compare compares cur, a new run, with base, the baseline, under tol. It
// returns a *MismatchError when the two are not runs of the same lab, and
// ErrNothingGated when neither has a row to compare.
func Compare(base, cur *File, tol Tolerance, ms Modes) (*Comparison, error) {
	if err := sameLab(base, cur); err != nil {
		return nil, err
	}
	om, order, otwice, oskip := gated(base, ms)
	nm, newOrder, ntwice, nskip := gated(cur, ms)
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
	if len(order) == 0 {
		// "No regression" of nothing compared would be a verdict on
		// nothing: a probe's or a plan's file, a mode with no gates.
		return nil, fmt.Errorf("results: %w: neither run has a row the gate compares (its modes: %s)", ErrNothingGated, strings.Join(modesOf(cur), ", "))
	}

	c := &Comparison{Old: base, New: cur, Tolerance: tol, Floor: map[string]float64{}, Warnings: append(machineDiffers(base, cur), settingsDiffer(base, cur)...), shared: shared(order)}
	for _, r := range cur.Rows {
		if r.Outside() && r.Skipped == "" {
			c.Outside++
		}
	}
	for _, k := range order {
		o, n := om[k], nm[k]
		if o.IsFloor() {
			if was, is := o.Get(Throughput), n.Get(Throughput); valid(was, false) && valid(is, false) {
				c.Floor[k.workload] = is / was
			}
		}
		for _, g := range ms.gates(k.mode) {
			c.gate(k, g, o, n)
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

// sameLabSettings are the settings that make two runs' numbers
// incomparable when they differ: the workloads', the limit, and the
// real-time accuracy's scale. Other
// settings that differ are said (settingsDiffer), not refused.
var sameLabSettings = []string{"quick", "limit", "users", "attackers", "many-users", "simulated", "realtime-accuracy-scale"}

// settingsDiffer lists the settings both runs record that differ, but for
// those sameLab refuses and the Redis rows' key prefix (each run's own).
func settingsDiffer(base, cur *File) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(base.Meta.Settings)) {
		o, n := base.Meta.Settings[name], cur.Meta.Settings[name]
		if _, ok := cur.Meta.Settings[name]; !ok || o == n || name == "redis-prefix" || slices.Contains(sameLabSettings, name) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s in OLD, %s in NEW", name, o, n))
	}
	if len(out) == 0 {
		return nil
	}
	return []string{"settings differ: " + strings.Join(out, "; ")}
}

// sameLab reports, as a *MismatchError, parameters of the two runs that
// make their numbers incomparable.
func sameLab(base, cur *File) error {
	var diff []string
	if base.Meta.Seed != cur.Meta.Seed {
		diff = append(diff, fmt.Sprintf("seed %d in OLD, %d in NEW", base.Meta.Seed, cur.Meta.Seed))
	}
	for _, name := range sameLabSettings {
		// A mode's setting (the real-time accuracy scale) is compared
		// where both runs ran the mode.
		if o, n := base.Meta.Setting(name), cur.Meta.Setting(name); o != n && o != "" && n != "" {
			diff = append(diff, fmt.Sprintf("%s %s in OLD, %s in NEW", name, o, n))
		}
	}
	if len(diff) > 0 {
		return &MismatchError{Params: diff}
	}
	return nil
}

func (c *Comparison) add(k key, metric, was, is, delta, verdict string, size float64) {
	bare := k
	bare.config = ""
	c.Changes = append(c.Changes, Change{Limiter: k.limiter, Workload: k.on(c.shared[bare]), Metric: metric, Old: was, New: is, Delta: delta, Verdict: verdict, size: size})
}

// valid reports whether v is a measurement: positive (or zero, when zero
// is allowed) and finite.
func valid(v float64, zeroOK bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (v > 0 || zeroOK && v == 0)
}

// gate compares one gated metric of the row of k in the two runs.
func (c *Comparison) gate(k key, g Gate, o, n Row) {
	ov, ok := g.value(o)
	if !ok || g.Check != CheckExact && g.Check != CheckShown && !valid(ov, g.Check == CheckAllocs) {
		return
	}
	nv, ok := g.value(n)
	if !ok || !valid(nv, g.Check != CheckCost && g.Check != CheckMemory) {
		verdict := Regressed
		if g.Check == CheckShown || g.Check == CheckCost {
			verdict = NotGated
		}
		c.add(k, g.Label, g.format(ov), "missing", "", verdict, math.Inf(1))
		return
	}
	if nv == ov {
		return
	}
	d := nv - ov
	verdict := NotGated
	switch g.Check {
	case CheckExact:
		verdict = Regressed
	case CheckAllocs, CheckMemory:
		allowed := max(c.Tolerance.Allocs*ov, c.Tolerance.AllocsPerDecision)
		if g.Check == CheckMemory {
			allowed = max(c.Tolerance.Memory*ov, c.Tolerance.MemoryBytes)
		}
		verdict = WithinNoise
		switch {
		case d > allowed:
			verdict = Regressed
		case -d > allowed:
			verdict = Improved
		}
	}
	delta, size := fmt.Sprintf("%+.4f", d), d
	switch {
	case g.Relative:
		delta, size = percentChange(ov, nv), math.Log(nv/ov)
	case g.Digits == 0:
		delta = signed(Count(int64(nv)-int64(ov)), int64(nv)-int64(ov))
	}
	c.add(k, g.Label, g.format(ov), g.format(nv), delta, verdict, size)
}

// modesOf is the modes of f's rows, in order, each once.
func modesOf(f *File) []string {
	var out []string
	for _, r := range f.Rows {
		if !slices.Contains(out, r.Mode) {
			out = append(out, r.Mode)
		}
	}
	return out
}
