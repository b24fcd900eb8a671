package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
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
)

// Chart is one figure: a title, a grid of panels, a legend beside them.
type Chart struct {
	// Name is its file name, without an extension.
	Name string
	// Title heads it; Caption says, in two sentences, how to read it.
	Title, Caption string
	w, h           vg.Length
	panels         []*plot.Plot
	cols           int
	legend         *legend
	// ylabel, if set, is one y axis label for every panel, drawn once
	// at the left: for log y axes, whose own labels gonum misplaces.
	ylabel string
	// legendW is the legend's width; zero means legendWidth.
	legendW vg.Length
}

// legend is a plot legend that knows whether it has entries.
type legend struct {
	plot.Legend
	n int
}

func (l *legend) add(name string, thumb plot.Thumbnailer) {
	l.Add(name, thumb)
	l.n++
}

// Charts returns the charts f has data for.
func Charts(f *results.File) []Chart {
	var out []Chart
	for _, c := range []Chart{latencyChart(f), edgeChart(f), accuracyChart(f), memoryChart(f), scalingChart(f), contentionChart(f), fleetChart(f), llmChart(f), outageChart(f)} {
		if len(c.panels) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Render draws c as "png" or "svg".
func (c Chart) Render(format string) (_ []byte, err error) {
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

func (c Chart) draw(dc draw.Canvas) {
	title := textStyle(13, draw.XCenter, draw.YTop)
	dc.FillText(title, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(6)}, c.Title)
	width := legendWidth
	if c.legendW > 0 {
		width = c.legendW
	}
	if c.legend.n == 0 {
		width = vg.Points(12) // a margin, not a legend
	}
	left := vg.Length(0)
	if c.ylabel != "" {
		st := textStyle(10, draw.XCenter, draw.YTop)
		st.Rotation = math.Pi / 2
		dc.FillText(st, vg.Point{X: dc.Min.X + vg.Points(4), Y: (dc.Min.Y + dc.Max.Y - vg.Points(26)) / 2}, c.ylabel)
		left = vg.Points(18)
	}
	body := draw.Crop(dc, left, -width, 0, -vg.Points(26))
	rows := (len(c.panels) + c.cols - 1) / c.cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, c.cols)
		for j := range grid[i] {
			if k := i*c.cols + j; k < len(c.panels) {
				grid[i][j] = c.panels[k]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: c.cols, PadX: vg.Points(14), PadY: vg.Points(14), PadLeft: vg.Points(4), PadBottom: vg.Points(4)}
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
	l := &legend{Legend: plot.NewLegend()}
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

var workloadColors = []color.Color{rgb(0x0072B2), rgb(0xE69F00), rgb(0xD55E00), rgb(0x009E73), rgb(0xCC79A7), rgb(0x56B4E9)}

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

func lineStyle(name string) draw.LineStyle {
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
	case isPeer(name):
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

// addLines draws lines on p and puts each name once in the legend.
func addLines(p *plot.Plot, lines []Line, leg *legend, seen map[string]bool) {
	addLinesOf(p, lines, leg, seen, true)
}

// addLinesOf is addLines for log axes (positive: only points above zero)
// or linear ones (points at zero too).
func addLinesOf(p *plot.Plot, lines []Line, leg *legend, seen map[string]bool, positive bool) {
	for _, l := range lines {
		xys := points(l, positive)
		ln, err := plotter.NewLine(xys)
		if err != nil {
			continue // no point left to draw
		}
		ln.LineStyle = lineStyle(l.Name)
		p.Add(ln)
		if len(xys) <= 6 {
			dots, _ := plotter.NewScatter(xys)
			dots.GlyphStyle = draw.GlyphStyle{Color: ln.LineStyle.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			p.Add(dots)
		}
		if !seen[l.Name] {
			seen[l.Name] = true
			leg.add(l.Name, ln)
		}
	}
}

// points are l's points that can be drawn: finite, and above zero for log
// axes (positive) or not below it.
func points(l Line, positive bool) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range l.Points {
		if finite(pt.X, pt.X) && finite(pt.Y, pt.Y) && (pt.X > 0 && pt.Y > 0 || !positive && pt.X >= 0 && pt.Y >= 0) {
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
		}
	}
	return xys
}

// logTicks labels a log axis at powers of ten with plain numbers, and at
// twos and fives too when the axis spans too few powers of ten to read.
type logTicks struct{ unit string }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	if !finite(min, max) || min <= 0 || max/min > 1e30 {
		return nil // not a range a log axis can draw
	}
	dense := math.Log10(max/min) < 2
	var out []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		v := math.Pow(10, e)
		for k := 1.0; k < 10; k++ {
			m := k * v
			if m < min*0.999 || m > max*1.001 {
				continue
			}
			tk := plot.Tick{Value: m}
			if k == 1 || dense && (k == 2 || k == 5) {
				tk.Label = humanize(m) + t.unit
			}
			out = append(out, tk)
		}
	}
	return out
}

// linearTicks labels a linear axis from zero at round steps (1, 2 or 5
// times a power of ten, four to eight of them) as plain numbers: gonum's
// default writes bytes as "250.00".
type linearTicks struct{}

func (linearTicks) Ticks(min, max float64) []plot.Tick {
	if !finite(min, max) || max <= min {
		return nil
	}
	p := math.Pow(10, math.Floor(math.Log10((max-min)/4)))
	var step float64
	for _, k := range []float64{1, 2, 5, 10} {
		if step = k * p; (max-min)/step <= 8 {
			break
		}
	}
	var out []plot.Tick
	for i := math.Ceil(min / step); i*step <= max; i++ {
		// Whole steps multiply exactly; a fractional one does not (6 × 0.1
		// is 0.6000000000000001), so it is divided instead (6 / 10 is 0.6).
		v := i * step
		if p < 1 {
			v = math.Round(i*step/p) / math.Round(1/p)
		}
		if v == 0 {
			v = 0 // not -0, from a min a little below zero
		}
		out = append(out, plot.Tick{Value: v, Label: humanize(v)})
	}
	return out
}

func humanize(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// floorTicks are nanosTicks that label Floor, where zeros are drawn, as
// "≤0.1ns".
type floorTicks struct{}

func (floorTicks) Ticks(min, max float64) []plot.Tick {
	ticks := nanosTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Value == Floor {
			ticks[i].Label = fmt.Sprintf("≤%gns", Floor)
		}
	}
	return ticks
}

// nanosTicks labels a log axis of nanoseconds with units.
type nanosTicks struct{}

func (nanosTicks) Ticks(min, max float64) []plot.Tick {
	ticks := logTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		v := ticks[i].Value
		switch {
		case v < 1e3:
			ticks[i].Label = fmt.Sprintf("%gns", v)
		case v < 1e6:
			ticks[i].Label = fmt.Sprintf("%gµs", v/1e3)
		case v < 1e9:
			ticks[i].Label = fmt.Sprintf("%gms", v/1e6)
		default:
			ticks[i].Label = fmt.Sprintf("%gs", v/1e9)
		}
	}
	return ticks
}

func latencyChart(f *results.File) Chart {
	c := Chart{Name: "latency", Title: "Latency of one decision, from its intended send time (paced, open loop)",
		Caption: "Each line is one limiter's latency distribution, from the median at the left to four nines at the right, both axes logarithmic. " +
			"Lower is better; lines that rise steeply at the right have a tail, and where every line rises together (the harness floor too) the machine, not the limiter, is the cause.",
		w: 9 * vg.Inch, cols: 2, legend: newLegend(), ylabel: "latency from intended send time (log scale)"}
	seen := map[string]bool{}
	percentile := plot.ConstantTicks([]plot.Tick{{Value: 2, Label: "p50"}, {Value: 10, Label: "p90"}, {Value: 100, Label: "p99"}, {Value: 1000, Label: "p99.9"}, {Value: 10000, Label: "p99.99"}})
	for _, pn := range Latency(f) {
		p := newPlot(pn.Title, "percentile", "")
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = percentile, nanosTicks{}
		addLines(p, pn.Lines, c.legend, seen)
		p.X.Min, p.X.Max = 2, 10000
		logRange(&p.Y, Floor)
		c.panels = append(c.panels, p)
	}
	c.h = gridHeight(len(c.panels), c.cols, 3*vg.Inch)
	return c
}

func edgeChart(f *results.File) Chart {
	c := Chart{Name: "edge", Title: "The window edge: what one boundary attacker had admitted in the last W",
		Caption: "The attacker spends a full quota just before and just after every window edge; each panel follows what it had admitted in the trailing window W, with the limit N as a grey dashed line and its peak over N in the title. " +
			"A limiter the attack gets past rises towards 2N around an edge; an exact one never passes N.",
		w: 9 * vg.Inch, cols: 3, legend: newLegend(), ylabel: "requests admitted in the trailing window W"}
	panels := Edge(f)
	top := 0.0
	for _, pn := range panels {
		top = max(top, 2.2*pn.Limit)
		for _, pt := range pn.Lines[0].Points {
			top = max(top, 1.1*pt.Y)
		}
	}
	limitStyle := draw.LineStyle{Color: rgb(0x999999), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	for _, pn := range panels {
		l := pn.Lines[0]
		xys := make(plotter.XYs, len(l.Points))
		peak := 0.0
		for i, pt := range l.Points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
			peak = max(peak, pt.Y)
		}
		title := pn.Title
		if pn.Limit > 0 {
			title = fmt.Sprintf("%s: peak %.2f×N", pn.Title, peak/pn.Limit)
		}
		p := newPlot(title, "seconds", "")
		// The limit first, so that a line at N is drawn over it.
		xmin, xmax, _, _ := plotter.XYRange(xys)
		if lim, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: pn.Limit}, {X: xmax, Y: pn.Limit}}); err == nil {
			lim.LineStyle = limitStyle
			p.Add(lim)
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			continue // Edge gives finite points only; this is not reached
		}
		ln.StepStyle = plotter.PostStep
		ln.LineStyle = lineStyle(l.Name)
		ln.LineStyle.Width = vg.Points(1.2)
		p.Add(ln)
		p.Y.Min, p.Y.Max = 0, top
		p.X.Tick.Marker = edgeTicks{w: float64(f.Meta.Params.Window)}
		c.panels = append(c.panels, p)
	}
	c.h = gridHeight(len(c.panels), c.cols, 2.5*vg.Inch)
	return c
}

