package plots

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"

	"github.com/ratelab/ratelab/results/report"
)

// ticker is how a marks its ticks: at its Labels, or in its style; nil
// for gonum's default.
func ticker(a report.Axis) plot.Ticker {
	if len(a.Labels) > 0 {
		ticks := make([]plot.Tick, len(a.Labels))
		for i, t := range a.Labels {
			ticks[i] = plot.Tick{Value: t.At, Label: t.Label}
		}
		return plot.ConstantTicks(ticks)
	}
	var t plot.Ticker
	switch a.Ticks {
	case report.TicksAuto:
		return nil
	case report.TicksPlain:
		t = linearTicks{}
		if a.Log {
			t = logTicks{}
		}
	case report.TicksPercent:
		t = percentTicks{}
	case report.TicksNanos:
		t = nanosTicks{}
	case report.TicksMillions:
		t = millionsTicks{}
	case report.TicksWindows:
		t = windowTicks{w: a.Window}
	default:
		return nil // a style this plots does not know: gonum's
	}
	if a.Least > 0 {
		t = leastTicks{t, a.Least}
	}
	return t
}

// leastTicks are ticks whose tick at least, where values at or below it
// are drawn, reads "≤".
type leastTicks struct {
	plot.Ticker
	least float64
}

func (t leastTicks) Ticks(min, max float64) []plot.Tick {
	ticks := t.Ticker.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Value == t.least && ticks[i].Label != "" {
			ticks[i].Label = "≤" + ticks[i].Label
		}
	}
	return ticks
}

// logTicks labels a log axis at powers of ten with plain numbers, and at
// twos and fives too when the axis spans too few powers of ten to read.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
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
				tk.Label = humanize(m)
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

// windowTicks labels the window edges, the multiples of W (seconds),
// where a boundary attacker strikes, and marks the half windows between
// them.
type windowTicks struct{ w float64 }

func (t windowTicks) Ticks(min, max float64) []plot.Tick {
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
