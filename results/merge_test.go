package results_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// twin returns f's row that is the same measurement as r: the same mode,
// workload, limiter and settings.
func twin(t *testing.T, f *results.File, r results.Row) results.Row {
	t.Helper()
	i := slices.IndexFunc(f.Rows, func(o results.Row) bool {
		return o.Mode == r.Mode && o.Workload == r.Workload && o.Limiter == r.Limiter && maps.Equal(o.Config, r.Config)
	})
	if i < 0 {
		t.Fatalf("no twin of %s on %s (%s, %v)", r.Limiter, r.Workload, r.Mode, r.Config)
	}
	return f.Rows[i]
}

// edge is the picture of a window edge, a curve.
var edge = results.Series{Name: "in_window", Unit: "cost", XUnit: results.UnitSeconds, X: []float64{0.99, 1.01}, Y: []float64{100, 200}}

// curves counts the rows of f with a curve (a series with X).
func curves(f *results.File) int {
	return len(slices.DeleteFunc(slices.Clone(f.Rows), func(r results.Row) bool {
		return !slices.ContainsFunc(r.Series, func(s results.Series) bool { return len(s.X) > 0 })
	}))
}

func TestMerge(t *testing.T) {
	a, b := gateFiles(t)
	if edit(a, func(r results.Row) bool { return r.Workload == "boundary-attack" && r.Mode == "simulated" }, func(r *results.Row) { r.AddSeries(edge) }) == 0 {
		t.Fatal("the first file has no rows to picture an edge in")
	}
	m, err := results.Merge(gated, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta.Merged != 2 || len(m.Rows) != len(a.Rows) {
		t.Fatalf("merged %d files into %d rows, want 2 into %d", m.Meta.Merged, len(m.Rows), len(a.Rows))
	}
	for _, got := range m.Rows {
		x, y := twin(t, a, got), twin(t, b, got)
		switch {
		case got.Mode == "timing":
			for _, s := range x.Series {
				if want := append(slices.Clone(s.Y), y.Curve(s.Name).Y...); !slices.Equal(got.Curve(s.Name).Y, want) {
					t.Errorf("%s on %s: %s is %v, want both files' rounds in order (%d+%d)", got.Limiter, got.Workload, s.Name, got.Curve(s.Name).Y, len(s.Y), len(y.Curve(s.Name).Y))
				}
			}
			if want := x.Get(results.Decisions) + y.Get(results.Decisions); got.Get(results.Decisions) != want {
				t.Errorf("%s on %s: %v decisions, want both files' %v", got.Limiter, got.Workload, got.Get(results.Decisions), want)
			}
			if want := median(got.Curve(results.Throughput).Y); got.Get(results.Throughput) != want {
				t.Errorf("%s on %s: %v decisions a second, want the median of the rounds, %v", got.Limiter, got.Workload, got.Get(results.Throughput), want)
			}
		case got.Mode == "memory":
			if want := (x.Get(results.BytesPerUser) + y.Get(results.BytesPerUser)) / 2; got.Get(results.BytesPerUser) != want {
				t.Errorf("%s: %v bytes a user, want the median %v", got.Limiter, got.Get(results.BytesPerUser), want)
			}
		case got.Has(results.AllocsPerDecision):
			if want := (x.Get(results.AllocsPerDecision) + y.Get(results.AllocsPerDecision)) / 2; got.Get(results.AllocsPerDecision) != want {
				t.Errorf("%s on %s (%s): %v allocations, want the median %v", got.Limiter, got.Workload, got.Mode, got.Get(results.AllocsPerDecision), want)
			}
		}
	}
	if n := curves(m); n != 0 {
		t.Errorf("%d rows keep their curves", n)
	}
	// Merging leaves its inputs as they were.
	a2, _ := gateFiles(t)
	if i := slices.IndexFunc(a.Rows, gcra("timing")); len(a.Rows[i].Series[0].Y) != len(a2.Rows[i].Series[0].Y) || a.Meta.Merged != 0 || curves(a) == 0 {
		t.Error("Merge changed its first input")
	}
	// A merged baseline compares like any other.
	if _, err := results.Compare(m, b, results.DefaultTolerance, gated); err != nil {
		t.Errorf("compare with a merged baseline: %v", err)
	}
}

func TestMergeRefuses(t *testing.T) {
	a, b := gateFiles(t)
	edit(b, func(r results.Row) bool { return gcra("simulated")(r) && r.Workload == "uniform" }, func(r *results.Row) {
		change(r, results.Admitted, plus(1))
	})
	if _, err := results.Merge(gated, a, b); err == nil || !strings.Contains(err.Error(), "file 2 of 2 decided gcra on uniform (simulated, judged_n=100, judged_per=1s) otherwise than the first") {
		t.Errorf("other decisions: %v", err)
	}
	a, b = gateFiles(t)
	b.Meta.Seed = 9
	var mis *results.MismatchError
	if _, err := results.Merge(gated, a, b); !errors.As(err, &mis) || !strings.Contains(err.Error(), "seed 1 in OLD, 9 in NEW") {
		t.Errorf("another seed: %v", err)
	}
	a, b = gateFiles(t)
	b.Rows = b.Rows[1:]
	if _, err := results.Merge(gated, a, b); !errors.As(err, &mis) {
		t.Errorf("a row missing: %v", err)
	}
	if _, err := results.Merge(gated); err == nil {
		t.Error("merged nothing")
	}
}

// mergeFile is one run of a small lab: a timing row and the floor's, whose
// samples are own and floors, the floor's also around the limiter's; a
// memory row; an accuracy row with its allocations and the picture of an
// edge; a paced real-time row, with its runs' p99s and a latency curve,
// which the gate does not read.
func mergeFile(own, floors []float64, decisions, bytes, allocs, tput float64) *results.File {
	samples := func(tputs []float64) []results.Sample {
		var out []results.Sample
		for _, v := range tputs {
			out = append(out, results.Sample{ThroughputPerS: v, P50NS: 1e9 / v, P90NS: 2e9 / v})
		}
		return out
	}
	lim := timing(measured("", "uniform", "gcra", ratelab, "gcra"), 0, samples(own), samples(floors), samples(floors))
	set(&lim, results.Decisions, decisions)
	fl := timing(floor("", "uniform"), 0, samples(floors), nil, nil)
	set(&fl, results.Decisions, 10*decisions)
	acc := with(accuracy(measured("simulated", "boundary-attack", "gcra", ratelab, "gcra"), 1000, results.Accuracy{Admitted: 500, Ideal: 500, MaxWindowRatio: 1}),
		results.AllocsPerDecision, results.UnitAllocs, allocs)
	acc.AddSeries(edge)
	rt := realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 1, 1000, int64(decisions), results.Quantiles{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}, tput)
	rt.AddSeries(results.Series{Name: runP99, Unit: results.UnitNS, Y: []float64{tput / 1e6, tput / 2e6}})
	rt.AddSeries(results.Series{Name: "latency_curve", Unit: results.UnitNS, XUnit: "quantile", X: []float64{0.5, 0.9}, Y: []float64{1, 2}})
	return &results.File{Schema: results.Schema, Rows: []results.Row{acc, rt, lim, fl, memory(measured("", "", "gcra", ratelab, "gcra"), 1000, bytes)}}
}

