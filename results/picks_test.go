package results_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

func TestPicksGolden(t *testing.T) {
	var b bytes.Buffer
	if err := report.WritePicks(&b, fixture(), modes); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "picks.txt", b.Bytes())
}

// pick returns the pick for need, failing if there is none.
func pick(t *testing.T, f *results.File, need string) report.Pick {
	t.Helper()
	picks, _ := report.Picks(f, modes)
	i := slices.IndexFunc(picks, func(p report.Pick) bool { return p.Need == need })
	if i < 0 {
		t.Fatalf("no pick for %q in %+v", need, picks)
	}
	return picks[i]
}

// TestPicksFollowTheNumbers changes the numbers and expects the picks to
// change with them: nothing is decided ahead of the run.
func TestPicksFollowTheNumbers(t *testing.T) {
	f := fixture()
	if p := pick(t, f, "Least memory per user"); p.Limiter != "gcra" || !strings.Contains(p.Why, "21.0 bytes") || !strings.Contains(p.Why, "x/time/rate, held 151.8") {
		t.Errorf("least memory: %+v", p)
	}
	if p := pick(t, f, "Never more than N in any window"); p.Limiter != "sliding-log" {
		t.Errorf("exact: %+v", p)
	}
	if p := pick(t, f, "Avoid where clients can time the window edge"); p.Limiter != "fixed-window, go-limiter" || !strings.Contains(p.Why, "fixed-window admitted 2.00×N to an attacker at the epoch's window edges (boundary-attack) and go-limiter 1.78×N (boundary-attack)") {
		t.Errorf("edge: %+v", p)
	}
	if p := pick(t, f, "Most decisions per second under overload"); p.Limiter != "gcra" || !strings.Contains(p.Why, "45.10M/s with 2 goroutines") || !strings.Contains(p.Why, "x/time/rate, made 10.50M/s (4.3 times fewer)") {
		t.Errorf("throughput: %+v", p)
	}

	for i := range f.Rows {
		r := &f.Rows[i]
		switch {
		case r.Mode == "memory" && r.Limiter == "gcra":
			set(r, results.BytesPerUser, 400)
		case r.Has(results.MostInWindow) && r.Limiter == "gcra":
			set(r, results.MostInWindow, 1) // now exact, and faster than the log
		case r.Has(results.MostInWindow) && (r.Limiter == "fixed-window" || r.Limiter == "go-limiter"):
			set(r, results.MostInWindow, 1.02)
		case r.Mode == "realtime" && r.Limiter == "x/time/rate":
			set(r, results.Throughput, 9e7)
		}
	}
	if p := pick(t, f, "Least memory per user"); p.Limiter != "x/time/rate" {
		t.Errorf("least memory, gcra at 400 bytes: %+v", p)
	}
	if p := pick(t, f, "Never more than N in any window"); p.Limiter != "gcra" || !strings.Contains(p.Why, "Also exact: sliding-log") {
		t.Errorf("exact, gcra exact too: %+v", p)
	}
	if p := pick(t, f, "Most decisions per second under overload"); p.Limiter != "x/time/rate" {
		t.Errorf("throughput, x/time/rate at 90M/s: %+v", p)
	}
	if picks, _ := report.Picks(f, modes); slices.ContainsFunc(picks, func(p report.Pick) bool { return strings.HasPrefix(p.Need, "Avoid") }) {
		t.Errorf("with no limiter over 1.05×N at the edge, nothing should be named to avoid: %+v", picks)
	}

	for i := range f.Rows {
		change(&f.Rows[i], results.MostInWindow, func(v float64) float64 { return max(v, 1.1) })
	}
	if p := pick(t, f, "Never more than N in any window"); p.Limiter != "" || !strings.Contains(p.Why, "the closest, fixed-window, let a key have 1.10×N") {
		t.Errorf("exact, with no limiter exact: %+v", p)
	}

	if picks, versus := report.Picks(&results.File{}, modes); len(picks) != 0 || len(versus) != 0 {
		t.Errorf("an empty run picks %+v and compares %v", picks, versus)
	}
}

