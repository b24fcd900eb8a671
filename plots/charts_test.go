package plots

import (
	"slices"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// A peer is a limiter whose rows are another library's, whatever its
// name: dashed; ratelab's are solid.
func TestPeersByLibrary(t *testing.T) {
	f := &results.File{Rows: []results.Row{
		{Mode: "realtime", Limiter: "gcra", Library: results.LibraryRatelab},
		{Mode: "realtime", Limiter: "(harness floor)", Library: results.LibraryRatelab},
		{Mode: "realtime", Limiter: "mine", Library: "example.com/mine v1.2.0"},
	}}
	peers := peersOf(f)
	if !peers["mine"] || peers["gcra"] || peers["(harness floor)"] {
		t.Fatalf("peers %v, want mine alone", peers)
	}
	if s := lineStyle("mine", peers["mine"]); len(s.Dashes) == 0 {
		t.Error("a peer's line is solid")
	}
	if s := lineStyle("gcra", peers["gcra"]); len(s.Dashes) != 0 {
		t.Errorf("ratelab's gcra is dashed %v", s.Dashes)
	}
}

// A point with a range has an error bar, drawn where it can be (above
// zero on a log axis); the lines of a panel with ranges are drawn apart,
// in order, so that bars at one X do not hide each other, and a panel
// without any are drawn where they are.
func TestErrorBars(t *testing.T) {
	ranged := report.Line{Name: "gcra", Points: []report.XY{{X: 1, Y: 1}, {X: 2, Y: 5, Lo: 1, Hi: 40}, {X: 8, Y: 900, Lo: 0, Hi: 2000}}}
	plain := report.Line{Name: "x/time/rate", Points: []report.XY{{X: 1, Y: 1}, {X: 2, Y: 3}, {X: 8, Y: 10}}}
	logs := report.Axis{Log: true, Least: 1}
	pn := report.Panel{Title: "uniform", X: logs, Y: logs, Lines: []report.Line{ranged, plain}}

	var bars []*plotter.YErrorBars
	for _, p := range linePlotters(pn, newLegend(), nil) {
		if b, ok := p.(*plotter.YErrorBars); ok {
			bars = append(bars, b)
		}
	}
	// The bar from 0 cannot be drawn on a log axis.
	if len(bars) != 1 || len(bars[0].XYs) != 1 || bars[0].XYs[0].Y != 5 || bars[0].YErrors[0].Low != 4 || bars[0].YErrors[0].High != 35 {
		t.Fatalf("error bars %+v, want one, from 1 to 40 about 5", bars)
	}

	apart := dodged(pn)
	for i := range ranged.Points {
		a, b := apart[0].Points[i], apart[1].Points[i]
		if !(a.X < ranged.Points[i].X && ranged.Points[i].X < b.X) || a.Y != ranged.Points[i].Y || b.Y != plain.Points[i].Y || a.Hi != ranged.Points[i].Hi {
			t.Errorf("point %d drawn at %+v and %+v, want either side of x=%v, values kept", i, a, b, ranged.Points[i].X)
		}
	}
	if pn.Lines[0].Points[1].X != 2 {
		t.Error("dodged moved the panel's own points")
	}
	pn.Lines = []report.Line{plain, plain}
	if got := dodged(pn); !slices.Equal(got[0].Points, plain.Points) {
		t.Errorf("lines with no range drawn at %v, want %v", got[0].Points, plain.Points)
	}

	c := newChart(report.Figure{Name: "bars", Title: "Bars", Panels: []report.Panel{{Title: "uniform", X: logs, Y: logs, Lines: []report.Line{ranged, plain}}}, Width: 6, RowHeight: 3}, nil)
	for _, format := range []string{"png", "svg"} {
		if b, err := c.render(format); err != nil || len(b) == 0 {
			t.Errorf("render %s: %v", format, err)
		}
	}
}

// Lines that coincide on the whole chart are drawn once, named together;
// lines alike in one panel but not in another are drawn apart.
func TestCoincidentDrawnOnce(t *testing.T) {
	a := []report.XY{{X: 1, Y: 1}, {X: 2, Y: 4}}
	b := []report.XY{{X: 1, Y: 2}, {X: 2, Y: 3}}
	fig := report.Figure{Panels: []report.Panel{
		{Lines: []report.Line{{Name: "fixed-window", Points: a}, {Name: "sliding-log", Points: a}, {Name: "gcra", Points: a}, {Name: "token-bucket", Points: b}}},
		{Lines: []report.Line{{Name: "fixed-window", Points: b}, {Name: "sliding-log", Points: b}, {Name: "gcra", Points: a}, {Name: "token-bucket", Points: b}}},
	}}
	got := coincident(fig)
	var names []string
	for _, l := range got.Panels[0].Lines {
		names = append(names, l.Name)
	}
	want := []string{"fixed-window,\nsliding-log:\nidentical here", "gcra", "token-bucket"}
	if !slices.Equal(names, want) {
		t.Errorf("lines %q, want %q", names, want)
	}
	if len(got.Panels[1].Lines) != 3 || len(fig.Panels[0].Lines) != 4 {
		t.Errorf("the second panel has %d lines, want 3; the figure given was changed: %d lines", len(got.Panels[1].Lines), len(fig.Panels[0].Lines))
	}
	if s := lineStyle(want[0], false); s.Color != lineStyle("fixed-window", false).Color {
		t.Errorf("the lines drawn once are not in the first's colour")
	}
}
