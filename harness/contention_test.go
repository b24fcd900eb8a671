package harness

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// An unpaced run is split into rounds of 25ms or more, three to five.
func TestContentionRounds(t *testing.T) {
	for _, tt := range []struct {
		run, round time.Duration
		rounds     int
	}{
		{250 * time.Millisecond, 50 * time.Millisecond, 5}, // the full lab
		{25 * time.Millisecond, 25 * time.Millisecond, 3},  // the quick lab: each round as long as the run
		{60 * time.Millisecond, 25 * time.Millisecond, 3},
		{time.Second, 200 * time.Millisecond, 5},
	} {
		n, rt := contentionRounds(realTimeRun{Goroutines: 8, Duration: tt.run})
		if n != tt.rounds || rt.Duration != tt.round || rt.Goroutines != 8 {
			t.Errorf("contentionRounds(%v) = %d of %v, want %d of %v", tt.run, n, rt.Duration, tt.rounds, tt.round)
		}
	}
}

// The lock wait of an unpaced run is the median of its rounds', each kept;
// a paced run's is its repeats' wait over their decisions.
func TestSetLockWait(t *testing.T) {
	each := []realTimeOutcome{
		{Decisions: 1000, LockWait: 0},
		{Decisions: 1000, LockWait: 5 * time.Millisecond}, // one park behind a preempted holder: 5µs a decision
		{Decisions: 2000, LockWait: 2 * time.Microsecond},
		{Decisions: 1000, LockWait: 0},
		{Decisions: 500, LockWait: 10 * time.Microsecond},
	}
	var r results.Row
	setLockWait(&r, realTimeRun{Goroutines: 8, Duration: time.Second}, each)
	rounds := r.Curve(lockWaitRounds)
	if w := r.Get(lockWaitNS); w != 1 || rounds == nil || !slices.Equal(rounds.Y, []float64{0, 5000, 1, 0, 20}) {
		t.Errorf("unpaced: lock wait %v, rounds %v; want the median 1ns of 0, 5000, 1, 0, 20", w, rounds)
	}
	var paced results.Row
	setLockWait(&paced, realTimeRun{Goroutines: 1, Rate: 1000, Duration: time.Second}, each)
	if w := paced.Get(lockWaitNS); paced.Curve(lockWaitRounds) != nil || w != float64(5012*time.Microsecond)/5500 {
		t.Errorf("paced: lock wait %v, rounds %v; want the wait over the decisions", w, paced.Curve(lockWaitRounds))
	}
}

// hog is a limiter that holds one lock for a while each decision.
type hog struct{ mu sync.Mutex }

func (h *hog) AllowN(context.Context, string, int) (limiters.Decision, error) {
	h.mu.Lock()
	for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
	}
	h.mu.Unlock()
	return limiters.Decision{Allowed: true}, nil
}

func (h *hog) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	return h.AllowN(ctx, r.Key, r.N)
}

func (h *hog) Close() error { return nil }

