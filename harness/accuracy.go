package harness

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// simulatedMode measures each subject's decisions against the ideal's
// (the sliding window log, exact) on the same requests: in simulated time
// when the subject decides at explicit times, exactly and reproducibly;
// else by a replay in real time, time compressed (those rows are the
// realtime mode's, and its tables show them). A subject kept in a server
// decides a sample of the workload, and is checked decision for decision
// against the same algorithm in memory.
const simulatedModeName = "simulated"

var simulatedMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:   simulatedModeName,
			About:  "accuracy against the ideal (the sliding window log) on the same requests, in simulated time: exact and reproducible",
			Order:  10,
			Scored: true,
			Gates:  accuracyGates(results.CheckExact),
		},
		Heading: "Accuracy, in simulated time",
		Tables: []report.TableSpec{{
			Name:   "accuracy",
			Title:  "Accuracy against the ideal (the sliding window log on the same requests), in simulated time",
			Note:   accuracyNote + " Allocs per decision: heap allocations per decision over a further pass of the workload, after the first made the keys (the fewest of three passes).",
			Header: accuracyHeader, Left: 3,
			Cells: accuracyCells,
			Last:  report.Twins,
		}},
		Charts: accuracyCharts,
	},
	attacks: true,
	steps:   func(c Config, subjects []Subject) int { return 1 + len(subjects) },
	measure: measureAccuracy,
	flags: func(c *Config, fs *flag.FlagSet) {
		fs.Float64Var(&c.RealTimeAccuracyScale, "realtime-accuracy-scale", c.RealTimeAccuracyScale, "the most time is compressed when a limiter that takes no explicit time has its accuracy measured in real time (default 0.02)")
		fs.DurationVar(&c.RealTimeAccuracySpan, "realtime-accuracy-span", c.RealTimeAccuracySpan, "how much of each workload such a replay sends, from its start (default all of it, quick 8s)")
	},
}

// The accuracy tables' note and columns, in simulated time and in real.
const accuracyNote = "False allows: admitted where the ideal denied; false denies: the other way; as counts and per request. " +
	"Most in any W: the most one key had admitted in any interval of the window's length, over the limit (1.00 is exact; a fixed window reaches 2.00). " +
	"Judged as: the ideal's N per W; a bucket of capacity C refilled at R is judged as C per C/R."

var accuracyHeader = []string{"workload", "limiter", "judged as", "requests", "admitted", "ideal", "false allows", "false denies", "most in any W", "allocs per decision"}

func accuracyCells(r results.Row) []string {
	a, _ := r.AccuracyOf()
	allocs := ""
	if v, ok := r.Value(results.AllocsPerDecision); ok {
		allocs = report.Fixed(v, 2)
	}
	return []string{
		r.Workload, r.Limiter, report.Judged(r, limiters.Algorithm(r.Algorithm).IsBucket()),
		results.Count(r.Count(results.Decisions)), results.Count(a.Admitted), results.Count(a.Ideal),
		report.CountRate(a.FalseAllow, a.FalseAllowRate), report.CountRate(a.FalseDeny, a.FalseDenyRate),
		report.Fixed(a.MaxWindowRatio, 2), allocs,
	}
}

// accuracyGates are what compare compares of an accuracy row: its counts
// and the most in any W by check, its allocations against a tolerance.
func accuracyGates(check results.Check) []results.Gate {
	return []results.Gate{
		{Metric: results.Decisions, Label: "requests", Check: check},
		{Metric: results.Admitted, Label: "admitted", Check: check},
		{Metric: results.FalseAllows, Label: "false allows", Check: check},
		{Metric: results.FalseDenies, Label: "false denies", Check: check},
		{Metric: results.MostInWindow, Label: "most in any W", Check: check, Digits: 2},
		{Metric: results.AllocsPerDecision, Label: "allocs/decision", Check: results.CheckAllocs, Digits: 4},
	}
}