// edgeTicks labels the window edges, the multiples of W (seconds), where
// a boundary attacker strikes, and marks the half windows between them.
type edgeTicks struct{ w float64 }

func (t edgeTicks) Ticks(min, max float64) []plot.Tick {
	w := t.w
	if w <= 0 {
		w = 1
	}
	// Past 2^50 windows, k++ below stops changing k.
	if !finite(min, max) || (max-min)/w > 1e4 || math.Abs(max)/w > 1<<50 || math.Abs(min)/w > 1<<50 {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	every := math.Max(1, math.Ceil((max-min)/w/8)) // at most about 8 labels
	var out []plot.Tick
	for k := math.Ceil(2 * min / w); k/2*w <= max; k++ {
		tk := plot.Tick{Value: k / 2 * w}
		if math.Mod(k/2, every) == 0 {
			tk.Label = fmt.Sprintf("%gs", k/2*w)
		} else if every > 1 {
			continue // no marks between labels far apart
		}
		out = append(out, tk)
	}
	return out
}

// barPanel draws b as horizontal grouped bars: a row per group, a bar per
// series, coloured by series (or by group, with one series).
func barPanel(title, x string, b Bars, leg *legend, withLegend bool, label func(float64) string) *plot.Plot {
	p := newPlot(title, x, "")
	n := len(b.Series)
	width := vg.Points(22 / float64(max(n, 1)))
	overlay := b.Overlay
	if n == 1 || overlay {
		width = vg.Points(14)
	}
	for s := range b.Series {
		vals := make(plotter.Values, len(b.Groups))
		for g := range b.Groups {
			vals[g] = b.Values[g][s]
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			continue
		}
		bc.Horizontal = true
		bc.LineStyle.Width = 0
		bc.Color = workloadColors[s%len(workloadColors)]
		if b.Series[s] == "peers" {
			bc.Color = rgb(0x999999)
		}
		if !overlay {
			bc.Offset = width * vg.Length(float64(n-1)/2-float64(s))
		}
		p.Add(bc)
		if withLegend {
			leg.add(b.Series[s], bc)
		}
		if label != nil {
			var xys plotter.XYs
			var texts []string
			for g, v := range vals {
				xys = append(xys, plotter.XY{X: v, Y: float64(g)})
				texts = append(texts, " "+label(v))
			}
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
			if err == nil {
				for i := range labels.TextStyle {
					labels.TextStyle[i] = textStyle(8, draw.XLeft, draw.YCenter)
				}
				labels.Offset = vg.Point{Y: vg.Points(1.5)} // the font's centre sits low
				p.Add(labels)
			}
		}
	}
	// A row with no bar at all says so, rather than look like a gap.
	var xys plotter.XYs
	var texts []string
	for g, row := range b.Values {
		if !slices.ContainsFunc(row, func(v float64) bool { return v != 0 }) {
			xys = append(xys, plotter.XY{X: 0, Y: float64(g)})
			texts = append(texts, " none")
		}
	}
	if labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts}); err == nil && len(xys) > 0 {
		for i := range labels.TextStyle {
			labels.TextStyle[i] = textStyle(8, draw.XLeft, draw.YCenter)
			labels.TextStyle[i].Color = rgb(0x666666)
		}
		labels.Offset = vg.Point{Y: vg.Points(1.5)}
		p.Add(labels)
	}
	p.NominalY(b.Groups...)
	p.X.Min = 0
	return p
}