// A limiter in the process is run in rounds, each on a limiter of its
// own, and a lock that goroutines queue on shows; one kept in a server is
// run once.
func TestRealTimeRounds(t *testing.T) {
	w := smallWorkload(t, 10)
	made := 0
	s := Subject{Name: "hog", Library: results.LibraryRatelab, Backend: results.BackendMemory,
		New: func(limiters.Limit) (limiters.Limiter, func(), error) { made++; return &hog{}, func() {}, nil }}
	l := &lab{c: Config{LatencyRuns: 3}} // a full lab's: up to widestRounds
	r, err := l.realTime(context.Background(), s, w, limiters.PerSecond(10), realTimeRun{Goroutines: 4, Duration: 25 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rounds := r.Curve(lockWaitRounds)
	if rounds == nil || made != len(rounds.Y) || len(rounds.Y) < 3 || len(rounds.Y) > widestRounds {
		t.Fatalf("%d limiters made, rounds %v; want 3 to %d rounds, a limiter each", made, rounds, widestRounds)
	}
	// Three rounds, unless they spread wide: then more, until they do
	// not or there are widestRounds.
	n := len(rounds.Y)
	if n > 3 && !wide(rounds.Y[:n-1]) || n < widestRounds && wide(rounds.Y) {
		t.Errorf("%d rounds %v: wide after %d (%v), after all (%v)", n, rounds.Y, n-1, wide(rounds.Y[:n-1]), wide(rounds.Y))
	}
	// Four goroutines on one lock held 20µs a decision, two running at
	// once: they queue on it, and a round shows the wait. How long is the
	// machine's to say (a busy host's scheduler can run a whole 25ms round
	// with no two goroutines at the lock at once), so the test asks only
	// that some round saw a wait and that the row's figure is the median.
	t.Logf("lock wait a decision, by round: %v ns", rounds.Y)
	if w := r.Get(lockWaitNS); w != median(rounds.Y) || slices.Max(rounds.Y) == 0 && runtime.GOMAXPROCS(0) > 1 {
		t.Errorf("lock wait %vns a decision, rounds %v; want the median, and a round that waited", w, rounds.Y)
	}
	made = 0
	s.Remote = &remote{Server: "Redis"}
	r, err = l.realTime(context.Background(), s, w, limiters.PerSecond(10), realTimeRun{Goroutines: 4, Duration: 25 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 || r.Curve(lockWaitRounds) != nil || !r.Has(lockWaitNS) {
		t.Errorf("kept in a server: %d limiters made, rounds %v; want one run", made, r.Curve(lockWaitRounds))
	}
}

// The contention chart draws the limiters in the process, each point the
// median of its rounds with the rounds but the lowest and highest about
// it, on a floor of 1ns; a Redis row, and a wait not measured, have no
// point.
func TestContentionFigure(t *testing.T) {
	row := func(limiter, library, backend string, g int, rounds ...float64) results.Row {
		r := results.Row{Mode: realTimeModeName, Workload: "uniform", Limiter: limiter, Library: library, Backend: backend}
		r.SetInt(results.Goroutines, g)
		if len(rounds) > 0 {
			r.Add(lockWaitNS, results.UnitNS, median(rounds))
			r.AddSeries(results.Series{Name: lockWaitRounds, Unit: results.UnitNS, Y: rounds})
		}
		return r
	}
	rows := []results.Row{
		row("gcra", results.LibraryRatelab, results.BackendMemory, 1, 0, 0, 0, 0, 0),
		row("gcra", results.LibraryRatelab, results.BackendMemory, 2, 0.5, 0, 3, 0, 40),
		row("gcra", results.LibraryRatelab, results.BackendMemory, 8, 900, 0, 2000, 1500, 30000),
		row("gcra", results.LibraryRatelab, results.BackendMemory, 64), // not measured
		row("x/time/rate", "golang.org/x/time v0.16.0", results.BackendMemory, 8, 100, 200, 300),
		row("gcra (redis)", results.LibraryRatelab, results.BackendRedis, 1, 5000),
	}
	fig := contentionFigure(rows, 2)
	if len(fig.Panels) != 1 {
		t.Fatalf("%d panels, want one, for uniform", len(fig.Panels))
	}
	pn := fig.Panels[0]
	want := []report.Line{
		{Name: "gcra", Points: []report.XY{{X: 1, Y: 1}, {X: 2, Y: 1, Lo: 1, Hi: 3}, {X: 8, Y: 1500, Lo: 900, Hi: 2000}}},
		{Name: "x/time/rate", Points: []report.XY{{X: 8, Y: 200, Lo: 100, Hi: 300}}}, // three rounds: all of them
	}
	if !slices.EqualFunc(pn.Lines, want, func(a, b report.Line) bool { return a.Name == b.Name && slices.Equal(a.Points, b.Points) }) {
		t.Errorf("lines %+v, want %+v", pn.Lines, want)
	}
	if len(pn.Marks) != 1 || !pn.Marks[0].OnX || pn.Marks[0].At != 2 || pn.Y.Least != 1 || !pn.Y.Log {
		t.Errorf("marks %+v, y axis %+v; want GOMAXPROCS marked at 2, a log axis from 1ns", pn.Marks, pn.Y)
	}
	for _, say := range []string{"median of 3 to 5 rounds", "kept in Redis are left out", "GOMAXPROCS 2", "preempted"} {
		if !strings.Contains(fig.Caption, say) {
			t.Errorf("the caption does not say %q: %s", say, fig.Caption)
		}
	}
}

// Rounds spread wide when their middle (all of them, under five) spans
// more than wideSpread times, over the chart's floor; the table's cell
// says the median and, under it, that span.
func TestWideRounds(t *testing.T) {
	for _, c := range []struct {
		waits []float64
		wide  bool
	}{
		{[]float64{0, 0, 0}, false},
		{[]float64{0.1, 0, 0.9}, false}, // all on the floor
		{[]float64{10, 20, 30}, false},
		{[]float64{2, 10, 50}, true},
		{[]float64{0, 0, 3}, true},
		{[]float64{1, 10, 12, 15, 400}, false}, // the lowest and highest left out
		{[]float64{1, 2, 12, 15, 400}, true},
	} {
		if got := wide(c.waits); got != c.wide {
			t.Errorf("wide(%v) = %v, want %v", c.waits, got, c.wide)
		}
	}
	r := results.Row{}
	r.Add(lockWaitNS, results.UnitNS, 1500)
	r.AddSeries(results.Series{Name: lockWaitRounds, Unit: results.UnitNS, Y: []float64{900, 0, 2000, 1500, 30000}})
	if got, want := lockWaitCell(r), report.Nanos(1500)+"\n"+report.Nanos(900)+"–"+report.Nanos(2000); got != want {
		t.Errorf("lockWaitCell = %q, want %q", got, want)
	}
	r = results.Row{}
	r.Add(lockWaitNS, results.UnitNS, 0)
	r.AddSeries(results.Series{Name: lockWaitRounds, Unit: results.UnitNS, Y: []float64{0, 0, 0}})
	if got := lockWaitCell(r); got != "0" {
		t.Errorf("lockWaitCell of rounds all 0 = %q, want 0 with no range", got)
	}
}

// The latency and scaling charts put the limiters kept in Redis in panels
// of their own, each beside its workload's in memory.
func TestPanelsBySide(t *testing.T) {
	row := func(workload, limiter, backend string, g int, tput float64) results.Row {
		r := results.Row{Mode: realTimeModeName, Workload: workload, Limiter: limiter, Library: results.LibraryRatelab, Backend: backend}
		r.SetInt(results.Goroutines, g)
		r.Add(results.Throughput, results.UnitPerS, tput)
		return r
	}
	rows := []results.Row{
		row("uniform", "gcra", results.BackendMemory, 1, 2e7),
		row("uniform", "gcra (redis)", results.BackendRedis, 1, 2e4),
		row("bursty", "gcra", results.BackendMemory, 1, 2e7),
		row("bursty", "gcra (redis)", results.BackendRedis, 1, 2e4),
		row("many-users", "gcra", results.BackendMemory, 1, 1e7),
	}
	var titles []string
	for _, fig := range scalingFigures(rows, 2) {
		redis := strings.HasSuffix(fig.Name, "-redis")
		if redis != strings.HasSuffix(fig.Title, ", on Redis") {
			t.Errorf("figure %s titled %q", fig.Name, fig.Title)
		}
		for _, pn := range fig.Panels {
			titles = append(titles, fig.Name+": "+pn.Title)
			for _, l := range pn.Lines {
				if strings.Contains(l.Name, "(redis") != redis {
					t.Errorf("%s, panel %q draws %s", fig.Name, pn.Title, l.Name)
				}
			}
		}
	}
	want := []string{"scaling: uniform", "scaling: bursty", "scaling: many-users", "scaling-redis: uniform", "scaling-redis: bursty"}
	if !slices.Equal(titles, want) {
		t.Errorf("panels %q, want %q", titles, want)
	}
	var memoryOnly []string
	for _, fig := range scalingFigures(rows[4:], 2) {
		for _, pn := range fig.Panels {
			memoryOnly = append(memoryOnly, fig.Name+": "+pn.Title)
		}
	}
	if !slices.Equal(memoryOnly, []string{"scaling: many-users"}) {
		t.Errorf("without Redis rows, panels %q, want [scaling: many-users]", memoryOnly)
	}
}
