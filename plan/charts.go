package plan

import (
	"fmt"
	"strings"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// charts are the plan's: the envelope's and the frontier's, refusals
// against the limit, the clients' peaks with the suggestions marked, and
// the top clients' traffic over time against them.
func charts(_ *results.File, rows []results.Row) []report.Figure {
	out := curveCharts(rows)
	var points, suggestions, top []results.Row
	var peaks *results.Row
	span := 0.0
	for i, r := range rows {
		switch r.Setting(kind) {
		case kindPoint:
			points = append(points, r)
		case kindSuggest:
			suggestions = append(suggestions, r)
		case kindTop:
			top = append(top, r)
		case kindPeaks:
			peaks = &rows[i]
		case kindLog:
			span = r.Get(spanName)
		}
	}
	marks := suggestedMarks(suggestions)
	if len(points) > 0 {
		out = append(out, refusedChart(points, periodOf(rows)))
	}
	if peaks != nil {
		if s := peaks.Curve(cdfName); s != nil && len(s.X) > 0 {
			out = append(out, peaksChart(*peaks, s, marks))
		}
	}
	if f, ok := topChart(top, span, marks); ok {
		out = append(out, f)
	}
	return out
}

// refusedChart is what each limit of the sweep refuses, of the requests
// and of the clients, a line an algorithm.
func refusedChart(points []results.Row, period string) report.Figure {
	byAlgo := map[string]*[2]report.Line{}
	var order []string
	for _, r := range points {
		l, ok := byAlgo[r.Limiter]
		if !ok {
			l = &[2]report.Line{{Name: r.Limiter}, {Name: r.Limiter}}
			byAlgo[r.Limiter] = l
			order = append(order, r.Limiter)
		}
		x := r.SettingFloat(limitN)
		l[0].Points = append(l[0].Points, report.XY{X: x, Y: 100 * r.Get(refusedShare)})
		l[1].Points = append(l[1].Points, report.XY{X: x, Y: 100 * r.Get(clientsShare)})
	}
	var reqs, cls []report.Line
	for _, a := range order {
		reqs, cls = append(reqs, byAlgo[a][0]), append(cls, byAlgo[a][1])
	}
	x := report.Axis{Label: "limit: N per " + period, Log: true, Ticks: report.TicksPlain}
	return report.Figure{Name: "plan-refused", Title: "What each limit would have refused",
		Caption: "Each algorithm replayed the log at each limit of the sweep: the share of the requests it refuses (left) and of the clients it refuses at least once (right). Algorithms that decide this traffic alike draw one line over another; where the lines part, they differ.",
		Panels: []report.Panel{
			{Title: "requests refused", X: x, Y: report.Axis{Label: "% of requests", Min: 0}, Lines: reqs},
			{Title: "clients refused at least once", X: x, Y: report.Axis{Label: "% of clients", Min: 0}, Lines: cls},
		}, Cols: 2, Width: 10, RowHeight: 3.6}
}

// peaksChart is the share of clients whose peak is above X, on a log
// scale: the tail a limit is set against, which a linear one hides.
func peaksChart(peaks results.Row, s *results.Series, marks []report.Mark) report.Figure {
	least := 50 / max(peaks.Get(clientsCount), 1)
	line := report.Line{Name: "share of clients"}
	for i := range s.X {
		line.Points = append(line.Points, report.XY{X: max(s.X[i], 1), Y: max(100*(1-s.Y[i]), least)})
	}
	ms := []report.Mark{{Name: "--spare " + report.Percentage(peaks.Get(spareName)), At: 100 * peaks.Get(spareName)}}
	for _, m := range marks {
		m.OnX = true
		ms = append(ms, m)
	}
	return report.Figure{Name: "plan-peaks", Title: "The clients' peaks, and the limits suggested",
		Caption: fmt.Sprintf("The share of clients whose peak (the most they sent in any window of %s) is above X: those a sliding log of N = X refuses at least once, and about those the other algorithms do. The dashed lines are --spare and the limits a sweep suggested (with --limits), each for the algorithms it names.", peaks.Setting(periodSetting)),
		Panels: []report.Panel{{X: report.Axis{Label: "peak: requests in any " + peaks.Setting(periodSetting), Log: true, Ticks: report.TicksPlain},
			Y: report.Axis{Label: "% of clients above", Log: true, Least: least, Ticks: report.TicksPlain, Max: 100}, Lines: []report.Line{line}, Steps: true, Marks: ms}},
		Width: 10, RowHeight: 3.6, LegendWidth: 2.8}
}

// topChart is the clients hit hardest, each one's peak over the log
// against the limits suggested; none where no client has a series.
func topChart(top []results.Row, span float64, marks []report.Mark) (report.Figure, bool) {
	var panels []report.Panel
	for _, r := range top[:min(len(top), 6)] {
		s := r.Curve(seriesName)
		if s == nil {
			continue
		}
		line := report.Line{Name: "peak in a window"}
		for i := range s.X {
			line.Points = append(line.Points, report.XY{X: s.X[i] / 60, Y: s.Y[i]})
		}
		panels = append(panels, report.Panel{Title: r.Setting(keySetting), X: report.Axis{Label: "minutes from the log's start", Min: 0, Max: span / 60},
			Y: report.Axis{Label: "requests in a window", Min: 0, Ticks: report.TicksPlain}, Lines: []report.Line{line}, Steps: true, Marks: marks})
	}
	if len(panels) == 0 {
		return report.Figure{}, false
	}
	return report.Figure{Name: "plan-top", Title: "The clients hit hardest, over time",
		Caption: "Each client's peak in each stretch of the log (the most it sent in any window of the period within it), against the limits suggested (dashed): where the line is above one, that limit refuses it.",
		Panels:  panels, Cols: 2, Width: 11, RowHeight: 2.6, LegendWidth: 2.8}, true
}

// suggestedMarks are the limits suggested, one mark each, naming the
// algorithms it is suggested for.
func suggestedMarks(suggestions []results.Row) []report.Mark {
	var out []report.Mark
	names := map[float64][]string{}
	var order []float64
	for _, r := range suggestions {
		if r.Setting(foundSetting) != "true" {
			continue
		}
		n := r.SettingFloat(limitN)
		if _, ok := names[n]; !ok {
			order = append(order, n)
		}
		names[n] = append(names[n], short(r.Limiter))
	}
	for _, n := range order {
		out = append(out, report.Mark{Name: fmt.Sprintf("%v: %s", n, strings.Join(names[n], ", ")), At: n})
	}
	return out
}

// periodOf is the limits' period, as the log row says it.
func periodOf(rows []results.Row) string {
	for _, r := range rows {
		if r.Setting(kind) == kindLog {
			return r.Setting(periodSetting)
		}
	}
	return "period"
}

// plural is n things, as a person writes it.
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return results.Count(n) + " " + thing + "s"
}

