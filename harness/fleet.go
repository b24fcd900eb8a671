package harness

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// fleetConfig is how the fleet mode runs: Processes processes share one
// server, each sending from Goroutines goroutines in its real-time run,
// which lasts RealTime.
type fleetConfig struct {
	Processes  int
	Goroutines int
	RealTime   time.Duration
}

func (f fleetConfig) defaults(quick bool) fleetConfig {
	set(&f.Processes, 4)
	set(&f.Goroutines, 2)
	set(&f.RealTime, pick(quick, 200*time.Millisecond, 60*time.Millisecond))
	return f
}

// flags declares the fleet mode's settings on fs.
func (f *fleetConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&f.Processes, "fleet-processes", f.Processes, "the processes of each fleet, sharing one Redis (default 4)")
	fs.IntVar(&f.Goroutines, "fleet-goroutines", f.Goroutines, "the goroutines deciding in each process of a fleet (default 2)")
	fs.DurationVar(&f.RealTime, "fleet-realtime", f.RealTime, "how long each fleet run lasts (default 200ms, quick 60ms)")
}

func (f fleetConfig) validate() error {
	if f.Processes < 1 || f.Processes > 64 || f.Goroutines < 1 || f.Goroutines > 256 || f.RealTime <= 0 {
		return fmt.Errorf("harness: a fleet is 1 to 64 processes of 1 to 256 goroutines, for a positive time; got %d of %d for %v", f.Processes, f.Goroutines, f.RealTime)
	}
	return nil
}

// The routings of a fleet: each request to a process drawn at random, or
// every request of a key to the same process.
var routings = []string{"random", "sticky"}

// fleetMode runs each subject that can be a fleet (Subject.Fleet) as
// fleetConfig.Processes processes sharing its server, the workload's
// requests routed to them as a load balancer would: in simulated time on
// the sample of the workload the subject decides, for accuracy and round
// trips, and in real time for throughput, latency, round trips and the
// server's CPU.
const fleetModeName = "fleet"

var fleetMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:  fleetModeName,
			About: "processes sharing one Redis, requests routed as a load balancer would: round trips, accuracy and the server's CPU",
			Order: 60,
		},
		Heading: "A fleet sharing one Redis",
		Tables: []report.TableSpec{{
			Name:  "fleet",
			Title: "A fleet: processes sharing one Redis, each with a client and a limiter of its own",
			Note: "The workload's requests go to the processes as a load balancer would send them: each to a process at random, or every request of a key to the same one (sticky). " +
				"In simulated time, on the sample of the workload the Redis rows decide: round trips a decision as the clients counted them, accuracy against the ideal, " +
				"and differs: decisions unlike the same algorithm's in memory (0: exact). In real time, every process's goroutines sending the requests routed to it as fast as they can, " +
				"so keys are asked far beyond their limit: decisions a second, p99, round trips a decision, and the server's CPU a decision (INFO cpu). " +
				"Plain: one round trip a decision; batched: decisions gathered into batches; cached: Redis's denials remembered in each process until their retry-after (exact); " +
				"lease: each process leases units of a key's quota and admits from them for at most a lease time τ (approximate: at most C + (D+τ)·R in any interval D, where the exact limiter admits C + D·R).",
			Header: []string{"workload", "limiter", "routing", "round trips a decision, an admission", "false allows, denies", "most in any W", "differs",
				"real time: decisions a second", "p99", "round trips, server CPU a decision"},
			Left:  3,
			Cells: fleetCells,
		}},
		Picks: func(f *results.File, rows []results.Row) []report.Pick {
			var out []report.Pick
			if p, ok := overloadPick(rows); ok {
				out = append(out, p)
			}
			if p, ok := leasePick(rows); ok {
				out = append(out, p)
			}
			return out
		},
		Charts: func(_ *results.File, rows []results.Row) []report.Figure { return []report.Figure{fleetFigure(rows)} },
	},
	steps: func(c Config, subjects []Subject) int {
		n := 0
		for _, s := range subjects {
			if s.Fleet != nil {
				n += 2 * len(routings)
			}
		}
		return n
	},
	measure: measureFleet,
	flags:   func(c *Config, fs *flag.FlagSet) { c.Fleet.flags(fs) },
}

