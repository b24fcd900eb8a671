// Package plots draws the charts the lab's modes declare (report.Figure,
// with gonum/plot) and writes the report that ties the charts and tables
// together.
//
// A chart's data comes from its mode's declaration, a pure function of a
// results.File (golden-tested), so that a chart is true to the JSON beside
// it; this package only draws it: one way for each kind of panel (lines,
// bars, stacked layers), as the figure's axes say.
package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// chart is a figure made ready to draw: its panels as gonum plots, its
// legend, its size.
type chart struct {
	report.Figure
	w, h   vg.Length
	panels []*plot.Plot
	legend *legend
}

// legend is a plot legend that knows whether it has entries, and lists
// each name once.
type legend struct {
	plot.Legend
	n    int
	seen map[string]bool
	off  bool
}

func (l *legend) add(name string, thumb plot.Thumbnailer) {
	if l.off || name == "" || l.seen[name] {
		return
	}
	l.seen[name] = true
	l.Add(name, thumb)
	l.n++
}

func newLegend() *legend {
	l := &legend{Legend: plot.NewLegend(), seen: map[string]bool{}}
	l.Top, l.Left = true, true
	l.TextStyle.Font = sans(9)
	l.Padding = vg.Points(4)
	return l
}

// charts are the charts of f, as its modes declare them, in the modes'
// order.
func charts(f *results.File, ms report.Modes) []chart {
	var out []chart
	peers := peersOf(f)
	for _, fig := range report.Figures(f, ms) {
		out = append(out, newChart(fig, peers))
	}
	return out
}

// peersOf are the limiters of f's rows that are not ratelab's: whose
// Library is not results.LibraryRatelab, as the picks tell them apart.
// Their lines are dashed.
func peersOf(f *results.File) map[string]bool {
	out := map[string]bool{}
	for _, r := range f.Rows {
		if r.Library != results.LibraryRatelab {
			out[r.Limiter] = true
		}
	}
	return out
}

// newChart makes fig ready to draw, the lines named in peers dashed as a
// peer's.
func newChart(fig report.Figure, peers map[string]bool) chart {
	fig = coincident(fig)
	c := chart{Figure: fig, w: vg.Length(fig.Width) * vg.Inch, legend: newLegend()}
	c.Cols = max(c.Cols, 1)
	c.legend.off = fig.NoLegend
	perRow := vg.Length(fig.RowHeight) * vg.Inch
	for _, pn := range fig.Panels {
		c.panels = append(c.panels, newPanel(pn, c.legend, peers))
		if fig.RowHeight == 0 && pn.Bars != nil {
			perRow = max(perRow, barRowHeight(*pn.Bars))
		}
	}
	c.h = gridHeight(len(c.panels), c.Cols, perRow)
	return c
}

// render draws c as "png" or "svg".
func (c chart) render(format string) (_ []byte, err error) {
	// gonum panics on data it cannot draw; the axes are set up so that it
	// should not, but a report must not take the lab's results down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gonum/plot: %v", r)
		}
	}()
	var buf bytes.Buffer
	switch format {
	case "png":
		cv := vgimg.NewWith(vgimg.UseWH(c.w, c.h), vgimg.UseDPI(120), vgimg.UseBackgroundColor(color.White))
		c.draw(draw.New(cv))
		if _, err := (vgimg.PngCanvas{Canvas: cv}).WriteTo(&buf); err != nil {
			return nil, err
		}
	case "svg":
		cv := vgsvg.New(c.w, c.h)
		dc := draw.New(cv)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		c.draw(dc)
		if _, err := cv.WriteTo(&buf); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("plots: unknown format %q", format)
	}
	return buf.Bytes(), nil
}

const legendWidth = 1.75 * vg.Inch

// gridHeight is the height of a chart of n panels in cols columns, each
// row perRow high, with the chart's title above them.
func gridHeight(n, cols int, perRow vg.Length) vg.Length {
	rows := max((n+cols-1)/cols, 1)
	return 0.45*vg.Inch + vg.Length(rows)*perRow
}