// accuracyCharts are the window edge and the accuracy bars, of the rows
// that measured accuracy against the ideal: this mode's, and those it
// replayed in real time (the realtime mode's), in f's order.
func accuracyCharts(f *results.File, _ []results.Row) []report.Figure {
	rows := where(f.Rows, func(r results.Row) bool {
		return (r.Mode == simulatedModeName || r.Mode == realTimeModeName) && r.Measured() && r.Has(results.MostInWindow)
	})
	limit, _ := limiters.ParseLimit(f.Meta.Setting("limit"))
	return []report.Figure{edgeFigure(rows, limit.Per.Seconds()), accuracyFigure(rows)}
}

// edgeFigure is a panel per row of one boundary attacker's admitted cost
// in the trailing window (the series inWindow, of a window of window
// seconds), the attacker and the windows those of the row's most in any
// W, with the limit N as a mark and that most over N (the table's) in the
// title: the line reaches the title's figure.
// A series that is empty, or whose times and counts do not pair up, is
// left out.
func edgeFigure(rows []results.Row, window float64) report.Figure {
	fig := report.Figure{Name: "edge", Title: "The window edge: what one boundary attacker had admitted in the last W",
		Caption: "The attackers spend a full quota just before and just after every window edge; each panel follows what one had admitted in the trailing window W, over the windows around the most any attacker had admitted in one W (in the title, over N, as the accuracy table says it), with the limit N as a grey dashed line. " +
			"A limiter the attack gets past rises towards 2N around an edge; an exact one never passes N.",
		Cols: 3, Width: 9, RowHeight: 2.5, YLabel: "requests admitted in the trailing window W", NoLegend: true}
	top := 0.0 // one scale for every panel, so that they compare
	for _, r := range rows {
		e := r.Curve(inWindow)
		if e == nil || r.Setting(results.JudgedN) == "" || len(e.X) == 0 || len(e.X) != len(e.Y) {
			continue
		}
		l, peak := report.Line{Name: r.Limiter}, 0.0
		for i, t := range e.X {
			if v := e.Y[i]; finite(t) && finite(v) {
				l.Points = append(l.Points, report.XY{X: t, Y: v})
				peak = max(peak, v)
			}
		}
		if len(l.Points) == 0 {
			continue
		}
		n := float64(r.SettingInt(results.JudgedN))
		title := r.Limiter
		if r.Mode == realTimeModeName {
			title += " (real time)"
		}
		if n > 0 {
			title = fmt.Sprintf("%s: most in any W %.2f×N", title, r.Get(results.MostInWindow))
		}
		top = max(top, 2.2*n, 1.1*peak)
		fig.Panels = append(fig.Panels, report.Panel{Title: title, Lines: []report.Line{l}, Steps: true, Marks: []report.Mark{{At: n}},
			X: report.Axis{Label: "seconds", Ticks: report.TicksWindows, Window: window}})
	}
	for i := range fig.Panels {
		fig.Panels[i].Y = report.Axis{Min: 0, Max: top}
	}
	return fig
}

// accuracyFigure is the false allow and false deny rates of rows, in
// percent of requests, by limiter (groups) and workload (series).
func accuracyFigure(rows []results.Row) report.Figure {
	fig := report.Figure{Name: "accuracy", Title: "Accuracy against the ideal, by limiter and workload",
		Caption: "Each bar is the share of a workload's requests that a limiter decided differently from the ideal (the sliding window log on the same requests): admitted where it denied (left) or denied where it admitted (right). " +
			"Shorter is better" + accuracyNotes(rows) + ".",
		Cols: 2, Width: 9}
	ws := workloadsOf(rows)
	allow, deny := report.Bars{Series: ws}, report.Bars{Series: ws}
	for _, r := range rows {
		g := slices.Index(allow.Groups, r.Limiter)
		if g < 0 {
			allow.Groups = append(allow.Groups, r.Limiter)
			allow.Values = append(allow.Values, make([]float64, len(ws)))
			deny.Values = append(deny.Values, make([]float64, len(ws)))
			g = len(allow.Groups) - 1
		}
		s := slices.Index(ws, r.Workload)
		allow.Values[g][s] = 100 * r.Get(results.FalseAllowRate)
		deny.Values[g][s] = 100 * r.Get(results.FalseDenyRate)
	}
	if len(allow.Groups) == 0 {
		return fig
	}
	deny.Groups = allow.Groups
	x := report.Axis{Label: "% of requests", Ticks: report.TicksPercent, Min: 0, Max: 1.1 * max(maxOf(allow.Values), maxOf(deny.Values), 1)} // one scale for both, so they compare
	fig.Panels = []report.Panel{{Title: "false allows", X: x, Bars: &allow}, {Title: "false denies", X: x, Bars: &deny}}
	return fig
}