// The settings and metrics of a fleet's rows, beyond results' own.
const (
	processes = "processes"
	routing   = "routing"
	lease     = "lease"
	// tripsSimulated and trips are the round trips to Redis a decision,
	// as the clients counted them, in simulated time and in real time;
	// tripsPerAdmitted those in simulated time over the decisions that
	// admitted.
	tripsSimulated   = "round_trips_simulated"
	tripsPerAdmitted = "round_trips_per_admitted_simulated"
	trips            = "round_trips"
	// serverCPU is the server's CPU time a decision in the real-time run
	// (INFO cpu, user and system).
	serverCPU = "server_cpu"
)

// fleetCells are a fleet row's cells; two figures of a kind share a cell,
// one a line (the table had thirteen columns, 150 wide).
func fleetCells(r results.Row) []string {
	row := []string{r.Workload, r.Limiter, fmt.Sprintf("%s, %d", r.Setting(routing), r.SettingInt(processes)), "", "", "", ""}
	if a, ok := r.AccuracyOf(); ok {
		row[3] = report.Fixed(r.Get(tripsSimulated), 3)
		if a.Admitted > 0 {
			row[3] += "\n" + report.Fixed(r.Get(tripsPerAdmitted), 3)
		}
		row[4] = report.CountRate(a.FalseAllow, a.FalseAllowRate) + "\n" + report.CountRate(a.FalseDeny, a.FalseDenyRate)
		row[5] = report.Fixed(a.MaxWindowRatio, 2)
		if d, ok := r.Value(results.DiffersFromMemory); ok {
			row[6] = results.Count(int64(d))
		}
	}
	p99 := ""
	if v, ok := r.Value(results.Latency + ".p99"); ok {
		p99 = report.Nanos(v)
	}
	return append(row, report.Rate(r.Get(results.Throughput)), p99, report.Fixed(r.Get(trips), 3)+"\n"+report.Nanos(r.Get(serverCPU)))
}

// fleetFigure is a panel per workload of the fleet rows: a line per
// fleet through its routings, of the round trips a decision against the
// share of decisions unlike the ideal's (false allows and denies, in %),
// both in simulated time.
func fleetFigure(rows []results.Row) report.Figure {
	fig := report.Figure{Name: "fleet", Title: "A fleet sharing one Redis: round trips against accuracy",
		Caption: "Each line is a fleet of processes sharing one Redis, through its two routings (each request to a process at random, or a key's to the same one): " +
			"the round trips to Redis a decision against the share of decisions unlike the ideal's, in simulated time. " +
			"Left is cheaper; lower is closer to the ideal. Exact fleets decide alike, so they sit at one height: the denial cache only moves left. " +
			"Leases move further left and off that height (approximate); the token bucket's lease fleet decides as GCRA's, the same limit: one line, named for both.",
		Cols: 2, Width: 10, RowHeight: 2.6, LegendWidth: 2.1}
	rows = where(rows, func(r results.Row) bool { return r.Has(results.MostInWindow) })
	fig.Panels = panelsByWorkload(rows, func(r results.Row) []report.XY {
		return []report.XY{{X: r.Get(tripsSimulated), Y: 100 * r.Wrong()}}
	})
	for i, pn := range fig.Panels {
		top := 0.0
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				if finite(pt.Y) {
					top = max(top, pt.Y)
				}
			}
		}
		top = max(1.15*top, 1)
		fig.Panels[i].X = report.Axis{Label: "round trips a decision", Ticks: report.TicksPlain, Min: 0, Max: 1.05}
		fig.Panels[i].Y = report.Axis{Label: "decisions unlike the ideal's (%)", Ticks: report.TicksPlain, Min: -top / 40, Max: top} // room below for a point at 0
	}
	return fig
}

