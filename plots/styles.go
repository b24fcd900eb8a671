package plots

import (
	"image/color"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// How the charts look: their fonts, colours and the style of each
// limiter's line, the same in every chart.

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
	// The plan's curves over its clients.
	"clients' median": rgb(0xBBBBBB),
	"clients' p99":    rgb(0x777777),
	"clients' most":   rgb(0x333333),
	"users' need":     rgb(0x000000),
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

// classLetter is the index of a class's letter in a series named for a
// class of keys, "(A) 600 keys: ...": 0 for A.
func classLetter(name string) (int, bool) {
	if len(name) > 4 && name[0] == '(' && name[2] == ')' && name[3] == ' ' && name[1] >= 'A' && name[1] <= 'Z' {
		return int(name[1] - 'A'), true
	}
	return 0, false
}

// lineStyle is how the line of the limiter name is drawn; peer says it is
// not ratelab's.
func lineStyle(name string, peer bool) draw.LineStyle {
	if first, _, together := strings.Cut(strings.TrimSuffix(name, identicalSuffix), ","); together && strings.HasSuffix(name, identicalSuffix) {
		name = first // lines drawn once (coincident): the first's style
	}
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
	if n, _, numbered := strings.Cut(name, " "); !ok && numbered && len(n) > 1 && n[0] == '#' {
		// A numbered series ("#2 203.0.113.21": a client the plan names)
		// takes the series' colours in turn.
		if i, err := strconv.Atoi(n[1:]); err == nil && i >= 1 {
			c, ok = workloadColors[(i-1)%len(workloadColors)], true
		}
	}
	if i, class := classLetter(name); !ok && class {
		// A class of keys ("(B) 150 keys: ..."): the plan's kept keys, in
		// greys and dashes, beneath the coloured keys it refuses.
		return draw.LineStyle{Color: []color.Color{rgb(0x333333), rgb(0x777777), rgb(0x999999)}[i%3], Width: vg.Points(1.6),
			Dashes: [][]vg.Length{nil, {vg.Points(5), vg.Points(3)}, {vg.Points(1.5), vg.Points(2)}, {vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2)}}[i%4]}
	}
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

// layerColors are the colours of stacked layers, in turn (an outage's
// answers: served, limited, refused, the rest).
var layerColors = []color.Color{rgb(0x009E73), rgb(0xE69F00), rgb(0xD55E00), rgb(0x999999)}

// The styles of marks: grey beneath lines, black over bars and layers.
var (
	markBeneath = draw.LineStyle{Color: rgb(0x999999), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	markOver    = draw.LineStyle{Color: rgb(0x222222), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
)

// markDashes are the named reference lines' dashes, in turn.
var markDashes = [][]vg.Length{
	{vg.Points(4), vg.Points(3)},
	{vg.Points(1), vg.Points(2)},
	{vg.Points(8), vg.Points(3)},
	{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)},
	{vg.Points(2), vg.Points(5)},
	{vg.Points(10), vg.Points(2), vg.Points(2), vg.Points(2), vg.Points(2), vg.Points(2)},
}
