package harness

import (
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"strconv"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// Lock contention, as the real-time mode measures it: the time goroutines
// spent parked on locks while the unpaced runs sent, a decision, each
// point the median of several rounds.

const (
	// lockWaitNS is the time goroutines were blocked on locks, a
	// decision: for an unpaced run in the process, the median of its
	// rounds'.
	lockWaitNS = "lock_wait"
	// lockWaitRounds are the lock wait a decision of each round of an
	// unpaced run, their spread.
	lockWaitRounds = "lock_wait_rounds"
)

// The unpaced run of a limiter in the process is split into rounds, as
// many as it holds leastRound (leastRounds to mostRounds) and each at
// least that long: a full lab's 250ms run is five rounds of 50ms, the
// quick lab's 25ms three of 25ms. A parked goroutine is rare and counted
// one time in eight (the runtime samples), so that one round's wait can
// be a hundred times the next round's. A round spans a few of the
// scheduler's 10ms time slices, so that goroutines beyond the processors
// get to run.
//
// A run whose rounds spread wide (wideRounds) is given more rounds, up
// to widestRounds, so that its median is not one preemption's.
const (
	leastRounds, mostRounds = 3, 5
	widestRounds            = 9
	leastRound              = 25 * time.Millisecond
)

// wideSpread is the spread of a run's middle rounds (middleRounds) over
// which wideRounds calls them wide.
const wideSpread = 4

// wideRounds reports whether the lock waits of the rounds each spread
// wide: the highest of the middle rounds more than wideSpread times the
// lowest, and over the chart's floor (a spread among waits it draws on
// the floor is nobody's).
func wideRounds(each []realTimeOutcome) bool {
	waits := make([]float64, len(each))
	for i, o := range each {
		waits[i] = perDecision(o.LockWait, o.Decisions)
	}
	return wide(waits)
}

// wide reports whether the lock waits a decision of a run's rounds spread
// wide, as wideRounds says.
func wide(waits []float64) bool {
	lo, hi, ok := middleRounds(&results.Series{Y: waits})
	return ok && hi > contentionFloor && hi > wideSpread*lo
}

// contentionRounds are how many rounds the unpaced run rt is, and each
// round.
func contentionRounds(rt realTimeRun) (int, realTimeRun) {
	n := min(max(int(rt.Duration/leastRound), leastRounds), mostRounds)
	rt.Duration = max(rt.Duration/time.Duration(n), leastRound)
	return n, rt
}

// setLockWait records on r the lock wait a decision of the runs each of
// rt: for the rounds of an unpaced run, the median of the rounds' and
// each round's (lockWaitRounds); for a paced run, whose repeats are for
// latency, the wait of them all over their decisions.
func setLockWait(r *results.Row, rt realTimeRun, each []realTimeOutcome) {
	if rt.Rate > 0 || len(each) < 2 {
		var wait time.Duration
		var decisions int64
		for _, o := range each {
			wait += o.LockWait
			decisions += o.Decisions
		}
		r.Add(lockWaitNS, results.UnitNS, perDecision(wait, decisions))
		return
	}
	rounds := results.Series{Name: lockWaitRounds, Unit: results.UnitNS}
	for _, o := range each {
		rounds.Y = append(rounds.Y, perDecision(o.LockWait, o.Decisions))
	}
	r.Add(lockWaitNS, results.UnitNS, median(rounds.Y))
	r.AddSeries(rounds)
}

// perDecision is a lock wait over the decisions made in it, in
// nanoseconds.
func perDecision(wait time.Duration, decisions int64) float64 {
	return float64(wait) / float64(max(decisions, 1))
}

// lockWaitCell is the contention table's cell: the median of the rounds'
// waits, under it the range of the rounds but the lowest and highest
// (middleRounds), where they differ.
func lockWaitCell(r results.Row) string {
	w, ok := r.Value(lockWaitNS)
	if !ok {
		return ""
	}
	cell := waitNanos(w)
	if lo, hi, ok := middleRounds(r.Curve(lockWaitRounds)); ok && waitNanos(lo) != waitNanos(hi) {
		cell += "\n" + waitNanos(lo) + "–" + waitNanos(hi)
	}
	return cell
}

// waitNanos is a lock wait a decision, to a tenth of a nanosecond under
// ten.
func waitNanos(w float64) string {
	switch {
	case w == 0:
		return "0"
	case w < 0.1:
		return "<0.1ns"
	case w < 10:
		return strconv.FormatFloat(w, 'f', 1, 64) + "ns"
	default:
		return report.Nanos(w)
	}
}

// contentionFloor is the least lock wait a decision the contention chart
// draws, in nanoseconds: a park the runtime counts adds eight times its
// wait, some microseconds, so that a round of a hundred thousand
// decisions or more whose goroutines parked a few times, or never, is
// under it.
const contentionFloor = 1.0

// contentionFigure is a panel per workload of the lock wait a decision of
// the limiters in the process, in nanoseconds, against goroutines, with
// procs of them running at once: each point the median of its rounds,
// its range the rounds but the lowest and the highest (middleRounds). A
// wait at or under contentionFloor is drawn there; a run whose wait was
// not measured has no point.
func contentionFigure(rows []results.Row, procs int) report.Figure {
	procs = max(procs, 1)
	inProcess := where(unpacedRows(rows), func(r results.Row) bool { return !r.Outside() })
	fig := report.Figure{Name: "contention", Title: "Lock wait per decision against goroutines (unpaced, limiters in memory)",
		Caption: fmt.Sprintf("Each point is the time a limiter's goroutines spent parked on a lock, a decision, as the runtime counts it (one park in eight, times eight)%s; %gns or less, none too, is drawn on the floor. "+
			"ratelab's limiters are solid, the peers dashed; limiters kept in Redis are left out, their wait being the Redis client's pool of connections, not a limiter's lock (the contention table has them). "+
			"With GOMAXPROCS %d, %d goroutines contend as a server's cores would; more queue for a core, and a lock shows only when its holder is preempted inside it and the others park behind it for the rest of a time slice: "+
			"a line that rises there is a lock held for more of each decision, or by more of the goroutines, and the few such preemptions a round make the bars wide. Spinning before parking is never counted.",
			roundsSaid(inProcess), contentionFloor, procs, procs),
		Cols: 2, Width: 9, RowHeight: 3, YLabel: "lock wait per decision (log scale)"}
	fig.Panels = panelsByWorkload(inProcess, func(r results.Row) []report.XY {
		w, ok := r.Value(lockWaitNS)
		if !ok || w < 0 || !finite(w) {
			return nil
		}
		pt := report.XY{X: float64(r.SettingInt(results.Goroutines)), Y: max(w, contentionFloor)}
		if lo, hi, ok := middleRounds(r.Curve(lockWaitRounds)); ok && hi > contentionFloor {
			pt.Lo, pt.Hi = max(lo, contentionFloor), hi
		}
		return []report.XY{pt}
	})
	// At least three powers of ten, so that a panel whose waits are all
	// on the floor does not zoom into nothing.
	againstGoroutines(fig.Panels, report.Axis{Log: true, Least: contentionFloor, Ticks: report.TicksNanos, Min: contentionFloor, Max: 1000 * contentionFloor})
	for i, pn := range fig.Panels {
		// Room either side for the lines' bars, which plots draws apart.
		lo, hi := math.Inf(1), 0.0
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
			}
		}
		fig.Panels[i].X.Min, fig.Panels[i].X.Max = lo/1.5, hi*1.5
		fig.Panels[i].Marks = []report.Mark{{Name: fmt.Sprintf("GOMAXPROCS (%d)", procs), OnX: true, At: float64(procs)}}
	}
	return fig
}