func accuracyChart(f *results.File) Chart {
	c := Chart{Name: "accuracy", Title: "Accuracy against the ideal, by limiter and workload",
		Caption: "Each bar is the share of a workload's requests that a limiter decided differently from the ideal (the sliding window log on the same requests): admitted where it denied (left) or denied where it admitted (right). " +
			"Shorter is better" + accuracyNotes(f) + ".",
		w: 9 * vg.Inch, cols: 2, legend: newLegend()}
	allow, deny := Accuracy(f)
	if len(allow.Groups) == 0 {
		return c
	}
	reverse(&allow)
	reverse(&deny)
	top := 1.1 * max(maxOf(allow), maxOf(deny), 1)
	for i, b := range []Bars{allow, deny} {
		p := barPanel([]string{"false allows", "false denies"}[i], "% of requests", b, c.legend, i == 0, nil)
		p.X.Max = top // one scale for both, so they compare
		p.X.Tick.Marker = percentTicks{}
		c.panels = append(c.panels, p)
	}
	c.h = vg.Inch + vg.Length(len(allow.Groups))*(0.1*vg.Inch*vg.Length(len(allow.Series))+0.1*vg.Inch)
	return c
}

// accuracyNotes says, for the accuracy chart's caption, which limiters
// decided as the ideal did everywhere and whose bars come from a replay in
// real time.
func accuracyNotes(f *results.File) string {
	var exact, realtime []string
	wrong := map[string]bool{}
	acc := func(r results.Row) bool { return r.Has(results.MostInWindow) && r.Mode != "llm" && r.Mode != "fleet" }
	for _, r := range f.Rows {
		if acc(r) {
			wrong[r.Limiter] = wrong[r.Limiter] || r.Get(results.FalseAllows) > 0 || r.Get(results.FalseDenies) > 0
			if r.Mode == "realtime" && !slices.Contains(realtime, r.Limiter) {
				realtime = append(realtime, r.Limiter)
			}
		}
	}
	for _, r := range f.Rows {
		if acc(r) && !wrong[r.Limiter] && !slices.Contains(exact, r.Limiter) {
			exact = append(exact, r.Limiter)
		}
	}
	var notes []string
	if len(exact) > 0 {
		notes = append(notes, fmt.Sprintf("%s decided as the ideal did on every request", andList(exact)))
	}
	if slices.ContainsFunc(f.Rows, func(r results.Row) bool { return acc(r) && r.Outside() }) {
		notes = append(notes, "the rows on Redis are of a sample of each workload (the accuracy table says which), so they differ from the same algorithm's in memory by the sample, not the decisions")
	}
	if len(realtime) > 0 {
		notes = append(notes, fmt.Sprintf("%s measured in a replay in real time", andList(realtime)))
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + andList(notes)
}

// andList joins words as prose: "a", "a and b", "a, b and c".
func andList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// percentTicks marks round percentages.
type percentTicks struct{}

func (percentTicks) Ticks(min, max float64) []plot.Tick {
	if !finite(min, max) || max-min > 1000 {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 20, 25, 50} {
		if step = s; (max-min)/s <= 6 {
			break
		}
	}
	var out []plot.Tick
	for v := 0.0; v <= max; v += step {
		out = append(out, plot.Tick{Value: v, Label: fmt.Sprintf("%g%%", v)})
	}
	return out
}

// reverse puts the first group at the top of a horizontal bar chart.
func reverse(b *Bars) {
	for i, j := 0, len(b.Groups)-1; i < j; i, j = i+1, j-1 {
		b.Groups[i], b.Groups[j] = b.Groups[j], b.Groups[i]
		b.Values[i], b.Values[j] = b.Values[j], b.Values[i]
	}
}

func memoryChart(f *results.File) Chart {
	users := 0
	for _, r := range f.Rows {
		if r.Mode == "memory" {
			users = max(users, int(r.Get("users")))
		}
	}
	c := Chart{Name: "memory", Title: "Memory per user: live heap per key held",
		Caption: fmt.Sprintf("Each bar is the live heap a limiter held per key after %s users made one request each, keys of 16 bytes included when the limiter keeps them. ", thousands(users)) +
			"Shorter is better; ratelab keeps a hash of each key, not the key.",
		w: 8 * vg.Inch, cols: 1, legend: newLegend()}
	b := Memory(f)
	if len(b.Groups) == 0 {
		return c
	}
	reverse(&b)
	// A series each for ratelab's, the peers' and those kept in Redis,
	// drawn over each other: one bar a row, coloured by whose it is.
	outside := map[string]bool{}
	for _, r := range f.Rows {
		outside[r.Limiter] = outside[r.Limiter] || r.Mode == "memory" && r.Outside()
	}
	split := Bars{Groups: b.Groups, Series: []string{"ratelab", "peers"}, Overlay: true}
	if slices.ContainsFunc(b.Groups, func(name string) bool { return outside[name] }) {
		split.Series = append(split.Series, "on Redis (its memory)")
		c.Title += ", and Redis's memory per key"
		c.Caption += " The rows on Redis are the server's memory per key (INFO used_memory), its key's name included, after one decision each for " +
			"fewer keys (the memory table says how many): not the process's heap."
	}
	for g, name := range b.Groups {
		row := make([]float64, len(split.Series))
		switch {
		case outside[name]:
			row[2] = b.Values[g][0]
		case isPeer(name):
			row[1] = b.Values[g][0]
		default:
			row[0] = b.Values[g][0]
		}
		split.Values = append(split.Values, row)
	}
	p := barPanel("", "bytes per user", split, c.legend, true, func(v float64) string {
		if v == 0 {
			return ""
		}
		return fmt.Sprintf("%.1f", v)
	})
	p.X.Max = 1.15 * maxOf(b)
	p.X.Tick.Marker = linearTicks{}
	c.panels = append(c.panels, p)
	c.h = 0.85*vg.Inch + vg.Length(len(b.Groups))*0.35*vg.Inch
	return c
}

// thousands formats n with commas between thousands.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func isPeer(name string) bool {
	return name == "x/time/rate" || name == "go-limiter" || name == "throttled" || name == "redis_rate"
}

