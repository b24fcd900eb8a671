package plots

import (
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ratelab/ratelab/results/report"
)

// The panels of a chart, one way for each kind: lines, bars, stacked
// layers and marks, on axes fit to their data.

// newPanel makes pn a plot: its bars or layers, then its lines (a peer's,
// as peers says, dashed), its marks beneath the lines or over the bars
// and layers, each named one in leg.
func newPanel(pn report.Panel, leg *legend, peers map[string]bool) *plot.Plot {
	p := newPlot(pn.Title, pn.X.Label, pn.Y.Label)
	setAxis(&p.X, pn.X)
	setAxis(&p.Y, pn.Y)
	var fills []plot.Plotter
	if pn.Bars != nil {
		fills = barPlotters(p, *pn.Bars, leg)
	}
	fills = append(fills, layerPlotters(pn, leg)...)
	lines := linePlotters(pn, leg, peers)
	x, y := spans(append(slices.Clone(fills), lines...))
	for _, m := range pn.Marks {
		if m.OnX {
			x = x.with(m.At, m.At)
		} else {
			y = y.with(m.At, m.At)
		}
	}
	x, y = x.fit(pn.X), y.fit(pn.Y)
	marks := markPlotters(pn.Marks, x, y, len(fills) > 0, leg)
	if len(fills) == 0 {
		p.Add(marks...) // beneath, so that a line on a mark is drawn over it
		p.Add(lines...)
	} else {
		p.Add(fills...)
		p.Add(lines...)
		p.Add(marks...)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = x.min, x.max, y.min, y.max
	return p
}

// span is the range of an axis.
type span struct{ min, max float64 }

func (s span) with(lo, hi float64) span { return span{min(s.min, lo), max(s.max, hi)} }

// fit is s widened to the range a asks for, and made drawable if a is
// logarithmic.
func (s span) fit(a report.Axis) span {
	if a.Min != a.Max {
		s = s.with(a.Min, a.Max)
	}
	if a.Log {
		ax := plot.Axis{Min: s.min, Max: s.max}
		logRange(&ax, a.Least)
		s = span{ax.Min, ax.Max}
	}
	return s
}

// spans are the ranges ps's data spans, as gonum's plot.Add finds them.
func spans(ps []plot.Plotter) (x, y span) {
	x, y = span{math.Inf(1), math.Inf(-1)}, span{math.Inf(1), math.Inf(-1)}
	for _, p := range ps {
		if d, ok := p.(plot.DataRanger); ok {
			xmin, xmax, ymin, ymax := d.DataRange()
			x, y = x.with(xmin, xmax), y.with(ymin, ymax)
		}
	}
	return x, y
}

// setAxis gives a its scale and ticks.
func setAxis(a *plot.Axis, ax report.Axis) {
	if ax.Log {
		a.Scale = plot.LogScale{}
	}
	if t := ticker(ax); t != nil {
		a.Tick.Marker = t
	}
}

// linePlotters are pn's lines: each limiter's in its style (a peer's, as
// peers says, dashed), steps thinner, and in black over layers; a line of
// few points has a dot on each, and a point with a range an error bar.
func linePlotters(pn report.Panel, leg *legend, peers map[string]bool) []plot.Plotter {
	var out []plot.Plotter
	for _, l := range dodged(pn) {
		xys := points(l, pn.X.Log, pn.Y.Log)
		ln, err := plotter.NewLine(xys)
		if err != nil {
			continue // no point left to draw
		}
		ln.LineStyle = lineStyle(l.Name, peers[l.Name])
		switch {
		case len(pn.Layers) > 0:
			ln.LineStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1.2)}
		case pn.Steps:
			ln.StepStyle = plotter.PostStep
			ln.LineStyle.Width = vg.Points(1.2)
		}
		out = append(out, ln)
		if len(xys) <= 6 && !pn.Steps && len(pn.Layers) == 0 {
			// No dot on a log axis's least value: the lines that lie
			// there, at or under what the axis shows, read as one.
			above := slices.DeleteFunc(slices.Clone(xys), func(pt plotter.XY) bool { return pn.Y.Log && pt.Y <= pn.Y.Least })
			if dots, err := plotter.NewScatter(above); err == nil && len(above) > 0 {
				dots.GlyphStyle = draw.GlyphStyle{Color: ln.LineStyle.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
				out = append(out, dots)
			}
		}
		if bars := errorBars(l, pn.X.Log, pn.Y.Log); bars != nil {
			bars.LineStyle = draw.LineStyle{Color: ln.LineStyle.Color, Width: vg.Points(1)}
			bars.CapWidth = vg.Points(5)
			out = append(out, bars)
		}
		leg.add(l.Name, ln)
	}
	return out
}