// accuracyNotes says, for the accuracy chart's caption, which limiters
// decided as the ideal did everywhere and whose bars come from a replay in
// real time.
func accuracyNotes(rows []results.Row) string {
	var exact, realtime []string
	wrong := map[string]bool{}
	for _, r := range rows {
		wrong[r.Limiter] = wrong[r.Limiter] || r.Get(results.FalseAllows) > 0 || r.Get(results.FalseDenies) > 0
		if r.Mode == realTimeModeName && !slices.Contains(realtime, r.Limiter) {
			realtime = append(realtime, r.Limiter)
		}
	}
	for _, r := range rows {
		if !wrong[r.Limiter] && !slices.Contains(exact, r.Limiter) {
			exact = append(exact, r.Limiter)
		}
	}
	var notes []string
	if len(exact) > 0 {
		notes = append(notes, fmt.Sprintf("%s decided as the ideal did on every request", andList(exact)))
	}
	if slices.ContainsFunc(rows, results.Row.Outside) {
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

func measureAccuracy(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	l.p.step(fmt.Sprintf("the ideal on %s (%d requests)", w.Name, len(w.Arrivals)), 1)
	ideal, err := idealOf(w, l.c.Limit)
	if err != nil {
		return nil, err
	}
	var out []results.Row
	for _, s := range subjects {
		switch why := s.failed(); {
		case s.Floor:
			continue // it admits everything
		case s.NewAt == nil && s.New == nil:
			continue // a fleet only: the fleet mode measures its accuracy
		case why != "":
			out = append(out, skipped(s, w.Name, "", why))
			continue
		}
		l.p.step(fmt.Sprintf("accuracy of %s on %s", s.Name, w.Name), 1)
		r, err := l.accuracy(ctx, s, w, ideal)
		if err != nil {
			return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, w.Name, err)
		}
		id := row(s, w.Name, r.Mode)
		r.Limiter, r.Library, r.Algorithm, r.Backend, r.Workload = id.Limiter, id.Library, id.Algorithm, id.Backend, id.Workload
		if r.Has(results.MostInWindow) {
			r.SetInt(results.JudgedN, l.c.Limit.N)
			r.Set(results.JudgedPer, l.c.Limit.Per.String())
		}
		out = append(out, r)
	}
	return out, nil
}

// accuracy measures s on w, in the way s allows.
func (l *lab) accuracy(ctx context.Context, s Subject, w *workloads.Workload, ideal []bool) (results.Row, error) {
	switch {
	case s.OwnLimits != "":
		return results.Row{Skipped: "its limits are its own (" + s.OwnLimits + "), not the lab's N per W: replay a trace through it (ratelab replay --config) to see its decisions"}, nil
	case s.Remote != nil:
		return l.remoteAccuracy(s, w)
	case s.NewAt != nil:
		return l.simulated(s, w, ideal)
	}
	return l.replayed(ctx, s, w)
}

// simulated measures s deciding w at explicit times.
func (l *lab) simulated(s Subject, w *workloads.Workload, ideal []bool) (results.Row, error) {
	d, stop, err := s.NewAt(l.c.Limit)
	if err != nil {
		return results.Row{}, err
	}
	defer stop()
	start := time.Now()
	allowed := simulate(w, d)
	l.simTime += time.Since(start)
	l.simDecisions += int64(len(allowed))
	r := accuracyRow(simulatedModeName, w, allowed, ideal, l.c.Limit)
	r.Add(results.AllocsPerDecision, results.UnitAllocs, steadyAllocsAt(w, d, l.c.Limit.Per))
	return r, nil
}

// accuracyRow is the row, in mode, of a limiter that decided allowed on w,
// where the ideal decided ideal: its accuracy, and for the attack on a
// window edge, the picture of the edge.
func accuracyRow(mode string, w *workloads.Workload, allowed, ideal []bool, limit limiters.Limit) results.Row {
	r := results.Row{Mode: mode}
	r.Add(results.Decisions, results.UnitCount, float64(len(allowed)))
	r.SetAccuracy(judge(w, allowed, ideal, limit))
	if w.Name == "boundary-attack" {
		r.AddSeries(edgeSeries(w, allowed, limit.Per, edgeWindows))
	}
	return r
}

// replayed measures s, which takes no explicit time, by replaying w in real
// time, compressed.
func (l *lab) replayed(ctx context.Context, s Subject, w *workloads.Workload) (results.Row, error) {
	w = within(w, l.c.RealTimeAccuracySpan)
	scale := replayScale(w, l.c.RealTimeAccuracyScale)
	scaled := limiters.Limit{N: l.c.Limit.N, Per: max(time.Duration(float64(l.c.Limit.Per)*scale), 1)}
	lim, stop, err := s.New(scaled)
	if err != nil {
		return results.Row{}, err
	}
	defer stop()
	allowed, sent, lag, err := realTimeAccuracy(ctx, w, lim, scale)
	if err != nil {
		return results.Row{}, err
	}
	sentIdeal, err := idealOf(sent, l.c.Limit)
	if err != nil {
		return results.Row{}, err
	}
	allocs, err := steadyAllocs(ctx, w, lim)
	if err != nil {
		return results.Row{}, err
	}
	r := accuracyRow(realTimeModeName, sent, allowed, sentIdeal, l.c.Limit)
	r.Add(results.TimeScale, results.UnitRatio, scale)
	r.Add(sendLagP99, results.UnitNS, lag.latency().P99)
	r.Add(results.AllocsPerDecision, results.UnitAllocs, allocs)
	return r, nil
}

// remoteAccuracy measures s, kept in a server, on the sample of w it
// decides: against the ideal, and request for request against the same
// algorithm in memory. The sample's keys are shared out among senders
// (simulateByKey), so that the round trips overlap.
func (l *lab) remoteAccuracy(s Subject, w *workloads.Workload) (results.Row, error) {
	if s.NewAt == nil {
		return results.Row{Skipped: "accuracy not measured: it reads the server's clock and takes no explicit time, and a replay in real time, a round trip a request, would not fit the lab's time"}, nil
	}
	sw, note, skip := s.Remote.Sample(w)
	if skip != "" {
		return results.Row{Skipped: skip}, nil
	}
	ideal, err := idealOf(sw, l.c.Limit)
	if err != nil {
		return results.Row{}, err
	}
	twin, stopTwin, err := newInMemory(s.Algorithm, l.c.Limit)
	if err != nil {
		return results.Row{}, err
	}
	defer stopTwin()
	d, stop, err := s.NewAt(l.c.Limit)
	if err != nil {
		return results.Row{}, err
	}
	defer stop()
	allowed := simulateByKey(sw, d, min(sw.Params.Users, s.Remote.Senders))
	if why := s.failed(); why != "" {
		return results.Row{Skipped: why}, nil
	}
	differs := int64(0)
	for i, ok := range simulate(sw, twin) {
		if ok != allowed[i] {
			differs++
		}
	}
	r := accuracyRow(simulatedModeName, sw, allowed, ideal, l.c.Limit)
	r.Add(results.AllocsPerDecision, results.UnitAllocs, steadyAllocsAt(after(sw, 500, l.c.Limit.Per), d, l.c.Limit.Per))
	r.Add(results.DiffersFromMemory, results.UnitCount, float64(differs))
	r.Series, r.Note = nil, note // the edge is the algorithm's, pictured in memory
	return r, nil
}

// within returns w's arrivals in its first span of time (all of w when
// span is zero).
func within(w *workloads.Workload, span time.Duration) *workloads.Workload {
	if span <= 0 {
		return w
	}
	n, _ := slices.BinarySearchFunc(w.Arrivals, span, func(a workloads.Arrival, t time.Duration) int { return cmp.Compare(a.T, t) })
	if n == len(w.Arrivals) {
		return w
	}
	return &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: w.Arrivals[:n]}
}

