package results_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// checksMode is a mode of the tests' own with a gate of every check, on
// metrics of its own: the gate's rules, apart from the lab's modes.
const checksMode = "test-checks"

// checks is the mode checksMode names.
var checks = results.Mode{Name: checksMode, Order: 1000, Gates: []results.Gate{
	{Metric: "exact", Label: "exact", Check: results.CheckExact},
	{Metric: "shown", Label: "shown", Check: results.CheckShown, Digits: 2},
	{Metric: "allocs", Label: "allocs", Check: results.CheckAllocs, Digits: 4},
	{Metric: "bytes", Label: "bytes", Check: results.CheckMemory, Digits: 1, Relative: true},
	{Metric: results.Throughput, Label: "cost", Check: results.CheckCost, Digits: 2, Relative: true,
		Value: func(r results.Row) (float64, bool) {
			c, ok := results.CostOf(r)
			return c.Throughput, ok
		}},
}}

// checked is a row of the checks mode with a value for every gate: its
// cost, decisions a second against a floor ten times as fast, is 10.
func checked(limiter string, settings ...string) results.Row {
	r := timing(results.Row{Limiter: limiter, Workload: "w"}, 1000,
		[]results.Sample{{ThroughputPerS: 1e7, P50NS: 100, P90NS: 200}},
		[]results.Sample{{ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}}, []results.Sample{{ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}})
	r.Mode, r.Config = checksMode, nil
	for i := 0; i+1 < len(settings); i += 2 {
		r.Set(settings[i], settings[i+1])
	}
	r.Add("exact", results.UnitCount, 1000)
	r.Add("shown", results.UnitRatio, 0.5)
	r.Add("allocs", results.UnitAllocs, 0.1)
	r.Add("bytes", results.UnitBytes, 40)
	return r
}

// changes are c's changes, a line each: metric, old, new, change, verdict.
func changes(c *results.Comparison) []string {
	var out []string
	for _, ch := range c.Changes {
		out = append(out, strings.Join([]string{ch.Metric, ch.Old, ch.New, ch.Delta, ch.Verdict}, " | "))
	}
	return out
}

