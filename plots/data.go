// Package plots draws the lab's results (gonum/plot) and writes the report
// that ties the charts and tables together.
//
// Each chart's data comes from a pure function of a results.File (the
// functions in this file, golden-tested), so a chart is true to the JSON
// beside it; drawing is separate (charts.go).
package plots

import (
	"fmt"
	"math"
	"slices"

	"github.com/ratelab/ratelab/results"
)

// XY is a point.
type XY struct{ X, Y float64 }

// Line is one limiter's curve.
type Line struct {
	Name   string
	Points []XY
}

// Panel is one small multiple: a title and its lines.
type Panel struct {
	Title string
	Lines []Line
	// Limit, if not zero, is drawn as a horizontal line.
	Limit float64
}

// Bars are values by group (rows) and series (columns): Values[g][s].
type Bars struct {
	Groups, Series []string
	Values         [][]float64
	// Overlay draws a group's series over each other rather than side
	// by side: for series that never both have a value in one group.
	Overlay bool
}

// Floor is the least value drawn on a log axis: a zero is drawn there.
const Floor = 0.1

// workloadsOf lists the workloads f has runs for, in run order.
func workloadsOf(f *results.File, keep func(results.Row) bool) []string {
	var out []string
	for _, r := range f.Rows {
		if keep(r) && !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}

// linesBy groups points by limiter, in the order limiters first appear.
func linesBy(f *results.File, keep func(results.Row) bool, point func(results.Row) []XY) []Line {
	var out []Line
	for _, r := range f.Rows {
		if !keep(r) {
			continue
		}
		i := slices.IndexFunc(out, func(l Line) bool { return l.Name == r.Limiter })
		if i < 0 {
			out = append(out, Line{Name: r.Limiter})
			i = len(out) - 1
		}
		out[i].Points = append(out[i].Points, point(r)...)
	}
	for i := range out {
		slices.SortFunc(out[i].Points, func(a, b XY) int {
			switch {
			case a.X < b.X:
				return -1
			case a.X > b.X:
				return 1
			}
			return 0
		})
	}
	return out
}

func paced(r results.Row) bool {
	return r.Mode == "realtime" && r.SettingFloat(results.Offered) > 0 && r.Curve("latency_curve") != nil
}

func unpaced(r results.Row) bool {
	return r.Mode == "realtime" && r.Setting(results.Offered) == "" && !r.Has(results.MostInWindow) && r.Measured()
}

// Latency is a panel per workload of the paced runs' latency: X is
// 1/(1-q) (2 for the median, 100 for p99, 10,000 for p99.99), Y the
// latency in nanoseconds.
func Latency(f *results.File) []Panel {
	var out []Panel
	for _, w := range workloadsOf(f, paced) {
		lines := linesBy(f, func(r results.Row) bool { return paced(r) && r.Workload == w }, func(r results.Row) []XY {
			var pts []XY
			c := r.Curve("latency_curve")
			for i, q := range c.X {
				// The plot spans p50 to p99.99; the maximum (q = 1)
				// has no place on it.
				if v := c.Y[i]; q >= 0.5 && q <= 0.99991 && !math.IsNaN(v) && !math.IsInf(v, 0) {
					pts = append(pts, XY{X: 1 / (1 - q), Y: max(v, Floor)})
				}
			}
			return pts
		})
		lines = slices.DeleteFunc(lines, func(l Line) bool { return len(l.Points) == 0 })
		if len(lines) > 0 {
			out = append(out, Panel{Title: w, Lines: lines})
		}
	}
	return out
}

// Edge is a panel per limiter of one boundary attacker's admitted cost in
// the trailing window, with the limit N as a line. A series that is empty,
// or whose times and counts do not pair up, is left out.
func Edge(f *results.File) []Panel {
	var out []Panel
	for _, r := range f.Rows {
		e := r.Curve("in_window")
		if e == nil || r.Setting(results.JudgedN) == "" || len(e.X) == 0 || len(e.X) != len(e.Y) {
			continue
		}
		l := Line{Name: r.Limiter}
		for i, t := range e.X {
			if v := e.Y[i]; finite(t, t) && finite(v, v) {
				l.Points = append(l.Points, XY{X: t, Y: v})
			}
		}
		if len(l.Points) == 0 {
			continue
		}
		title := r.Limiter
		if r.Mode == "realtime" {
			title += " (real time)"
		}
		out = append(out, Panel{Title: title, Lines: []Line{l}, Limit: float64(r.SettingInt(results.JudgedN))})
	}
	return out
}

// Accuracy is the false allow and false deny rates, in percent of
// requests, by limiter (groups) and workload (series).
func Accuracy(f *results.File) (allow, deny Bars) {
	// The llm runs are judged on another workload's terms: a chart of
	// their own.
	has := func(r results.Row) bool { return r.Has(results.MostInWindow) && r.Mode != "llm" && r.Mode != "fleet" }
	ws := workloadsOf(f, has)
	allow.Series, deny.Series = ws, ws
	for _, r := range f.Rows {
		if !has(r) {
			continue
		}
		g := slices.Index(allow.Groups, r.Limiter)
		if g < 0 {
			allow.Groups = append(allow.Groups, r.Limiter)
			deny.Groups = append(deny.Groups, r.Limiter)
			allow.Values = append(allow.Values, make([]float64, len(ws)))
			deny.Values = append(deny.Values, make([]float64, len(ws)))
			g = len(allow.Groups) - 1
		}
		s := slices.Index(ws, r.Workload)
		allow.Values[g][s] = 100 * r.Get(results.FalseAllowRate)
		deny.Values[g][s] = 100 * r.Get(results.FalseDenyRate)
	}
	return allow, deny
}

// Memory is the bytes per user of each limiter, one series.
func Memory(f *results.File) Bars {
	b := Bars{Series: []string{"bytes per user"}}
	for _, r := range f.Rows {
		if r.Mode == "memory" && r.Measured() {
			b.Groups = append(b.Groups, r.Limiter)
			b.Values = append(b.Values, []float64{r.Get(results.BytesPerUser)})
		}
	}
	return b
}

// Scaling is a panel per workload of unpaced throughput, in millions of
// decisions a second, against goroutines.
func Scaling(f *results.File) []Panel {
	return perGoroutines(f, func(r results.Row) (float64, bool) {
		t := r.Get(results.Throughput)
		return t / 1e6, t > 0 && finite(t, t)
	})
}

// Contention is a panel per workload of lock wait per decision, in
// nanoseconds (a zero drawn at Floor), against goroutines. A run whose
// wait was not measured has no point.
func Contention(f *results.File) []Panel {
	return perGoroutines(f, func(r results.Row) (float64, bool) {
		if w, ok := r.Value("lock_wait"); ok && w >= 0 && finite(w, w) {
			return max(w, Floor), true
		}
		return 0, false
	})
}

// perGoroutines is a panel per workload of y against goroutines, for the
// unpaced runs y has a value for.
func perGoroutines(f *results.File, y func(results.Row) (float64, bool)) []Panel {
	var out []Panel
	for _, w := range workloadsOf(f, unpaced) {
		lines := linesBy(f, func(r results.Row) bool { return unpaced(r) && r.Workload == w && r.SettingInt(results.Goroutines) > 0 }, func(r results.Row) []XY {
			if v, ok := y(r); ok {
				return []XY{{X: float64(r.SettingInt(results.Goroutines)), Y: v}}
			}
			return nil
		})
		lines = slices.DeleteFunc(lines, func(l Line) bool { return len(l.Points) == 0 })
		if len(lines) > 0 {
			out = append(out, Panel{Title: w, Lines: lines})
		}
	}
	return out
}

// finite reports whether min and max are numbers, in order: a range
// something can be drawn on.
func finite(min, max float64) bool {
	return !math.IsNaN(min) && !math.IsNaN(max) && !math.IsInf(min, 0) && !math.IsInf(max, 0) && min <= max
}

// Fleet is a panel per workload of the fleet runs: a line per fleet
// through its routings, of the round trips a decision against the share
// of decisions unlike the ideal's (false allows and denies, in %), both in
// simulated time.
func Fleet(f *results.File) []Panel {
	fleet := func(r results.Row) bool {
		return r.Mode == "fleet" && r.Has(results.MostInWindow) && r.Measured()
	}
	var out []Panel
	for _, w := range workloadsOf(f, fleet) {
		lines := linesBy(f, func(r results.Row) bool { return fleet(r) && r.Workload == w }, func(r results.Row) []XY {
			return []XY{{X: r.Get("round_trips_simulated"), Y: 100 * r.Wrong()}}
		})
		out = append(out, Panel{Title: w, Lines: lines})
	}
	return out
}

// OutagePanel is an outage run over time: the shares of its answers in
// each bin, stacked, and of the decisions the server made without Redis.
type OutagePanel struct {
	Title string
	// Layers are the shares (%) of the requests sent in each bin answered
	// 200, 429, 503, and otherwise or not at all, in that order: each
	// point at the middle of its bin.
	Layers []Line
	// Failed is the share (%) of each bin's decisions the server made
	// without Redis (by when its metrics counted them).
	Failed Line
	// Away and Back are when Redis was taken away and given back, in
	// seconds from the start; Bin is the width of a bin.
	Away, Back, Bin float64
}

// OutageLayers name an outage panel's layers.
var OutageLayers = []string{"200 served", "429 limited", "503 refused", "other, or no answer"}

// Outage is a panel per outage run, in run order: by how Redis was taken
// away, then by failure mode.
func Outage(f *results.File) []OutagePanel {
	var out []OutagePanel
	for _, r := range f.Rows {
		ok := r.Curve("bins.ok")
		if r.Mode != "outage" || !r.Measured() || ok == nil || len(ok.Y) == 0 {
			continue
		}
		fail := "fail " + r.Setting("failure")
		if n := r.SettingInt("fleet"); n > 0 {
			fail = fmt.Sprintf("fall back (fleet of %d)", n)
		}
		kind := r.Setting("fault")
		how := map[string]string{"refused": "down (refused)", "unanswered": "silent (no answer)"}[kind]
		if how == "" {
			how = kind
		}
		bin := r.Get("bin")
		pn := OutagePanel{Title: fmt.Sprintf("Redis %s, %s", how, fail), Away: r.Get("away"), Back: r.Get("back"), Bin: bin}
		pn.Layers = make([]Line, len(OutageLayers))
		for i, name := range OutageLayers {
			pn.Layers[i].Name = name
		}
		pn.Failed.Name = "decided without Redis"
		at := func(name string, i int) float64 {
			if s := r.Curve(name); s != nil && i < len(s.Y) {
				return s.Y[i]
			}
			return 0
		}
		failed := r.Curve("failed")
		for i := range ok.Y {
			layers := []float64{at("bins.ok", i), at("bins.limited", i), at("bins.unavailable", i), at("bins.other", i) + at("bins.errors", i)}
			n := layers[0] + layers[1] + layers[2] + layers[3]
			if n == 0 {
				continue
			}
			x := (float64(i) + 0.5) * bin
			for j, k := range layers {
				pn.Layers[j].Points = append(pn.Layers[j].Points, XY{x, 100 * k / n})
			}
			if failed != nil && i < len(failed.Y) {
				pn.Failed.Points = append(pn.Failed.Points, XY{x, min(100*failed.Y[i]/n, 100)})
			}
		}
		out = append(out, pn)
	}
	return out
}

// LLM is, per limiter (group) and way of charging (series), of the llm
// runs: the most actual tokens one key had in any window, over the limit
// (most), the actual tokens admitted, in % of the ideal's (tokens), and
// the share of decisions unlike the ideal's, in % (wrong).
func LLM(f *results.File) (most, tokens, wrong Bars) {
	var runs []results.Row
	for _, r := range f.Rows {
		if r.Mode == "llm" && r.Has(results.MostInWindow) && r.Measured() {
			runs = append(runs, r)
		}
	}
	series := func(r results.Row) string {
		if e := r.SettingInt("estimate"); e > 0 {
			return fmt.Sprintf("%s (%d)", r.Setting("charge"), e)
		}
		return r.Setting("charge")
	}
	for _, r := range runs {
		if !slices.Contains(most.Groups, r.Limiter) {
			most.Groups = append(most.Groups, r.Limiter)
		}
		if !slices.Contains(most.Series, series(r)) {
			most.Series = append(most.Series, series(r))
		}
	}
	wrong.Groups, wrong.Series = slices.Clone(most.Groups), slices.Clone(most.Series)
	tokens.Groups, tokens.Series = slices.Clone(most.Groups), slices.Clone(most.Series)
	for _, b := range []*Bars{&most, &tokens, &wrong} {
		b.Values = make([][]float64, len(most.Groups))
		for g := range b.Values {
			b.Values[g] = make([]float64, len(most.Series))
		}
	}
	for _, r := range runs {
		g, s := slices.Index(most.Groups, r.Limiter), slices.Index(most.Series, series(r))
		most.Values[g][s] = r.Get(results.MostInWindow)
		wrong.Values[g][s] = 100 * r.Wrong()
		if ideal := r.Get("ideal_tokens"); ideal > 0 {
			tokens.Values[g][s] = 100 * r.Get("tokens") / ideal
		}
	}
	return most, tokens, wrong
}
