package plots

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// fixture is a real run, small: ratelab bench --quick with five limiters,
// two workloads, 1 and 2 goroutines, on a machine otherwise idle (its
// paced latencies are the machine's as much as the limiters'):
//
//	ratelab bench --quick --limiters fixed-window,sliding-log,gcra,x/time/rate,go-limiter \
//		--workloads uniform,boundary-attack --modes simulated,realtime,memory \
//		--users 20 --attackers 5 --many-users 1000 --simulated 5s --goroutines 1,2 --realtime 20ms --redis=false
func fixture(t *testing.T) *results.File {
	t.Helper()
	f, err := results.ReadFile(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFiguresGolden pins the charts the modes declare for the fixture,
// their data and how they read, so that a change in what a chart shows is
// a change someone saw.
func TestFiguresGolden(t *testing.T) {
	golden.Check(t, "charts.golden", describe(report.Figures(fixture(t), harness.Modes())))
}

// describe writes figs as text: each figure's layout, each panel's axes
// and marks, then its data, a line a curve, a layer or a group of bars.
func describe(figs []report.Figure) []byte {
	var b bytes.Buffer
	pts := func(name string, ps []report.XY) {
		fmt.Fprintf(&b, "%s:", name)
		for _, pt := range ps {
			fmt.Fprintf(&b, " %.6g,%.6g", pt.X, pt.Y)
		}
		b.WriteString("\n")
	}
	for _, f := range figs {
		fmt.Fprintf(&b, "== %s: %s (%d cols, %gin wide, rows %gin; y label %q; legend %gin, none %v)\n%s\n",
			f.Name, f.Title, f.Cols, f.Width, f.RowHeight, f.YLabel, f.LegendWidth, f.NoLegend, f.Caption)
		for _, p := range f.Panels {
			fmt.Fprintf(&b, "-- %s\nx %s\ny %s\n", p.Title, axis(p.X), axis(p.Y))
			for _, m := range p.Marks {
				fmt.Fprintf(&b, "mark %q on x %v at %g\n", m.Name, m.OnX, m.At)
			}
			if p.Steps || p.Bin != 0 {
				fmt.Fprintf(&b, "steps %v, bin %g\n", p.Steps, p.Bin)
			}
			for _, l := range p.Lines {
				pts(l.Name, l.Points)
			}
			for _, l := range p.Layers {
				pts("layer "+l.Name, l.Points)
			}
			if bs := p.Bars; bs != nil {
				fmt.Fprintf(&b, "bars (series %s; overlay %v; digits %d)\n", strings.Join(bs.Series, ", "), bs.Overlay, bs.Digits)
				for g, group := range bs.Groups {
					fmt.Fprintf(&b, "%s:", group)
					for _, v := range bs.Values[g] {
						fmt.Fprintf(&b, " %.6g", v)
					}
					b.WriteString("\n")
				}
			}
		}
	}
	return b.Bytes()
}

func axis(a report.Axis) string {
	ticks := [...]string{"auto", "plain", "percent", "nanoseconds", "millions", "windows"}[a.Ticks]
	s := fmt.Sprintf("%q log %v least %g ticks %s window %g range %g to %g", a.Label, a.Log, a.Least, ticks, a.Window, a.Min, a.Max)
	for _, t := range a.Labels {
		s += fmt.Sprintf(" %g=%s", t.At, t.Label)
	}
	return s
}

// figure returns the figure of f named name, failing if there is none.
func figure(t *testing.T, f *results.File, name string) report.Figure {
	t.Helper()
	figs := report.Figures(f, harness.Modes())
	i := slices.IndexFunc(figs, func(c report.Figure) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no %s chart", name)
	}
	return figs[i]
}

// unpaced and paced report whether r is a real-time run with goroutines
// sending as fast as they can (no offered rate, no accuracy), or at an
// offered rate.
func unpaced(r results.Row) bool {
	return r.Setting(results.Offered) == "" && r.Setting(results.Goroutines) != "" && !r.Has(results.MostInWindow) && r.Measured()
}

func paced(r results.Row) bool {
	return r.SettingFloat(results.Offered) > 0 && r.Curve("latency_curve") != nil
}

// find returns the first row of f that keep reports true of.
func find(t *testing.T, f *results.File, keep func(results.Row) bool) results.Row {
	t.Helper()
	i := slices.IndexFunc(f.Rows, keep)
	if i < 0 {
		t.Fatal("no such row in the fixture")
	}
	return f.Rows[i]
}

// TestRealTimeChartsTrue checks the data of the charts of real-time runs
// against the rows it comes from, by a path apart from the code that
// extracts it.
func TestRealTimeChartsTrue(t *testing.T) {
	f := fixture(t)
	// unpacedRow is the unpaced real-time row of a limiter on a workload
	// at a number of goroutines: no offered rate, no accuracy.
	unpacedRow := func(workload, limiter string, goroutines float64) results.Row {
		t.Helper()
		return find(t, f, func(r results.Row) bool {
			return unpaced(r) && r.Workload == workload && r.Limiter == limiter && float64(r.SettingInt(results.Goroutines)) == goroutines
		})
	}
	scaling, contention, latency := figure(t, f, "scaling"), figure(t, f, "contention"), figure(t, f, "latency")
	for _, pn := range scaling.Panels {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				r := unpacedRow(pn.Title, l.Name, pt.X)
				if want := r.Get(results.Throughput) / 1e6; pt.Y != want {
					t.Errorf("scaling %s %s at %v goroutines: %v, want %v", pn.Title, l.Name, pt.X, pt.Y, want)
				}
			}
		}
	}
	for _, pn := range contention.Panels {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				r := unpacedRow(pn.Title, l.Name, pt.X)
				if w, ok := r.Value("lock_wait"); !ok {
					t.Errorf("contention %s %s at %v goroutines: a point for a wait not measured", pn.Title, l.Name, pt.X)
				} else if want := max(w, pn.Y.Least); pt.Y != want || pn.Y.Least <= 0 {
					t.Errorf("contention %s %s at %v goroutines: %v, want %v (drawn no lower than %v)", pn.Title, l.Name, pt.X, pt.Y, want, pn.Y.Least)
				}
			}
		}
	}
	for _, pn := range latency.Panels {
		for _, l := range pn.Lines {
			r := find(t, f, func(r results.Row) bool { return paced(r) && r.Workload == pn.Title && r.Limiter == l.Name })
			c := r.Curve("latency_curve")
			if c == nil || len(c.X) != len(c.Y) {
				t.Fatalf("latency %s %s: the row's curve is %+v, want a quantile for each value", pn.Title, l.Name, c)
			}
			if len(l.Points) != len(c.Y) {
				t.Fatalf("latency %s %s: %d points, want %d", pn.Title, l.Name, len(l.Points), len(c.Y))
			}
			for i, q := range c.X {
				if got, v := l.Points[i], c.Y[i]; got.Y != max(v, pn.Y.Least) || got.X != 1/(1-q) {
					t.Errorf("latency %s %s at q=%v: %+v, want y %v", pn.Title, l.Name, q, got, v)
				}
			}
		}
	}
}

