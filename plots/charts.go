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
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
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

// layerColors are the colours of stacked layers, in turn (an outage's
// answers: served, limited, refused, the rest).
var layerColors = []color.Color{rgb(0x009E73), rgb(0xE69F00), rgb(0xD55E00), rgb(0x999999)}

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

// The styles of marks: grey beneath lines, black over bars and layers.
var (
	markBeneath = draw.LineStyle{Color: rgb(0x999999), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	markOver    = draw.LineStyle{Color: rgb(0x222222), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
)

// markPlotters draw marks across the ranges x and y, over fills if over.
func markPlotters(marks []report.Mark, x, y span, over bool, leg *legend) []plot.Plotter {
	style := markBeneath
	if over {
		style = markOver
	}
	var out []plot.Plotter
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

func textStyle(size float64, x draw.XAlignment, y draw.YAlignment) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    sans(size),
		Handler: plot.DefaultTextHandler,
		XAlign:  x,
		YAlign:  y,
	}
}

// sans is the charts' font, at size points: a sans serif reads better
// small than gonum's default serif.
func sans(size float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(size)}
}

func newLegend() *legend {
	l := &legend{Legend: plot.NewLegend(), seen: map[string]bool{}}
	l.Top, l.Left = true, true
	l.TextStyle.Font = sans(9)
	l.Padding = vg.Points(4)
	return l
}

// The colours (Okabe and Ito's, which stay apart for colour-blind eyes)
// and dashes of each limiter, the same in every chart: ratelab's solid,
// the peers' dashed; ratelab's on Redis in their algorithm's colour, dash
// and dot, dotted when batched, dash and two dots when packed.
var palette = map[string]color.Color{
	"fixed-window":    rgb(0xE69F00),
	"sliding-log":     rgb(0x000000),
	"sliding-counter": rgb(0x56B4E9),
	"token-bucket":    rgb(0x009E73),
	"leaky-bucket":    rgb(0xB8A800),
	"gcra":            rgb(0x0072B2),
	"x/time/rate":     rgb(0xD55E00),
	"go-limiter":      rgb(0xCC79A7),
	"throttled":       rgb(0x777777),
	"redis_rate":      rgb(0x7B4F9D),
	"(harness floor)": rgb(0xBBBBBB),
	// The Redis floors: what the round trip costs, alone and batched.
	"(redis floor)":         rgb(0x888888),
	"(redis batched floor)": rgb(0x888888),
}

// redisSuffix ends the name of ratelab's limiters kept in Redis,
// batchedSuffix of those that batch their decisions (drawn dotted, wider)
// and packedSuffix of those that pack their users into hashes.
const (
	redisSuffix   = " (redis)"
	batchedSuffix = " (redis batched)"
	packedSuffix  = " (redis packed)"
)

// workloadColors colour bars by series.
var workloadColors = []color.Color{rgb(0x0072B2), rgb(0xE69F00), rgb(0xD55E00), rgb(0x009E73), rgb(0xCC79A7), rgb(0x56B4E9)}

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// lineStyle is how the line of the limiter name is drawn; peer says it is
// not ratelab's.
func lineStyle(name string, peer bool) draw.LineStyle {
	if algorithm, variant, ok := strings.Cut(name, " fleet ("); ok { // a fleet: its algorithm's colour, dashed by variant
		s := draw.LineStyle{Color: palette[algorithm], Width: vg.Points(1.6)}
		switch variant {
		case "batched)":
			s.Width, s.Dashes = vg.Points(2.4), []vg.Length{vg.Points(1.5), vg.Points(1.5)}
		case "cached)":
			s.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		case "lease)":
			s.Width, s.Dashes = vg.Points(2), []vg.Length{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}
		}
		return s
	}
	algorithm, batched := strings.CutSuffix(name, batchedSuffix)
	algorithm, packed := strings.CutSuffix(algorithm, packedSuffix)
	algorithm, onRedis := strings.CutSuffix(algorithm, redisSuffix)
	c, ok := palette[algorithm]
	if !ok {
		c = rgb(0x333333)
	}
	s := draw.LineStyle{Color: c, Width: vg.Points(1.6)}
	switch {
	case peer:
		s.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	case batched:
		s.Width = vg.Points(2.4)
		s.Dashes = []vg.Length{vg.Points(1.5), vg.Points(1.5)}
	case packed:
		s.Dashes = []vg.Length{vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2), vg.Points(1.5), vg.Points(2)}
	case onRedis:
		s.Dashes = []vg.Length{vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2)}
	case name == "(harness floor)":
		s.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
	case name == "(redis floor)":
		s.Dashes = []vg.Length{vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2)}
	case name == "(redis batched floor)":
		s.Width = vg.Points(2.4)
		s.Dashes = []vg.Length{vg.Points(1.5), vg.Points(1.5)}
	}
	return s
}

// newPlot returns a panel with our styles. Leave y empty on a log y axis
// and give the chart a ylabel instead: gonum centres a y label at the
// linear midpoint of the range, which on a log scale is near the top, and
// pads the panel for it there.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle = textStyle(11, draw.XCenter, draw.YTop)
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		// Fonts only: the axes' own styles carry their rotation and
		// alignment.
		a.Label.TextStyle.Font = sans(9)
		a.Tick.Label.Font = sans(8)
	}
	p.Add(&plotter.Grid{Vertical: draw.LineStyle{Color: rgb(0xEEEEEE), Width: vg.Points(0.5)}, Horizontal: draw.LineStyle{Color: rgb(0xEEEEEE), Width: vg.Points(0.5)}})
	return p
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