// TestScorecardIsTrue checks the scorecard's cells against the rows.
func TestScorecardIsTrue(t *testing.T) {
	sc := report.Scorecard(fixture(), modes)
	row := func(name string) []string {
		i := slices.IndexFunc(sc.Rows, func(r []string) bool { return r[0] == name })
		if i < 0 {
			t.Fatalf("no scorecard row for %s", name)
		}
		return sc.Rows[i]
	}
	// gcra: 1.01 at the edge; 0.5% + 0.483% wrong; 45.1M/s at 2
	// goroutines (GOMAXPROCS); p50 136ns and p99 994ns paced; 21.04 B.
	if got, want := strings.Join(row("gcra"), "|"), "gcra|1.01|0.983%|45.10M/s|136ns|994ns|21.0"; got != want {
		t.Errorf("gcra's row: %s, want %s", got, want)
	}
	// The floor's one row is at 1 goroutine, not the 2 the scorecard
	// compares: it has nothing to show, and no row.
	if slices.ContainsFunc(sc.Rows, func(r []string) bool { return r[0] == floorName }) {
		t.Errorf("the floor has a row with nothing in it")
	}

	// Given the fastest numbers of all, the floor gets a row but is never
	// picked: it decides nothing.
	f := fixture()
	f.Rows = append(f.Rows,
		realTime(floor("", "uniform"), 2, 0, 1e9, results.Quantiles{}, 1e9),
		realTime(floor("", "uniform"), 1, 200_000, 200_000, results.Quantiles{P50: 1, P90: 1, P99: 1, P999: 1, Max: 1}, 200_000))
	if !slices.ContainsFunc(report.Scorecard(f, modes).Rows, func(r []string) bool { return r[0] == floorName && r[3] == "1000.00M/s" }) {
		t.Errorf("the floor's row is missing or wrong: %v", report.Scorecard(f, modes).Rows)
	}
	picks, _ := report.Picks(f, modes)
	for _, p := range picks {
		if p.Limiter == floorName {
			t.Errorf("the harness floor, which decides nothing, is picked: %+v", p)
		}
	}
	if p := pick(t, f, "Fastest decision at a steady rate"); !strings.Contains(p.Why, "the harness alone, deciding nothing, took 1ns") {
		t.Errorf("the latency pick does not compare with the floor: %+v", p)
	}
}

// TestPicksTiesAndTails checks what a pick says about the limiters close
// behind it and about latency tails against the harness floor.
func TestPicksTiesAndTails(t *testing.T) {
	unpaced := func(limiter string, g int, tput float64) results.Row {
		return realTime(measured("", "uniform", limiter, ratelab, limiter), g, 0, 1000, results.Quantiles{}, tput)
	}
	paced := func(r results.Row, p50, p99 float64) results.Row {
		return realTime(r, 1, 1000, 1000, results.Quantiles{P50: p50, P99: p99}, 1000)
	}
	f := &results.File{Meta: results.Meta{GOMAXPROCS: 2}, Rows: []results.Row{
		unpaced("gcra", 2, 30e6), unpaced("fixed-window", 2, 28e6), unpaced("sliding-log", 2, 20e6), unpaced("gcra", 1, 99e6),
		paced(measured("", "uniform", "gcra", ratelab, "gcra"), 150, 40e3), paced(measured("", "uniform", "fixed-window", ratelab, "fixed-window"), 140, 20e3),
		paced(measured("", "uniform", "x/time/rate", "golang.org/x/time", "token-bucket"), 120, 9e6), paced(floor("", "uniform"), 60, 30e3),
	}}

	p := pick(t, f, "Most decisions per second under overload")
	if p.Limiter != "gcra" || !strings.Contains(p.Why, "30.00M/s with 2 goroutines") || !strings.Contains(p.Why, "too close to call on a shared machine: fixed-window.") {
		t.Errorf("throughput: %+v (want gcra at 2 goroutines, GOMAXPROCS, with fixed-window within 10%% and sliding-log not)", p)
	}
	p = pick(t, f, "Fastest decision at a steady rate")
	if p.Limiter != "x/time/rate" {
		t.Errorf("latency: %+v, want the peer, whose median is least", p)
	}
	for _, want := range []string{"120ns", "the harness alone, deciding nothing, took 60ns", "The harness floor's p99 was 30.0µs; over three times that: x/time/rate (9.0ms)."} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("latency: %q lacks %q", p.Why, want)
		}
	}
	set(&f.Rows[6], results.Latency+".p99", 50e3)
	if p := pick(t, f, "Fastest decision at a steady rate"); !strings.Contains(p.Why, "No limiter's p99 was over three times the harness floor's 30.0µs") {
		t.Errorf("latency, every tail near the floor's: %+v", p)
	}
}