// TestChartDataTrue checks the data of the edge, accuracy and memory
// charts against the rows it comes from, by a path apart from the code
// that extracts it.
func TestChartDataTrue(t *testing.T) {
	f := fixture(t)
	edge := figure(t, f, "edge")
	for _, pn := range edge.Panels {
		top := 0.0
		for _, pt := range pn.Lines[0].Points {
			top = max(top, pt.Y)
		}
		limit := pn.Marks[0].At
		if strings.HasPrefix(pn.Title, "fixed-window:") && top < 1.9*limit {
			t.Errorf("the fixed window's edge panel peaks at %v, want about 2N = %v", top, 2*limit)
		}
		if strings.HasPrefix(pn.Title, "sliding-log:") && top > limit {
			t.Errorf("the sliding log's edge panel peaks at %v, over N = %v", top, limit)
		}
		// The title states the table's most in any W (over the whole
		// run; harness.TestFiguresAgreeWithTables): the curve, its
		// first windows, reaches no higher.
		var most float64
		if _, err := fmt.Sscanf(pn.Title[strings.LastIndex(pn.Title, ": ")+2:], "most in any W %f×N", &most); err != nil || top/limit > most+0.005 {
			t.Errorf("edge panel %q: its curve peaks at %.2f×N, over the most it states (%v)", pn.Title, top/limit, err)
		}
	}
	accuracy := figure(t, f, "accuracy")
	allow, deny := accuracy.Panels[0].Bars, accuracy.Panels[1].Bars
	for g, name := range allow.Groups {
		for s, w := range allow.Series {
			i := slices.IndexFunc(f.Rows, func(r results.Row) bool { return r.Has(results.MostInWindow) && r.Limiter == name && r.Workload == w })
			if i < 0 {
				if allow.Values[g][s] != 0 {
					t.Errorf("accuracy %s %s: a bar with no row", name, w)
				}
				continue
			}
			a, _ := f.Rows[i].AccuracyOf()
			if allow.Values[g][s] != 100*a.FalseAllowRate || deny.Values[g][s] != 100*a.FalseDenyRate {
				t.Errorf("accuracy %s %s: %v%% and %v%%, want %v%% and %v%%", name, w, allow.Values[g][s], deny.Values[g][s], 100*a.FalseAllowRate, 100*a.FalseDenyRate)
			}
		}
	}
	m := figure(t, f, "memory").Panels[0].Bars
	for g, name := range m.Groups {
		r := find(t, f, func(r results.Row) bool { return r.Has(results.BytesPerUser) && r.Limiter == name })
		// One bar a group, in the series of whose it is.
		if got, want := slices.Max(m.Values[g]), r.Get(results.BytesPerUser); got != want || slices.Min(m.Values[g]) != 0 {
			t.Errorf("memory %s: %v, want %v in one series", name, m.Values[g], want)
		}
		if peer := r.Library != results.LibraryRatelab; (m.Values[g][1] != 0) != peer {
			t.Errorf("memory %s: %v, a peer's bar %v", name, m.Values[g], peer)
		}
	}
}