// TestGateChecks takes a row of each check from OLD to NEW: exact, any
// change regresses; shown and cost, shown and never gated, a missing one
// included; allocations and memory, against the tolerance, a missing one
// regressing; and a measurement OLD did not make, which has nothing to
// compare.
func TestGateChecks(t *testing.T) {
	for _, tt := range []struct {
		name     string
		old, new func(*results.Row)
		want     []string
	}{
		{"nothing changed", nil, nil, nil},
		{"exact, one more", nil, func(r *results.Row) { change(r, "exact", plus(1)) }, []string{"exact | 1,000 | 1,001 | +1 | REGRESSED"}},
		{"exact, one fewer", nil, func(r *results.Row) { change(r, "exact", plus(-1)) }, []string{"exact | 1,000 | 999 | -1 | REGRESSED"}},
		{"exact, missing", nil, func(r *results.Row) { drop(r, "exact") }, []string{"exact | 1,000 | missing |  | REGRESSED"}},
		{"exact, none in OLD", func(r *results.Row) { drop(r, "exact") }, nil, nil},
		{"shown, moved", nil, func(r *results.Row) { set(r, "shown", 0.75) }, []string{"shown | 0.50 | 0.75 | +0.2500 | not gated"}},
		{"shown, missing", nil, func(r *results.Row) { drop(r, "shown") }, []string{"shown | 0.50 | missing |  | not gated"}},
		{"allocs, within the 5%", nil, func(r *results.Row) { set(r, "allocs", 0.104) }, []string{"allocs | 0.1000 | 0.1040 | +0.0040 | within noise"}},
		{"allocs, beyond it", nil, func(r *results.Row) { set(r, "allocs", 0.2) }, []string{"allocs | 0.1000 | 0.2000 | +0.1000 | REGRESSED"}},
		{"allocs, fewer beyond it", nil, func(r *results.Row) { set(r, "allocs", 0) }, []string{"allocs | 0.1000 | 0.0000 | -0.1000 | improved"}},
		{"allocs from none, within 0.001", func(r *results.Row) { set(r, "allocs", 0) }, func(r *results.Row) { set(r, "allocs", 0.0005) },
			[]string{"allocs | 0.0000 | 0.0005 | +0.0005 | within noise"}},
		{"allocs from none, beyond 0.001", func(r *results.Row) { set(r, "allocs", 0) }, func(r *results.Row) { set(r, "allocs", 0.002) },
			[]string{"allocs | 0.0000 | 0.0020 | +0.0020 | REGRESSED"}},
		{"allocs, missing", nil, func(r *results.Row) { drop(r, "allocs") }, []string{"allocs | 0.1000 | missing |  | REGRESSED"}},
		{"allocs, not a number", nil, func(r *results.Row) { set(r, "allocs", -1) }, []string{"allocs | 0.1000 | missing |  | REGRESSED"}},
		{"bytes, within 2", nil, func(r *results.Row) { set(r, "bytes", 41.2) }, []string{"bytes | 40.0 | 41.2 | +3.0% | within noise"}},
		{"bytes, beyond", nil, func(r *results.Row) { set(r, "bytes", 43) }, []string{"bytes | 40.0 | 43.0 | +7.5% | REGRESSED"}},
		{"bytes, fewer beyond", nil, func(r *results.Row) { set(r, "bytes", 37) }, []string{"bytes | 40.0 | 37.0 | -7.5% | improved"}},
		{"bytes, none", nil, func(r *results.Row) { set(r, "bytes", 0) }, []string{"bytes | 40.0 | missing |  | REGRESSED"}},
		{"bytes, none in OLD", func(r *results.Row) { set(r, "bytes", 0) }, func(r *results.Row) { set(r, "bytes", 50) }, nil},
		{"cost, twice", nil, func(r *results.Row) { slowBy(r, 2, false) }, []string{"cost | 10.00 | 20.00 | +100.0% | not gated"}},
		{"cost, the machine twice as slow", nil, func(r *results.Row) { slowBy(r, 2, false); slowBy(r, 2, true) }, nil},
		{"cost, not timed", nil, func(r *results.Row) { r.Series = nil }, []string{"cost | 10.00 | missing |  | not gated"}},
		{"cost, not timed in OLD", func(r *results.Row) { r.Series = nil }, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, n := checked("gcra"), checked("gcra")
			for _, c := range []struct {
				r      *results.Row
				change func(*results.Row)
			}{{&o, tt.old}, {&n, tt.new}} {
				if c.change != nil {
					c.change(c.r)
				}
			}
			c, err := results.Compare(&results.File{Rows: []results.Row{o}}, &results.File{Rows: []results.Row{n}}, results.DefaultTolerance, gated)
			if err != nil {
				t.Fatal(err)
			}
			if got := changes(c); !slices.Equal(got, tt.want) {
				t.Errorf("changes:\n%q\nwant\n%q", got, tt.want)
			}
			if want := slices.ContainsFunc(tt.want, func(s string) bool { return strings.HasSuffix(s, results.Regressed) }); (c.Regressions() > 0) != want {
				t.Errorf("%d regressions, want some: %v", c.Regressions(), want)
			}
		})
	}
}

// The gate orders its changes: regressions first, then improvements,
// within noise, not gated; each kind the largest move first.
func TestGateOrdersChanges(t *testing.T) {
	o, n := checked("gcra"), checked("gcra")
	set(&n, "shown", 0.9)
	set(&n, "allocs", 0.102)
	set(&n, "bytes", 30)
	change(&n, "exact", plus(1))
	o2, n2 := checked("fixed-window"), checked("fixed-window")
	change(&n2, "exact", plus(5))
	c, err := results.Compare(&results.File{Rows: []results.Row{o, o2}}, &results.File{Rows: []results.Row{n, n2}}, results.DefaultTolerance, gated)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range c.Changes {
		got = append(got, ch.Limiter+" "+ch.Metric+" "+ch.Verdict)
	}
	want := []string{"fixed-window exact REGRESSED", "gcra exact REGRESSED", "gcra bytes improved", "gcra allocs within noise", "gcra shown not gated"}
	if !slices.Equal(got, want) {
		t.Errorf("changes in order %q, want %q", got, want)
	}
}