// overloadPick is the pick for a fleet under overload: of the fleets that
// decided on their samples as the same algorithm in memory does, the one
// that made the fewest round trips a decision in real time on the
// workload where the fleets made the most, set against the one that made
// the most there.
func overloadPick(rows []results.Row) (report.Pick, bool) {
	type fleet struct {
		name                   string
		trips, tput, cpu       map[string]float64
		checked, differs, runs int64
	}
	var fleets []*fleet
	var workloads []string
	for _, r := range rows {
		i := slices.IndexFunc(fleets, func(x *fleet) bool { return x.name == r.Limiter })
		if i < 0 {
			fleets = append(fleets, &fleet{name: r.Limiter, trips: map[string]float64{}, tput: map[string]float64{}, cpu: map[string]float64{}})
			i = len(fleets) - 1
		}
		x := fleets[i]
		x.runs++
		// The routing that made the most round trips: the worse of the two.
		if t := r.Get(trips); t >= x.trips[r.Workload] {
			x.trips[r.Workload], x.tput[r.Workload], x.cpu[r.Workload] = t, r.Get(results.Throughput), r.Get(serverCPU)
		}
		if d, ok := r.Value(results.DiffersFromMemory); ok {
			x.checked += r.Count(results.Decisions)
			x.differs += int64(d)
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	if len(fleets) < 2 {
		return report.Pick{}, false
	}
	// The workload where a plain round trip a decision costs the most
	// decisions: the one most over its limit, where caching denials pays.
	var best *fleet
	w := ""
	for _, wl := range workloads {
		for _, x := range fleets {
			if x.differs == 0 && x.checked > 0 && (best == nil || x.trips[wl] < best.trips[w]) {
				best, w = x, wl
			}
		}
	}
	if best == nil {
		return report.Pick{}, false
	}
	worst := fleets[0]
	for _, x := range fleets {
		if x.trips[w] > worst.trips[w] {
			worst = x
		}
	}
	why := fmt.Sprintf("A fleet of processes sharing one Redis, sent to as fast as they could go: on %s it made %.3f round trips a decision against %s's %.3f, "+
		"%s against %s, and the server spent %s of CPU a decision against %s. On samples of the workloads in simulated time its %s decisions were the same algorithm's in memory, every one.",
		w, best.trips[w], worst.name, worst.trips[w], report.Rate(best.tput[w]), report.Rate(worst.tput[w]), report.Nanos(best.cpu[w]), report.Nanos(worst.cpu[w]), results.Count(best.checked))
	return report.Pick{Need: "A fleet under attack or overload", Limiter: best.name, Why: why}, true
}

// leasePick is the pick for a fleet that may admit a little more than the
// limit for fewer round trips: of the fleets that lease quota, the one
// with the fewest round trips an admitted request, in simulated time, on
// its worse routing of the workload where it made the most; with its
// worst error against the ideal, beside the exact fleets'.
func leasePick(rows []results.Row) (report.Pick, bool) {
	type fleet struct {
		name  string
		trips map[string]float64 // a workload's worse routing
		most  float64            // the most in any W, anywhere
		wrong float64            // the largest share unlike the ideal
	}
	var leases []*fleet
	exactWrong := 0.0
	for _, r := range rows {
		a, ok := r.AccuracyOf()
		if !ok {
			continue
		}
		wrong := r.Wrong()
		if r.Setting(lease) == "" {
			exactWrong = max(exactWrong, wrong)
			continue
		}
		i := slices.IndexFunc(leases, func(x *fleet) bool { return x.name == r.Limiter })
		if i < 0 {
			leases = append(leases, &fleet{name: r.Limiter, trips: map[string]float64{}})
			i = len(leases) - 1
		}
		x := leases[i]
		x.trips[r.Workload] = max(x.trips[r.Workload], r.Get(tripsPerAdmitted))
		x.most, x.wrong = max(x.most, a.MaxWindowRatio), max(x.wrong, wrong)
	}
	// extreme is the workload of trips with the most (or, !most, the
	// fewest) round trips, the first by name of equals.
	extreme := func(trips map[string]float64, most bool) (string, float64) {
		w, t := "", math.Inf(1)
		if most {
			t = math.Inf(-1)
		}
		for wl, v := range trips {
			if most && v > t || !most && v < t || v == t && wl < w {
				w, t = wl, v
			}
		}
		return w, t
	}
	var best *fleet
	bestWorst := math.Inf(1)
	for _, x := range leases {
		if _, t := extreme(x.trips, true); t < bestWorst {
			best, bestWorst = x, t
		}
	}
	if best == nil || exactWrong == 0 && best.wrong == 0 {
		return report.Pick{}, false
	}
	w, t := extreme(best.trips, true)
	bw, bt := extreme(best.trips, false)
	why := fmt.Sprintf("Each process leases units of a key's quota and admits from them for at most the lease time: %.3f round trips an admitted request on %s, %.3f on %s, in simulated time (the worse routing of each). "+
		"The price is accuracy: up to %.1f%% of decisions unlike the ideal's, against %.1f%% for the exact fleets, and at most %.2f×N in any window (the bound: C + (W+τ)·R).",
		bt, bw, t, w, 100*best.wrong, 100*exactWrong, best.most)
	return report.Pick{Need: "A fleet that may admit a little more for far fewer round trips", Limiter: best.name, Why: why}, true
}