// after returns w's first n requests moved past its end by whole windows
// of length, so that a limiter that has decided w meets them as it met w's
// (the keys made, time going on).
func after(w *workloads.Workload, n int, length time.Duration) *workloads.Workload {
	out := &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: slices.Clone(w.Arrivals[:min(n, len(w.Arrivals))])}
	if len(w.Arrivals) == 0 {
		return out
	}
	shift := ((w.Arrivals[len(w.Arrivals)-1].T+length)/length + 1) * length
	for i := range out.Arrivals {
		out.Arrivals[i].T += shift
	}
	return out
}

// simulateByKey is Simulate with w's users shared out among workers
// goroutines, each deciding its users' requests in order: the same
// decisions from a limiter whose keys do not share state, sooner when
// each decision waits on a server.
func simulateByKey(w *workloads.Workload, d limiters.Limiter, workers int) []bool {
	workers = max(workers, 1)
	allowed := make([]bool, len(w.Arrivals))
	keys := keysOf(w)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i, a := range w.Arrivals {
				if int(a.User)%workers == g {
					allowed[i] = decideAt(d, keys[a.User], time.Unix(0, int64(a.T)), int(a.N)).Allowed
				}
			}
		})
	}
	wg.Wait()
	return allowed
}

// replayRate is the most requests a second one sender keeps pace with in a
// real-time replay, with room to spare.
const replayRate = 1_000_000