// curveCharts are the envelope's and the frontier's charts: the clients'
// quantiles against the window's length and against the rate, on log
// axes, with the first clients the bucket suggested refuses drawn over
// them, and the suggestion marked.
func curveCharts(rows []results.Row) []report.Figure {
	cr := curveRowsOf(rows)
	var out []report.Figure
	if len(cr.env) > 1 {
		out = append(out, cr.envelopeChart())
	}
	if len(cr.front) > 1 {
		out = append(out, cr.frontierChart())
	}
	return out
}

// curveRows are the rows the curves' charts draw: the envelope's, the
// frontier's, the keys refused, the classes (groups of keys) and the
// bucket suggested.
type curveRows struct {
	env, front, caught, classes []results.Row
	policy                      *results.Row
}

func curveRowsOf(rows []results.Row) curveRows {
	var cr curveRows
	for i, r := range rows {
		switch r.Setting(kind) {
		case kindClass:
			if r.Setting(keySetting) == "" {
				cr.classes = append(cr.classes, r)
			}
		case kindEnv:
			cr.env = append(cr.env, r)
		case kindFront:
			cr.front = append(cr.front, r)
		case kindCaught:
			cr.caught = append(cr.caught, r)
		case kindPolicy:
			if r.Limiter == "bucket" {
				cr.policy = &rows[i]
			}
		}
	}
	return cr
}

// bands are each class a band: its median of series, and the least and
// most of its keys about it.
func (cr curveRows) bands(series string) []report.Line {
	var lines []report.Line
	for _, r := range cr.classes {
		mid, lo, hi := r.Curve(series), r.Curve(series+"_least"), r.Curve(series+"_most")
		if mid == nil || lo == nil || hi == nil || r.Setting(letterSetting) == "" {
			continue
		}
		// Wrapped: a class's name ("batches of about 150 at 9 a
		// second, hourly") ran past the legend's edge.
		l := report.Line{Name: results.Wrap(fmt.Sprintf("(%s) %s keys: %s", r.Setting(letterSetting), results.Count(r.Count(clientsCount)), r.Setting(shapeSetting)), 42)}
		for i := range mid.X {
			l.Points = append(l.Points, report.XY{X: mid.X[i], Y: max(mid.Y[i], 1), Lo: max(lo.Y[i], 1), Hi: max(hi.Y[i], 1)})
		}
		lines = append(lines, l)
	}
	return lines
}

// over are the keys refused, each a line of its series name, numbered.
func (cr curveRows) over(name string) []report.Line {
	var lines []report.Line
	for i, r := range cr.caught {
		s := r.Curve(name)
		if s == nil {
			continue
		}
		l := report.Line{Name: fmt.Sprintf("#%d %s", i+1, r.Setting(keySetting))}
		for i := range s.X {
			l.Points = append(l.Points, report.XY{X: s.X[i], Y: max(s.Y[i], 1)})
		}
		lines = append(lines, l)
	}
	return lines
}

// refusedWords say which keys the charts draw over the classes.
func (cr curveRows) refusedWords() string {
	if cr.policy != nil && cr.policy.Get(separatedName) != 1 {
		return "the first keys the bucket refuses (nothing stands apart: it spares all but --spare), numbered"
	}
	return "the first keys the bucket suggested refuses, numbered"
}