func maxOf(b Bars) float64 {
	m := 0.0
	for _, row := range b.Values {
		for _, v := range row {
			m = max(m, v)
		}
	}
	return m
}

// goroutineTicks marks the goroutine counts swept.
func goroutineTicks(panels []Panel) plot.Ticker {
	var ticks []plot.Tick
	seen := map[float64]bool{}
	for _, pn := range panels {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				if !seen[pt.X] {
					seen[pt.X] = true
					ticks = append(ticks, plot.Tick{Value: pt.X, Label: fmt.Sprint(pt.X)})
				}
			}
		}
	}
	return plot.ConstantTicks(ticks)
}

func scalingChart(f *results.File) Chart {
	procs := max(f.Meta.GOMAXPROCS, 1)
	c := Chart{Name: "scaling", Title: "Throughput under overload against goroutines (unpaced)",
		Caption: fmt.Sprintf("Each line is a limiter's decisions per second as more goroutines send as fast as they can, both axes logarithmic, with GOMAXPROCS %d. "+
			"Higher is better; a line that falls past %d goroutines is losing to contention, and the harness floor is a limiter that decides nothing.", procs, procs),
		w: 9 * vg.Inch, cols: 2, legend: newLegend(), ylabel: "decisions per second (log scale)"}
	return c.againstGoroutines(Scaling(f), 1e-6, millionsTicks{}, func(*plot.Plot) {}) // one decision a second
}