// A row's identity is its mode, workload, limiter and settings: two rows
// that differ in a setting alone are two rows, each compared with its
// own, not one row twice.
func TestCompareKeysBySettings(t *testing.T) {
	file := func(rows ...results.Row) *results.File { return &results.File{Rows: rows} }
	a, b := checked("gcra", "charge", "a"), checked("gcra", "charge", "b", "estimate", "100")
	moved := clone(b)
	change(&moved, "exact", plus(1))

	c, err := results.Compare(file(a, b), file(clone(a), moved), results.DefaultTolerance, gated)
	if err != nil {
		t.Fatalf("two rows apart by their settings: %v", err)
	}
	if len(c.Changes) != 1 || c.Changes[0].Limiter != "gcra" || c.Changes[0].Workload != "w (charge=b, estimate=100)" || c.Changes[0].Verdict != results.Regressed {
		t.Errorf("changes %+v, want b's exact regressed, on w (charge=b, estimate=100)", c.Changes)
	}

	// Alone of its limiter on w in its mode, b needs no settings to tell
	// it apart: the change is on w.
	if c, err := results.Compare(file(b), file(moved), results.DefaultTolerance, gated); err != nil || len(c.Changes) != 1 || c.Changes[0].Workload != "w" {
		t.Errorf("b alone: %v, %+v; want its change on w", err, c)
	}

	// The same settings in another order of insertion are the same row.
	b2 := checked("gcra", "estimate", "100", "charge", "b")
	if c, err := results.Compare(file(a, b), file(a, b2), results.DefaultTolerance, gated); err != nil || len(c.Changes) != 0 {
		t.Errorf("b with its settings set the other way round: %v, %+v", err, c)
	}

	var mis *results.MismatchError
	_, err = results.Compare(file(a, b), file(a, b, clone(b)), results.DefaultTolerance, gated)
	if !errors.As(err, &mis) || !slices.Equal(mis.Twice, []string{"NEW has gcra on w (test-checks, charge=b, estimate=100)"}) {
		t.Errorf("b twice in NEW: %v", err)
	}

	_, err = results.Compare(file(a, b), file(a, checked("gcra", "charge", "c")), results.DefaultTolerance, gated)
	if !errors.As(err, &mis) || !slices.Equal(mis.OnlyOld, []string{"gcra on w (test-checks, charge=b, estimate=100)"}) ||
		!slices.Equal(mis.OnlyNew, []string{"gcra on w (test-checks, charge=c)"}) {
		t.Errorf("b's setting changed: %v", err)
	}

	// A mode that measures once has no workload.
	once := checked("gcra")
	once.Workload = ""
	_, err = results.Compare(file(), file(once), results.DefaultTolerance, gated)
	if !errors.As(err, &mis) || !slices.Equal(mis.OnlyNew, []string{"gcra (test-checks)"}) {
		t.Errorf("a row with no workload: %v", err)
	}
}

// The real-time mode's gates are those of accuracy: its throughput and
// latency rows, which count decisions like every row but measure no
// accuracy, are not compared, nor pooled, and its floor is not the
// yardstick (the timing floor is).
func TestCompareLeavesRealTimeRowsOut(t *testing.T) {
	lab := func(decisions int64, tput float64) *results.File {
		q := results.Quantiles{P50: tput / 1e6, P90: 2, P99: 3, P999: 4, Max: 5}
		return &results.File{Rows: []results.Row{
			realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 2, 0, decisions, q, tput),
			realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 1, 1000, decisions, q, tput),
			realTime(floor("", "uniform"), 2, 0, decisions, q, tput),
			with(accuracy(measured("realtime", "uniform", "go-limiter", goLimiter, "fixed-window"), decisions, results.Accuracy{Admitted: decisions / 2, MaxWindowRatio: 1.5}),
				results.TimeScale, results.UnitRatio, 0.25),
		}}
	}
	old, new := lab(1000, 1e7), lab(2000, 2e7)
	c, err := results.Compare(old, new, results.DefaultTolerance, gated)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range c.Changes {
		got = append(got, fmt.Sprintf("%s %s %s %s", ch.Limiter, ch.Workload, ch.Metric, ch.Verdict))
	}
	want := []string{"go-limiter uniform requests not gated", "go-limiter uniform admitted not gated"}
	if !slices.Equal(got, want) || len(c.Floor) != 0 {
		t.Errorf("changes %q and floor %v, want %q and none", got, c.Floor, want)
	}
	m, err := results.Merge(gated, old, new)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range m.Rows[:3] {
		if r.Get(results.Decisions) != 1000 {
			t.Errorf("merged real-time row %d: %v decisions, want the first file's 1000", i, r.Get(results.Decisions))
		}
	}
}