func (cr curveRows) envelopeChart() report.Figure {
	lines := append(cr.bands(classEnvelope), cr.over(envelopeName)...)
	return report.Figure{Name: "plan-envelope", Title: "The clients' envelope",
		Caption: "The most a key sent in any window of each length (log axes): each class of keys (Who sends what) as its median, with a bar from the least to the most of its keys, and " + cr.refusedWords() + ". A user who opens with a fan-out is steep, then flat; a batch is steep to its size, then flat to its period; one who sends steadily is a straight line.",
		Panels: []report.Panel{{X: report.Axis{Label: "window (seconds)", Log: true, Ticks: report.TicksPlain},
			Y: report.Axis{Label: "requests in the window", Log: true, Least: 1, Ticks: report.TicksPlain}, Lines: lines}},
		Width: 10, RowHeight: 4.2, LegendWidth: 3.4}
}

func (cr curveRows) frontierChart() report.Figure {
	lines := append(cr.bands(classBursts), cr.over(burstsName)...)
	var marks []report.Mark
	if policy := cr.policy; policy != nil {
		for _, r := range cr.front {
			if strings.HasPrefix(policy.Setting(policySetting), r.Setting(limitSetting)+" burst ") {
				marks = append(marks, report.Mark{Name: "suggested: " + policy.Setting(policySetting), OnX: true, At: r.Get(rateName)})
			}
		}
		if l, err := limiters.ParseLimit(policy.Setting(policySetting)); err == nil && l.Burst > 0 {
			marks = append(marks, report.Mark{At: float64(l.Burst)})
		}
	}
	return report.Figure{Name: "plan-frontier", Title: "The buckets' frontier",
		Caption: "At each rate, the least burst under which a bucket never refuses a key (log axes): each class of keys as its median, with a bar from the least to the most of its keys, and " + cr.refusedWords() + ". The dashed lines are the rate and the burst suggested: the classes below the burst, the keys refused above it; where the gap between them is widest is where the line goes.",
		Panels: []report.Panel{{X: report.Axis{Label: "rate (requests a second)", Log: true, Ticks: report.TicksPlain},
			Y: report.Axis{Label: "least burst", Log: true, Least: 1, Ticks: report.TicksPlain}, Lines: lines, Marks: marks}},
		Width: 10, RowHeight: 4.2, LegendWidth: 3.4}
}

// picks are the plan's answers, the first lines of its page: the bucket
// for every key, or the two windows, and the tier for addresses shared by
// many users; each with what it refuses.
func picks(_ *results.File, rows []results.Row) []report.Pick {
	var out []report.Pick
	for _, r := range rows {
		if r.Setting(kind) != kindPolicy {
			continue
		}
		refuses := fmt.Sprintf("It refuses %s clients, %s requests", results.Count(r.Count(clientsName)), refusedCell(r))
		if !r.Has(refusedName) {
			refuses = fmt.Sprintf("It refuses %s clients (the requests it refuses are not decided in a plan merged from shards)", results.Count(r.Count(clientsName)))
		}
		if who := r.Setting(caughtSetting); who != "" {
			refuses += ": " + strings.ReplaceAll(who, " ", ", ")
			if r.Count(clientsName) > int64(strings.Count(who, " ")+1) {
				refuses += ", …"
			}
		}
		switch r.Limiter {
		case "bucket":
			why := sentence(refuses)
			if r.Get(separatedName) == 1 {
				why = fmt.Sprintf("%s keys stand %s× apart from all the rest. %s", results.Count(r.Count(outName)), roundWords(r.Get(gapName)), why)
			} else {
				why = fmt.Sprintf("No key stands apart: it spares all but --spare (%s). %s", report.Percentage(r.Get(spareName)), why)
			}
			out = append(out, report.Pick{Need: "A bucket for every key", Limiter: r.Setting(policySetting), Why: why})
		case "windows":
			out = append(out, report.Pick{Need: "Or two windows, a short and a long", Limiter: r.Setting(policySetting), Why: refuses + ", as a sliding log."})
		case "shared keys", "pollers":
			why := "A tier of their own"
			if r.Get(scaleName) == 1 {
				why = "The bucket spares them as it is, the same tier"
			}
			need := "Keys shared by many users"
			if r.Limiter == "pollers" {
				need = "Steady pollers (monitors, health checks)"
			}
			out = append(out, report.Pick{Need: need, Limiter: fmt.Sprintf("%s (×%g)", r.Setting(policySetting), r.Get(scaleName)),
				Why: fmt.Sprintf("%s: %s keys, %s of the requests.", why, results.Count(r.Count(clientsCount)), report.Percentage(r.Get(shareName)))})
		}
	}
	return out
}

// sentence ends s with a full stop, unless it ends with an ellipsis.
func sentence(s string) string {
	if strings.HasSuffix(s, "…") {
		return s
	}
	return s + "."
}