// againstGoroutines draws panels of a value against goroutines, both axes
// logarithmic, with yticks; adjust sets a panel's y range before it is
// made drawable.
func (c Chart) againstGoroutines(panels []Panel, least float64, yticks plot.Ticker, adjust func(*plot.Plot)) Chart {
	ticks := goroutineTicks(panels)
	seen := map[string]bool{}
	for _, pn := range panels {
		p := newPlot(pn.Title, "goroutines", "")
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = ticks, yticks
		addLines(p, pn.Lines, c.legend, seen)
		adjust(p)
		logRange(&p.X, 0.5)
		logRange(&p.Y, least)
		c.panels = append(c.panels, p)
	}
	c.h = gridHeight(len(c.panels), c.cols, 3*vg.Inch)
	return c
}

// millionsTicks labels a log axis of millions a second.
type millionsTicks struct{}

func (millionsTicks) Ticks(min, max float64) []plot.Tick {
	ticks := logTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = humanize(ticks[i].Value*1e6) + "/s"
		}
	}
	return ticks
}

func contentionChart(f *results.File) Chart {
	c := Chart{Name: "contention", Title: "Lock wait per decision against goroutines (unpaced)",
		Caption: fmt.Sprintf("Each line is the time goroutines spent parked on locks per decision, as the runtime counts it, as more goroutines send at once; both axes logarithmic, with %gns or less (a zero, too) drawn at the bottom. "+
			"Lower is better; a limiter whose denials take no lock stays at the bottom.", Floor),
		w: 9 * vg.Inch, cols: 2, legend: newLegend(), ylabel: "lock wait per decision (log scale)"}
	return c.againstGoroutines(Contention(f), Floor, floorTicks{}, func(p *plot.Plot) {
		p.Y.Min = Floor
		// Two powers of ten at least, so that a wait of a fraction of a
		// nanosecond, which is nothing, does not fill the panel.
		p.Y.Max = max(p.Y.Max, 100*Floor)
	})
}

