package harness

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// What the modes' charts (report.Figure, declared beside each mode's
// tables) share.

// workloadsOf lists the workloads of rows, in order.
func workloadsOf(rows []results.Row) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}

// linesBy is a line per limiter of rows, in the order limiters first
// appear, of the points each row gives, in order of X.
func linesBy(rows []results.Row, point func(results.Row) []report.XY) []report.Line {
	var out []report.Line
	for _, r := range rows {
		i := slices.IndexFunc(out, func(l report.Line) bool { return l.Name == r.Limiter })
		if i < 0 {
			out = append(out, report.Line{Name: r.Limiter})
			i = len(out) - 1
		}
		out[i].Points = append(out[i].Points, point(r)...)
	}
	for i := range out {
		slices.SortFunc(out[i].Points, func(a, b report.XY) int { return cmp.Compare(a.X, b.X) })
	}
	return out
}

// panelsByWorkload is a panel per workload of rows, titled by it, of a
// line per limiter through the points each row gives; a limiter with no
// point has no line, and a workload with no line no panel.
func panelsByWorkload(rows []results.Row, point func(results.Row) []report.XY) []report.Panel {
	var out []report.Panel
	for _, w := range workloadsOf(rows) {
		of := slices.DeleteFunc(slices.Clone(rows), func(r results.Row) bool { return r.Workload != w })
		lines := slices.DeleteFunc(linesBy(of, point), func(l report.Line) bool { return len(l.Points) == 0 })
		if len(lines) > 0 {
			out = append(out, report.Panel{Title: w, Lines: lines})
		}
	}
	return out
}

// bySide is fig with a panel per workload (panelsByWorkload), and with
// the limiters kept in Redis in a figure of their own beside it, named
// NAME-redis: a decision on Redis is a round trip, a thousand times one
// in memory, and on one chart the two families crowded each other, a
// limiter and its Redis twin in one colour, twenty lines in one legend.
// Without Redis rows it is fig alone.
func bySide(fig report.Figure, rows []results.Row, point func(results.Row) []report.XY) []report.Figure {
	if !slices.ContainsFunc(rows, results.Row.Outside) {
		fig.Panels = panelsByWorkload(rows, point)
		return []report.Figure{fig}
	}
	memory, redis := fig, fig
	memory.Title += ", in memory"
	memory.Panels = panelsByWorkload(where(rows, func(r results.Row) bool { return !r.Outside() }), point)
	redis.Name += "-redis"
	redis.Title += ", on Redis"
	redis.Panels = panelsByWorkload(where(rows, results.Row.Outside), point)
	return []report.Figure{memory, redis}
}

// where returns the rows of rows that ok reports true of.
func where(rows []results.Row, ok func(results.Row) bool) []results.Row {
	return slices.DeleteFunc(slices.Clone(rows), func(r results.Row) bool { return !ok(r) })
}

// finite reports whether v is a number, neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// maxOf is the largest of values, and 0.
func maxOf(values [][]float64) float64 {
	m := 0.0
	for _, row := range values {
		for _, v := range row {
			m = max(m, v)
		}
	}
	return m
}

// andList joins words as prose: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