// replayScale is how much a real-time replay of w compresses time: as much
// as most allows, but not so much that the workload's densest millisecond
// comes faster than one sender can send it, and never slower than real
// time.
func replayScale(w *workloads.Workload, most float64) float64 {
	peak, lo := 0, 0
	for hi, a := range w.Arrivals {
		for w.Arrivals[lo].T <= a.T-time.Millisecond {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	need := float64(peak) * 1000 / replayRate // the scale at which the peak is replayRate
	return min(max(most, need), 1)
}

// realTimeAccuracy sends w to l alone, one request at a time at its
// arrival time with time scaled by scale (0.02 runs a minute of arrivals in
// 1.2 seconds, against a limit whose window is scaled alike), and returns
// which requests were admitted, the workload as it was really sent (times
// in unscaled time, as the ideal must see them), and how late the sends
// were against their schedule. It is how the accuracy of a limiter that
// takes no explicit time is measured.
func realTimeAccuracy(ctx context.Context, w *workloads.Workload, l limiters.Limiter, scale float64) (allowed []bool, sent *workloads.Workload, lag hist, err error) {
	keys := keysOf(w)
	allowed = make([]bool, len(w.Arrivals))
	sent = &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: make([]workloads.Arrival, len(w.Arrivals))}
	runtime.GC()
	start := time.Now().Add(time.Millisecond)
	for i, a := range w.Arrivals {
		due := time.Duration(float64(a.T) * scale)
		if err := waitUntil(ctx, start.Add(due), false); err != nil {
			return nil, nil, lag, err
		}
		now := time.Since(start)
		d, err := l.AllowN(ctx, keys[a.User], int(a.N))
		if err != nil {
			return nil, nil, lag, err
		}
		lag.record(int64(now - due))
		allowed[i] = d.Allowed
		a.T = time.Duration(float64(now) / scale)
		sent.Arrivals[i] = a
	}
	return allowed, sent, lag, nil
}