func fleetChart(f *results.File) Chart {
	c := Chart{Name: "fleet", Title: "A fleet sharing one Redis: round trips against accuracy",
		Caption: "Each line is a fleet of processes sharing one Redis, through its two routings (each request to a process at random, or a key's to the same one): " +
			"the round trips to Redis a decision against the share of decisions unlike the ideal's, in simulated time. " +
			"Left is cheaper; lower is closer to the ideal. Exact fleets decide alike, so they sit at one height: the denial cache only moves left. " +
			"Leases move further left and off that height (approximate); the token bucket's lease fleet decides as GCRA's, the same limit, and hides it.",
		w: 10 * vg.Inch, cols: 2, legend: newLegend(), legendW: 2.1 * vg.Inch}
	seen := map[string]bool{}
	for _, pn := range Fleet(f) {
		p := newPlot(pn.Title, "round trips a decision", "decisions unlike the ideal's (%)")
		p.X.Min, p.X.Max = 0, 1.05
		p.Y.Min = 0
		addLinesOf(p, pn.Lines, c.legend, seen, false)
		p.Y.Max = max(p.Y.Max*1.15, 1)
		p.Y.Min = -p.Y.Max / 40 // room for a point at 0
		p.X.Tick.Marker, p.Y.Tick.Marker = linearTicks{}, linearTicks{}
		c.panels = append(c.panels, p)
	}
	c.h = gridHeight(len(c.panels), c.cols, 2.6*vg.Inch)
	return c
}

// markLine draws a mark across a panel: when Redis went and came back,
// the limit, the ideal.
var markLine = draw.LineStyle{Color: rgb(0x222222), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}

// outageColors are the colours of an outage panel's layers: served,
// limited, refused, the rest.
var outageColors = []color.Color{rgb(0x009E73), rgb(0xE69F00), rgb(0xD55E00), rgb(0x999999)}