// roundsSaid says what a point of the contention chart of rows is
// beyond one run's wait: the median of how many rounds, and what its bar
// spans.
func roundsSaid(rows []results.Row) string {
	least, most := math.MaxInt, 0
	for _, r := range rows {
		if c := r.Curve(lockWaitRounds); c != nil {
			least, most = min(least, len(c.Y)), max(most, len(c.Y))
		}
	}
	if most < 2 {
		return ""
	}
	n := fmt.Sprint(most)
	if least < most {
		n = fmt.Sprintf("%d to %d", least, most) // wide rounds were given more
	}
	switch {
	case least >= 5:
		return fmt.Sprintf(": the median of %s rounds, its bar spanning all but the lowest and the highest", n)
	case most >= 5:
		return fmt.Sprintf(": the median of %s rounds, its bar spanning all but the lowest and the highest of five or more, all of fewer", n)
	}
	return fmt.Sprintf(": the median of %s rounds, its bar spanning them all", n)
}

// middleRounds is the range of the rounds of a run but its lowest and its
// highest (all of them, if fewer than five), and whether there are two
// rounds or more, all finite.
func middleRounds(rounds *results.Series) (lo, hi float64, ok bool) {
	if rounds == nil || len(rounds.Y) < 2 || slices.ContainsFunc(rounds.Y, func(v float64) bool { return !finite(v) }) {
		return 0, 0, false
	}
	v := slices.Sorted(slices.Values(rounds.Y))
	if len(v) >= 5 {
		v = v[1 : len(v)-1]
	}
	return v[0], v[len(v)-1], true
}

const lockWaitMetric = "/sync/mutex/wait/total:seconds"

func lockWait() time.Duration {
	s := []metrics.Sample{{Name: lockWaitMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * 1e9)
}