// points are l's points that can be drawn: finite, and above zero on a
// log axis (xlog, ylog).
func points(l report.Line, xlog, ylog bool) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range l.Points {
		if finite(pt.X, pt.X) && finite(pt.Y, pt.Y) && (!xlog || pt.X > 0) && (!ylog || pt.Y > 0) {
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
		}
	}
	return xys
}

// dodged are pn's lines, drawn a little apart on X if any point has a
// range, so that lines at one X do not hide each other's error bars: the
// n lines across a twelfth of the axis (of its powers of ten, if log).
func dodged(pn report.Panel) []report.Line {
	ranged := slices.ContainsFunc(pn.Lines, func(l report.Line) bool {
		return slices.ContainsFunc(l.Points, func(pt report.XY) bool { return pt.Hi > pt.Lo })
	})
	if !ranged || len(pn.Lines) < 2 {
		return pn.Lines
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range pn.Lines {
		for _, pt := range l.Points {
			if finite(pt.X, pt.X) && (!pn.X.Log || pt.X > 0) {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
			}
		}
	}
	if !(hi > lo) {
		return pn.Lines
	}
	width := (hi - lo) / 12
	if pn.X.Log {
		width = math.Log10(hi/lo) / 12
	}
	out := make([]report.Line, len(pn.Lines))
	for i, l := range pn.Lines {
		by := width * (float64(i)/float64(len(pn.Lines)-1) - 0.5)
		out[i] = report.Line{Name: l.Name, Points: slices.Clone(l.Points)}
		for j := range out[i].Points {
			if pn.X.Log {
				out[i].Points[j].X *= math.Pow(10, by)
			} else {
				out[i].Points[j].X += by
			}
		}
	}
	return out
}

// errorBars are the ranges of l's points that have one (Hi > Lo) and can
// be drawn (above zero on a log axis), nil if none.
func errorBars(l report.Line, xlog, ylog bool) *plotter.YErrorBars {
	var bars struct {
		plotter.XYs
		plotter.YErrors
	}
	for _, pt := range l.Points {
		if pt.Hi > pt.Lo && pt.Lo <= pt.Y && pt.Y <= pt.Hi && finite(pt.X, pt.X) && finite(pt.Lo, pt.Hi) && (!xlog || pt.X > 0) && (!ylog || pt.Lo > 0) {
			bars.XYs = append(bars.XYs, plotter.XY{X: pt.X, Y: pt.Y})
			bars.YErrors = append(bars.YErrors, struct{ Low, High float64 }{pt.Y - pt.Lo, pt.Hi - pt.Y})
		}
	}
	if len(bars.XYs) == 0 {
		return nil
	}
	b, err := plotter.NewYErrorBars(bars)
	if err != nil {
		return nil
	}
	return b
}

// layerPlotters are pn's layers, stacked from zero, each point a bin of
// width pn.Bin.
func layerPlotters(pn report.Panel, leg *legend) []plot.Plotter {
	if len(pn.Layers) == 0 {
		return nil
	}
	var out []plot.Plotter
	bottom := make([]float64, len(pn.Layers[0].Points))
	for j, layer := range pn.Layers {
		var top, base plotter.XYs
		for i, pt := range layer.Points[:min(len(layer.Points), len(bottom))] {
			x0, x1 := pt.X-pn.Bin/2, pt.X+pn.Bin/2
			top = append(top, plotter.XY{X: x0, Y: bottom[i] + pt.Y}, plotter.XY{X: x1, Y: bottom[i] + pt.Y})
			base = append(base, plotter.XY{X: x0, Y: bottom[i]}, plotter.XY{X: x1, Y: bottom[i]})
			bottom[i] += pt.Y
		}
		if len(top) == 0 {
			continue
		}
		slices.Reverse(base)
		poly, err := plotter.NewPolygon(append(top, base...))
		if err != nil {
			continue
		}
		poly.Color = layerColors[j%len(layerColors)]
		poly.LineStyle.Width = 0
		out = append(out, poly)
		leg.add(layer.Name, poly)
	}
	return out
}

// markPlotters draw marks across the ranges x and y, over fills if over.
func markPlotters(marks []report.Mark, x, y span, over bool, leg *legend) []plot.Plotter {
	style := markBeneath
	if over {
		style = markOver
	}
	var out []plot.Plotter
	named := 0
	for _, m := range marks {
		xys := plotter.XYs{{X: x.min, Y: m.At}, {X: x.max, Y: m.At}}
		if m.OnX {
			xys = plotter.XYs{{X: m.At, Y: y.min}, {X: m.At, Y: y.max}}
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		ln.LineStyle = style
		if m.Name != "" {
			// Each reference line a style of its own (the plan's peaks
			// drew --spare and every suggestion as one grey dash): a dash
			// of its own, and an algorithm's colour where it names one.
			ln.LineStyle.Dashes = markDashes[named%len(markDashes)]
			if a, _, _ := strings.Cut(m.Name, " "); palette[a] != nil {
				ln.LineStyle.Color = palette[a]
			}
			named++
		}
		out = append(out, ln)
		leg.add(m.Name, ln)
	}
	return out
}

// barPlotters are b as horizontal grouped bars on p: a row per group, the
// first at the top, a bar per series, coloured by series; a row with no
// bar at all says so, rather than look like a gap.
func barPlotters(p *plot.Plot, b report.Bars, leg *legend) []plot.Plotter {
	groups, values := slices.Clone(b.Groups), slices.Clone(b.Values)
	slices.Reverse(groups)
	slices.Reverse(values)
	n := len(b.Series)
	width := vg.Points(22 / float64(max(n, 1)))
	if n == 1 || b.Overlay {
		width = vg.Points(14)
	}
	var out []plot.Plotter
	for s, name := range b.Series {
		vals := make(plotter.Values, len(groups))
		for g := range groups {
			vals[g] = values[g][s]
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			continue
		}
		bc.Horizontal = true
		bc.LineStyle.Width = 0
		bc.Color = workloadColors[s%len(workloadColors)]
		if name == "peers" {
			bc.Color = rgb(0x999999)
		}
		if !b.Overlay {
			bc.Offset = width * vg.Length(float64(n-1)/2-float64(s))
		}
		out = append(out, bc)
		leg.add(name, bc)
		if b.Digits > 0 {
			var xys plotter.XYs
			var texts []string
			for g, v := range vals {
				xys = append(xys, plotter.XY{X: v, Y: float64(g)})
				if v == 0 {
					texts = append(texts, " ")
				} else {
					texts = append(texts, " "+strconv.FormatFloat(v, 'f', b.Digits, 64))
				}
			}
			out = append(out, barLabels(xys, texts, color.Black)...)
		}
	}
	var xys plotter.XYs
	var texts []string
	for g, row := range values {
		if !slices.ContainsFunc(row, func(v float64) bool { return v != 0 }) {
			xys = append(xys, plotter.XY{X: 0, Y: float64(g)})
			texts = append(texts, " none")
		}
	}
	out = append(out, barLabels(xys, texts, rgb(0x666666))...)
	p.NominalY(groups...)
	return out
}

// barLabels writes texts at xys, after them, in c; none if xys is empty.
func barLabels(xys plotter.XYs, texts []string, c color.Color) []plot.Plotter {
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil || len(xys) == 0 {
		return nil
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i] = textStyle(8, draw.XLeft, draw.YCenter)
		labels.TextStyle[i].Color = c
	}
	labels.Offset = vg.Point{Y: vg.Points(1.5)} // the font's centre sits low
	return []plot.Plotter{labels}
}

// logRange makes a log axis's range one gonum can draw: no lower than
// least (above zero), and wider than a point (gonum widens a range of one
// value by 1 either side, which can take it below zero).
func logRange(a *plot.Axis, least float64) {
	if !(a.Min > least) {
		a.Min = least
	}
	if !(a.Max > a.Min*1.01) || math.IsInf(a.Max, 0) {
		a.Min, a.Max = a.Min/2, a.Min*2
	}
}

// finite reports whether min and max are numbers, in order: a range
// something can be drawn on.
func finite(min, max float64) bool {
	return !math.IsNaN(min) && !math.IsNaN(max) && !math.IsInf(min, 0) && !math.IsInf(max, 0) && min <= max
}