func outageChart(f *results.File) Chart {
	c := Chart{Name: "outage", Title: "Redis taken away mid-run: what ratelab serve answers over time",
		Caption: "Each panel is a run of ratelab serve deciding on Redis, attacked at a steady rate by users each asking for twice their limit, " +
			"with Redis taken away between the dashed lines (refused: a server that is down; unanswered: a network that drops everything) and given back. " +
			"The colours are the shares of the requests sent in each 100ms answered 200, 429 and 503; the black line is the share of decisions the server made without Redis. " +
			"Fail open serves everyone, fail closed refuses everyone, fall back keeps limiting at the fleet's share; the gap after the second line is the wait for the breaker's next probe.",
		w: 10 * vg.Inch, cols: 3, legend: newLegend(), legendW: 1.9 * vg.Inch}
	seen := false
	for _, pn := range Outage(f) {
		p := newPlot(pn.Title, "seconds from the start", "share of requests (%)")
		bottom := make([]float64, len(pn.Layers[0].Points))
		for j, layer := range pn.Layers {
			var top, base plotter.XYs
			for i, pt := range layer.Points {
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
			poly.Color = outageColors[j]
			poly.LineStyle.Width = 0
			p.Add(poly)
			if !seen {
				c.legend.add(layer.Name, poly)
			}
		}
		if ln, err := plotter.NewLine(points(pn.Failed, false)); err == nil {
			ln.LineStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1.2)}
			p.Add(ln)
			if !seen {
				c.legend.add(pn.Failed.Name, ln)
			}
		}
		for _, x := range []float64{pn.Away, pn.Back} {
			edge, _ := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: 100}})
			edge.LineStyle = markLine
			p.Add(edge)
		}
		if !seen {
			edge, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
			edge.LineStyle = markLine
			c.legend.add("Redis away, back", edge)
		}
		seen = true
		p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 100
		p.X.Tick.Marker, p.Y.Tick.Marker = linearTicks{}, linearTicks{}
		c.panels = append(c.panels, p)
	}
	c.h = gridHeight(len(c.panels), c.cols, 2.5*vg.Inch)
	return c
}

func llmChart(f *results.File) Chart {
	c := Chart{Name: "llm", Title: "Costs known after the response: an LLM endpoint limited in tokens",
		Caption: "Each bar is a limiter charging requests whose tokens are known only once the response is done, one way or another: the estimate only; the estimate, then settled at the actual tokens; " +
			"the most a request may cost, then settled; or the actual tokens as if known up front (for reference); an estimate is what the client sent, in brackets. " +
			"Left: the most actual tokens one key had admitted in any window, over the limit (the dashed line); middle: the actual tokens admitted, against the ideal's (the dashed line); " +
			"right: the share of decisions unlike the ideal's. The ideal is the sliding log charging each request its actual tokens when sent.",
		w: 12 * vg.Inch, cols: 3, legend: newLegend(), legendW: 2 * vg.Inch}
	most, tokens, wrong := LLM(f)
	if len(most.Groups) == 0 {
		return c
	}
	for _, b := range []*Bars{&most, &tokens, &wrong} {
		reverse(b)
	}
	mark := func(p *plot.Plot, x float64) {
		ln, err := plotter.NewLine(plotter.XYs{{X: x, Y: -0.5}, {X: x, Y: float64(len(most.Groups)) - 0.5}})
		if err == nil {
			ln.LineStyle = markLine
			p.Add(ln)
		}
	}
	left := barPanel("most actual tokens in any W", "× the limit", most, c.legend, true, nil)
	left.X.Max = 1.1 * max(maxOf(most), 1)
	mark(left, 1)
	middle := barPanel("tokens admitted", "% of the ideal's", tokens, c.legend, false, nil)
	middle.X.Max = 1.1 * max(maxOf(tokens), 100)
	middle.X.Tick.Marker = percentTicks{}
	mark(middle, 100)
	right := barPanel("decisions unlike the ideal's", "% of requests", wrong, c.legend, false, nil)
	right.X.Max = 1.1 * max(maxOf(wrong), 1)
	right.X.Tick.Marker = percentTicks{}
	for _, p := range []*plot.Plot{left, middle, right} { // one height for every panel's rows
		p.Y.Min, p.Y.Max = -0.5, float64(len(most.Groups))-0.5
	}
	c.panels = append(c.panels, left, middle, right)
	c.h = vg.Inch + vg.Length(len(most.Groups))*(0.1*vg.Inch*vg.Length(len(most.Series))+0.1*vg.Inch)
	return c
}