// Merge pools a timing row's rounds, each series those of every file in
// order and each figure their median, its decisions the sum; takes the
// median of memory and allocations; keeps the rest of the first file, a
// row the gate does not read included, but for the curves.
func TestMergePools(t *testing.T) {
	files := []*results.File{
		mergeFile([]float64{1e7, 2e7}, []float64{1e8, 1e8}, 100, 30, 0, 5e6),
		mergeFile([]float64{3e7}, []float64{2e8}, 200, 34, 0.2, 6e6),
		mergeFile([]float64{5e7, 4e7}, []float64{3e8, 3e8}, 300, 31, 0.1, 7e6),
	}
	m, err := results.Merge(gated, files...)
	if err != nil {
		t.Fatal(err)
	}
	acc, rt, lim, fl, mem := m.Rows[0], m.Rows[1], m.Rows[2], m.Rows[3], m.Rows[4]
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"the limiter's decisions a second, round by round", lim.Curve(results.Throughput).Y, []float64{1e7, 2e7, 3e7, 5e7, 4e7}},
		{"its p50s", lim.Curve(results.Latency + ".p50").Y, []float64{100, 50, 1e9 / 3e7, 20, 25}},
		{"the floor's before it", lim.Curve(results.FloorBefore + results.Throughput).Y, []float64{1e8, 1e8, 2e8, 3e8, 3e8}},
		{"the floor's after it", lim.Curve(results.FloorAfter + results.Throughput).Y, []float64{1e8, 1e8, 2e8, 3e8, 3e8}},
		{"the floor's own", fl.Curve(results.Throughput).Y, []float64{1e8, 1e8, 2e8, 3e8, 3e8}},
		{"the limiter's decisions a second", lim.Get(results.Throughput), 3e7},
		{"its p50", lim.Get(results.Latency + ".p50"), 1e9 / 3e7},
		{"the floor's decisions a second", fl.Get(results.Throughput), 2e8},
		{"the limiter's decisions", lim.Get(results.Decisions), 600.0},
		{"the floor's decisions", fl.Get(results.Decisions), 6000.0},
		{"bytes per user", mem.Get(results.BytesPerUser), 31.0},
		{"allocations", acc.Get(results.AllocsPerDecision), 0.1},
		{"the accuracy row's decisions", acc.Get(results.Decisions), 1000.0},
		{"the accuracy row's curves", len(acc.Series), 0},
		{"the real-time row's decisions (the first file's)", rt.Get(results.Decisions), 100.0},
		{"the real-time row's decisions a second (the first file's)", rt.Get(results.Throughput), 5e6},
		{"the real-time row's p99s (the first file's)", rt.Curve(runP99).Y, []float64{5, 2.5}},
		{"the real-time row's curves", len(rt.Series), 1},
	} {
		if !equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if unit := lim.Metrics[slices.IndexFunc(lim.Metrics, func(x results.Metric) bool { return x.Name == results.Throughput })].Unit; unit != results.UnitPerS {
		t.Errorf("the pooled figure's unit is %q, want %q", unit, results.UnitPerS)
	}
	// The inputs are as they were.
	if again := mergeFile([]float64{1e7, 2e7}, []float64{1e8, 1e8}, 100, 30, 0, 5e6); !equal(files[0].Rows, again.Rows) {
		t.Error("Merge changed its first input")
	}
}

// equal reports whether got and want are equal, floats within a part in
// 1e12.
func equal(got, want any) bool {
	near := func(a, b float64) bool { return a == b || (a-b)/b < 1e-12 && (b-a)/b < 1e-12 }
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && near(g, w)
	case []float64:
		g, ok := got.([]float64)
		return ok && slices.EqualFunc(g, w, near)
	case []results.Row:
		g, ok := got.([]results.Row)
		return ok && slices.EqualFunc(g, w, func(x, y results.Row) bool {
			return x.Limiter == y.Limiter && maps.Equal(x.Config, y.Config) && slices.Equal(x.Metrics, y.Metrics) &&
				slices.EqualFunc(x.Series, y.Series, func(s, u results.Series) bool {
					return s.Name == u.Name && slices.Equal(s.X, u.X) && slices.Equal(s.Y, u.Y)
				})
		})
	}
	return got == want
}