// Each kind of panel, as a mode might declare it, draws: stacked layers
// under a line and marks, bars with value labels and a mark, lines on log
// axes; a name is in the legend once, whatever the panels it is in.
func TestRenderKinds(t *testing.T) {
	layers := report.Panel{Title: "layers", Bin: 0.1,
		Layers: []report.Line{{Name: "served", Points: []report.XY{{X: 0.05, Y: 75}, {X: 0.15, Y: 25}}}, {Name: "limited", Points: []report.XY{{X: 0.05, Y: 25}, {X: 0.15, Y: 75}}}},
		Lines:  []report.Line{{Name: "failed", Points: []report.XY{{X: 0.05, Y: 0}, {X: 0.15, Y: 100}}}},
		Marks:  []report.Mark{{Name: "away, back", OnX: true, At: 0.1}, {Name: "away, back", OnX: true, At: 0.2}},
		X:      report.Axis{Ticks: report.TicksPlain, Min: 0, Max: 0.2}, Y: report.Axis{Ticks: report.TicksPlain, Min: 0, Max: 100}}
	bars := report.Panel{Title: "bars", Bars: &report.Bars{Groups: []string{"a", "b"}, Series: []string{"x", "peers"}, Values: [][]float64{{1, 0}, {0, 0}}, Digits: 1},
		Marks: []report.Mark{{OnX: true, At: 1}}, X: report.Axis{Ticks: report.TicksPercent}}
	lines := report.Panel{Title: "lines", Lines: []report.Line{{Name: "gcra", Points: []report.XY{{X: 1, Y: 0}, {X: 2, Y: 5e6}}}, {Name: "served", Points: []report.XY{{X: 1, Y: 1}}}},
		X: report.Axis{Log: true, Least: 0.5, Labels: []report.Tick{{At: 1, Label: "1"}, {At: 2, Label: "2"}}}, Y: report.Axis{Log: true, Least: 0.1, Ticks: report.TicksNanos}}
	c := newChart(report.Figure{Name: "kinds", Title: "Kinds", Panels: []report.Panel{layers, bars, lines, layers}, Cols: 2, Width: 9, RowHeight: 2}, nil)
	// served, limited, failed, away and back; x and peers; gcra.
	if c.legend.n != 7 || c.h != gridHeight(4, 2, 2*vg.Inch) {
		t.Errorf("%d legend entries, want 7; %v high", c.legend.n, c.h)
	}
	for _, format := range []string{"png", "svg"} {
		if b, err := c.render(format); err != nil || len(b) == 0 {
			t.Errorf("render %s: %v", format, err)
		}
	}
	// The layers panel spans its layers' bins and its marks; the log
	// panel leaves out the point at zero.
	if x := c.panels[0].X; x.Min != 0 || x.Max < 0.2 {
		t.Errorf("layers panel: x from %v to %v", x.Min, x.Max)
	}
	if y := c.panels[2].Y; y.Min < 0.1 || y.Max != 5e6 {
		t.Errorf("lines panel: y from %v to %v", y.Min, y.Max)
	}
}
