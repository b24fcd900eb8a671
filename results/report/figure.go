package report

import "github.com/ratelab/ratelab/results"

// A Figure is a chart as a mode declares it (Mode.Charts): its data and
// how to show it, not how to draw it (package plots draws it). Its panels
// sit in a grid of Cols columns under its title, beside one legend of
// every named line, bar series, layer and mark, each listed once.
type Figure struct {
	// Name is the chart's file name, without an extension; Title heads
	// it; Caption says, in two sentences or so, how to read it.
	Name, Title, Caption string
	// Mode is the mode whose section the figure goes in (Figures sets
	// it to the mode that declared it).
	Mode   string
	Panels []Panel
	// Cols is how many panels a row of the grid holds (0: one).
	Cols int
	// Width is the figure's width and RowHeight the height of a row of
	// its panels, in inches; a RowHeight of 0 fits a row of bars to its
	// groups and series.
	Width, RowHeight float64
	// YLabel, if set, labels every panel's Y axis once, at the left: for
	// log Y axes, whose own labels gonum misplaces.
	YLabel string
	// LegendWidth is the legend's width in inches (0: 1.75); NoLegend
	// leaves the legend out, for panels whose titles name their lines.
	LegendWidth float64
	NoLegend    bool
}

// A Panel is one chart of a figure's grid: lines, bars or stacked layers,
// on two axes, with dashed marks across it.
type Panel struct {
	Title string
	X, Y  Axis
	// Lines are curves, each in its name's colour and dash (a limiter's
	// the same in every chart), or in black over Layers. Steps draws them
	// as steps, each value held until the next point.
	Lines []Line
	Steps bool
	// Bars, if set, are drawn as horizontal bars, a row per group, the
	// first at the top: its Y axis names the groups.
	Bars *Bars
	// Layers are shares stacked from zero, each point the middle of a
	// bin of width Bin, coloured in turn green, orange, vermilion, grey.
	Layers []Line
	Bin    float64
	// Marks are dashed reference lines across the panel: grey beneath
	// lines, black over bars and layers.
	Marks []Mark
}

// Line is a named curve, its points in order of X.
type Line struct {
	Name   string
	Points []XY
}

// XY is a point. Lo and Hi, if Hi > Lo, are a range about Y (how far the
// rounds Y is the median of spread), drawn as an error bar.
type XY struct{ X, Y, Lo, Hi float64 }

// Bars are values by group (rows) and series (a bar each, coloured by
// series): Values[g][s]. Group g sits at g on the Y axis.
type Bars struct {
	Groups, Series []string
	Values         [][]float64
	// Overlay draws a group's series over each other rather than side by
	// side: for series that never both have a value in one group.
	Overlay bool
	// Digits, if not 0, writes each bar's value at its end, to as many
	// decimals.
	Digits int
}

// Mark is a dashed line across a panel at a value of Y (a level: the
// limit), or of X if OnX (a time: Redis taken away). A mark with a Name
// is in the legend.
type Mark struct {
	Name string
	OnX  bool
	At   float64
}

// Axis is how a panel's axis reads.
type Axis struct {
	Label string
	// Log is a logarithmic scale; Least the least value it spans (gonum
	// draws no zero on it), where the data draws what is at or below it,
	// and the tick there, if any, reads "≤".
	Log   bool
	Least float64
	// Ticks is how the axis is marked, unless Labels says where and how.
	Ticks  TickStyle
	Labels []Tick
	// Window is, for TicksWindows, the window W in the axis's units.
	Window float64
	// Min and Max, unless equal, are a range the axis spans at least; it
	// spans the data and the marks too.
	Min, Max float64
}

// Tick is a labelled mark on an axis.
type Tick struct {
	At    float64
	Label string
}

// TickStyle is a way of marking an axis.
type TickStyle int

const (
	// TicksAuto is gonum's default.
	TicksAuto TickStyle = iota
	// TicksPlain marks round numbers (1, 2 or 5 times a power of ten on
	// a linear axis, powers of ten on a log one), written 2k, 3M.
	TicksPlain
	// TicksPercent marks round percentages of a linear axis.
	TicksPercent
	// TicksNanos marks a log axis of nanoseconds in ns, µs, ms and s.
	TicksNanos
	// TicksMillions marks a log axis of millions a second, as 20M/s.
	TicksMillions
	// TicksWindows marks a linear axis of seconds at the multiples of
	// Axis.Window, where a boundary attacker strikes, and at the half
	// windows between.
	TicksWindows
)

// Figures returns the charts of f's modes that have a panel, in the
// modes' Order. Each mode's Charts is given its measured rows, however
// few: a chart may draw on other modes' rows of f.
func Figures(f *results.File, ms Modes) []Figure {
	var out []Figure
	for _, m := range ms {
		if m.Charts == nil {
			continue
		}
		for _, fig := range m.Charts(f, measuredRows(f.RowsOf(m.Name))) {
			if len(fig.Panels) > 0 {
				fig.Mode = m.Name
				out = append(out, fig)
			}
		}
	}
	return out
}
