package harness

import (
	"fmt"
	"slices"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// The real-time mode's charts of latency and throughput (its contention
// chart is in contention.go).

// drawnFloor is the least nanoseconds a chart's log axis spans: a
// latency or a lock wait of zero is drawn there.
const drawnFloor = 0.1

// latencyFigures are a panel per workload of the paced runs' latency (in
// memory, and on Redis: bySide): X is 1/(1-q) (2 for the median, 100 for
// p99, 10,000 for p99.99), Y the latency in nanoseconds.
func latencyFigures(rows []results.Row) []report.Figure {
	fig := report.Figure{Name: "latency", Title: "Latency of one decision, from its intended send time (paced, open loop)",
		Caption: "Each line is one limiter's latency distribution, from the median at the left to four nines at the right, both axes logarithmic. " +
			"Lower is better; lines that rise steeply at the right have a tail, and where every line rises together (the harness floor too) the machine, not the limiter, is the cause.",
		Cols: 2, Width: 9, RowHeight: 3, YLabel: "latency from intended send time (log scale)"}
	paced := where(rows, func(r results.Row) bool { return r.SettingFloat(results.Offered) > 0 && r.Curve(latencyCurve) != nil })
	figs := bySide(fig, paced, func(r results.Row) []report.XY {
		var pts []report.XY
		c := r.Curve(latencyCurve)
		for i, q := range c.X {
			// The chart spans p50 to p99.99; the maximum (q = 1) has no
			// place on it.
			if v := c.Y[i]; q >= 0.5 && q <= 0.99991 && finite(v) {
				pts = append(pts, report.XY{X: 1 / (1 - q), Y: max(v, drawnFloor)})
			}
		}
		return pts
	})
	x := report.Axis{Label: "percentile", Log: true, Min: 2, Max: 10000,
		Labels: []report.Tick{{At: 2, Label: "p50"}, {At: 10, Label: "p90"}, {At: 100, Label: "p99"}, {At: 1000, Label: "p99.9"}, {At: 10000, Label: "p99.99"}}}
	for _, f := range figs {
		for i := range f.Panels {
			f.Panels[i].X, f.Panels[i].Y = x, report.Axis{Log: true, Least: drawnFloor, Ticks: report.TicksNanos}
		}
	}
	return figs
}

// unpacedRows are the rows of runs with no offered rate, each goroutine
// sending as fast as it could, at a number of goroutines.
func unpacedRows(rows []results.Row) []results.Row {
	return where(rows, func(r results.Row) bool {
		return r.Setting(results.Offered) == "" && !r.Has(results.MostInWindow) && r.SettingInt(results.Goroutines) > 0
	})
}

// scalingFigures are a panel per workload of unpaced throughput, in
// millions of decisions a second, against goroutines, with procs of them
// running at once (in memory, and on Redis: bySide).
func scalingFigures(rows []results.Row, procs int) []report.Figure {
	procs = max(procs, 1)
	fig := report.Figure{Name: "scaling", Title: "Throughput under overload against goroutines (unpaced)",
		Caption: fmt.Sprintf("Each line is a limiter's decisions per second as more goroutines send as fast as they can, both axes logarithmic, with GOMAXPROCS %d. "+
			"Higher is better; a line that falls past %d goroutines is losing to contention, and the harness floor is a limiter that decides nothing.", procs, procs),
		Cols: 2, Width: 9, RowHeight: 3, YLabel: "decisions per second (log scale)"}
	figs := bySide(fig, unpacedRows(rows), func(r results.Row) []report.XY {
		if t := r.Get(results.Throughput); t > 0 && finite(t) {
			return []report.XY{{X: float64(r.SettingInt(results.Goroutines)), Y: t / 1e6}}
		}
		return nil
	})
	for _, f := range figs {
		againstGoroutines(f.Panels, report.Axis{Log: true, Least: 1e-6, Ticks: report.TicksMillions}) // one decision a second
	}
	return figs
}

// againstGoroutines gives panels of a value against goroutines their
// axes: y, and a log X axis marked at each number of goroutines run.
func againstGoroutines(panels []report.Panel, y report.Axis) {
	var ticks []report.Tick
	for _, pn := range panels {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				if !slices.ContainsFunc(ticks, func(t report.Tick) bool { return t.At == pt.X }) {
					ticks = append(ticks, report.Tick{At: pt.X, Label: fmt.Sprint(pt.X)})
				}
			}
		}
	}
	for i := range panels {
		panels[i].X = report.Axis{Label: "goroutines", Log: true, Least: 0.5, Labels: ticks}
		panels[i].Y = y
	}
}