// barRowHeight is the height of a row of panels of bars like b: a band
// per group, a bar high for each series, or one for them all overlaid.
func barRowHeight(b report.Bars) vg.Length {
	if b.Overlay {
		return 0.4*vg.Inch + vg.Length(len(b.Groups))*0.35*vg.Inch
	}
	return 0.55*vg.Inch + vg.Length(len(b.Groups))*(0.1*vg.Inch*vg.Length(len(b.Series))+0.1*vg.Inch)
}

func (c chart) draw(dc draw.Canvas) {
	title := textStyle(13, draw.XCenter, draw.YTop)
	dc.FillText(title, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(6)}, c.Title)
	width := legendWidth
	if c.LegendWidth > 0 {
		width = vg.Length(c.LegendWidth) * vg.Inch
	}
	if c.legend.n == 0 {
		width = vg.Points(12) // a margin, not a legend
	}
	left := vg.Length(0)
	if c.YLabel != "" {
		st := textStyle(10, draw.XCenter, draw.YTop)
		st.Rotation = math.Pi / 2
		dc.FillText(st, vg.Point{X: dc.Min.X + vg.Points(4), Y: (dc.Min.Y + dc.Max.Y - vg.Points(26)) / 2}, c.YLabel)
		left = vg.Points(18)
	}
	body := draw.Crop(dc, left, -width, 0, -vg.Points(26))
	rows := (len(c.panels) + c.Cols - 1) / c.Cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, c.Cols)
		for j := range grid[i] {
			if k := i*c.Cols + j; k < len(c.panels) {
				grid[i][j] = c.panels[k]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: c.Cols, PadX: vg.Points(14), PadY: vg.Points(14), PadLeft: vg.Points(4), PadBottom: vg.Points(4)}
	canvases := plot.Align(grid, tiles, body)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	side := draw.Crop(dc, dc.Max.X-dc.Min.X-width+vg.Points(8), 0, 0, -vg.Points(34))
	c.legend.Draw(side)
}

// identicalSuffix ends the name of lines drawn once (coincident).
const identicalSuffix = ":\nidentical here"

// coincident is fig with the lines that coincide on the whole chart drawn
// once: lines of the same points in every panel (each in the same panels
// as the others) become the first of them, named for all, a line each in
// the legend ("fixed-window,", "sliding-log:", "identical here"), so that
// no line hides under another.
func coincident(fig report.Figure) report.Figure {
	var names []string
	seen := map[string]bool{}
	for _, pn := range fig.Panels {
		for _, l := range pn.Lines {
			if !seen[l.Name] {
				seen[l.Name] = true
				names = append(names, l.Name)
			}
		}
	}
	// key is a line's points in every panel, written out: two lines of
	// the same key coincide on the whole chart.
	key := func(name string) string {
		var b strings.Builder
		for i, pn := range fig.Panels {
			for _, l := range pn.Lines {
				if l.Name == name {
					fmt.Fprintf(&b, "%d:%v;", i, l.Points)
				}
			}
		}
		return b.String()
	}
	groups := map[string][]string{}
	var order []string
	for _, n := range names {
		k := key(n)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	merged := map[string]string{} // a line's name to its group's, or "" to drop it
	for _, k := range order {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		merged[g[0]] = strings.Join(g, ",\n") + identicalSuffix
		for _, n := range g[1:] {
			merged[n] = ""
		}
	}
	if len(merged) == 0 {
		return fig
	}
	panels := slices.Clone(fig.Panels)
	for i, pn := range panels {
		var lines []report.Line
		for _, l := range pn.Lines {
			name, ok := merged[l.Name]
			switch {
			case !ok:
				lines = append(lines, l)
			case name != "":
				l.Name = name
				lines = append(lines, l)
			}
		}
		panels[i].Lines = lines
	}
	fig.Panels = panels
	return fig
}
