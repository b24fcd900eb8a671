package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ratelab/ratelab/results"
)

// A run's scores: each limiter's headline numbers across its workloads,
// which the scorecard shows and the picks choose from.

// score is one limiter's headline numbers across a run's workloads.
type score struct {
	name, algorithm string
	peer            bool
	// own is whether the limiter had limits of its own (the OwnLimits setting):
	// in the scorecard, never in the picks.
	own bool
	// outside is whether it kept its state in a server (Row.Outside):
	// picked for a limit many processes share, not against memory.
	outside bool
	// checked is how many of its decisions were compared with the same
	// algorithm's in memory (the DiffersFromMemory metric), differs how many of
	// them differed.
	checked, differs int64
	// worst is the most any key had in any window, over N, on the
	// workload where it was most; attack is that on the attacks on a
	// window edge, the epoch's or a key's own.
	worst, attack float64
	// attackedBy is the attack's workload that attack is of.
	attackedBy string
	// wrong is the share of decisions that differ from the ideal's
	// (false allows and false denies), averaged over workloads.
	wrong    float64
	accuracy int // workloads with accuracy measured
	// realtime is whether accuracy was measured in real time, not in
	// simulated time.
	realtime bool
	// tput is the geometric mean over workloads of decisions per second,
	// unpaced, at the goroutines the run's GOMAXPROCS allows.
	tput float64
	// p50 and p99 are the latency of paced runs on the workload where
	// each was longest.
	p50, p99 float64
	bytes    float64
}

// fullSpeed is the goroutine count whose unpaced throughput scores compare:
// GOMAXPROCS if the run swept it, else the most below it, else the fewest.
func fullSpeed(f *results.File, ms Modes) int {
	var gs []int
	for _, r := range f.Rows {
		if ms.scored(r.Mode) && unpaced(r) && !slices.Contains(gs, r.SettingInt(results.Goroutines)) {
			gs = append(gs, r.SettingInt(results.Goroutines))
		}
	}
	slices.Sort(gs)
	best := 0
	for _, g := range gs {
		if best == 0 || g <= f.Meta.GOMAXPROCS {
			best = g
		}
	}
	return best
}

// scores returns each limiter's score, in the order limiters first appear,
// and the harness floor's apart.
func scores(f *results.File, ms Modes) (out []*score, floor *score) {
	g := fullSpeed(f, ms)
	find := func(r results.Row) *score {
		if r.IsFloor() {
			if floor == nil {
				floor = &score{name: r.Limiter}
			}
			return floor
		}
		i := slices.IndexFunc(out, func(s *score) bool { return s.name == r.Limiter })
		if i < 0 {
			out = append(out, &score{name: r.Limiter, algorithm: r.Algorithm, peer: r.Library != results.LibraryRatelab, own: r.Setting(results.OwnLimits) != "", outside: r.Outside()})
			i = len(out) - 1
		}
		return out[i]
	}
	logs := map[*score][]float64{}
	for _, r := range f.Rows {
		if r.Skipped != "" || r.Limiter == "" || r.IsFloor() && r.Outside() || !ms.scored(r.Mode) {
			// A Redis floor decides nothing: it is read beside the rows,
			// not scored. The modes not scored (a fleet, the same limiter
			// as its Redis row, shared; ways of charging; a server's
			// failure modes) have tables and picks of their own.
			continue
		}
		s := find(r)
		switch {
		case r.Has(results.MostInWindow):
			most := r.Get(results.MostInWindow)
			s.worst = max(s.worst, most)
			if (r.Workload == "boundary-attack" || r.Workload == "anchored-attack") && most > s.attack {
				s.attack, s.attackedBy = most, r.Workload
			}
			s.wrong += r.Wrong()
			s.accuracy++
			s.realtime = s.realtime || r.Has(results.TimeScale)
			if d, ok := r.Value(results.DiffersFromMemory); ok {
				s.checked += r.Count(results.Decisions)
				s.differs += int64(d)
			}
		case r.Has(results.BytesPerUser):
			s.bytes = r.Get(results.BytesPerUser)
		case paced(r) && r.Has(results.Latency+".p50"):
			s.p50 = max(s.p50, r.Get(results.Latency+".p50"))
			s.p99 = max(s.p99, r.Get(results.Latency+".p99"))
		case unpaced(r) && r.SettingInt(results.Goroutines) == g && r.Get(results.Throughput) > 0:
			logs[s] = append(logs[s], math.Log(r.Get(results.Throughput)))
		}
	}
	for s, l := range logs {
		sum := 0.0
		for _, v := range l {
			sum += v
		}
		s.tput = math.Exp(sum / float64(len(l)))
	}
	for _, s := range out {
		if s.accuracy > 0 {
			s.wrong /= float64(s.accuracy)
		}
	}
	return out, floor
}

// Scorecard is a row per limiter of its headline numbers, each the
// summary of a table the run printed in full.
func Scorecard(f *results.File, ms Modes) Table {
	g := fullSpeed(f, ms)
	t := Table{
		Name:  "scorecard",
		Title: "Scorecard: each limiter's headline numbers",
		Note: "Most in any W: the most one key had admitted in any window, over the limit, on the workload where it was most. " +
			"Differs from ideal: false allows and false denies per request, averaged over the workloads. " +
			fmt.Sprintf("Decisions/s: unpaced, with %d goroutines, the geometric mean over the workloads. ", g) +
			"p50 and p99: paced latency on the workload where it was longest. Blank: not measured.",
		Header: []string{"limiter", "most in any W", "differs from ideal", fmt.Sprintf("decisions/s (%d goroutines)", g), "p50 paced", "p99 paced", "bytes per user"},
		Left:   1,
	}
	all, floor := scores(f, ms)
	if slices.ContainsFunc(all, func(s *score) bool { return s.outside }) {
		t.Note += " Limiters kept in Redis: each decision a round trip to the server, measured on a sample of each workload; " +
			"their bytes per user are the server's memory per key, not the process's."
	}
	if floor != nil {
		all = append(all, floor)
	}
	for _, s := range all {
		row := []string{s.name, "", "", "", "", "", ""}
		if s.accuracy > 0 {
			row[1] = strconv.FormatFloat(s.worst, 'f', 2, 64)
			row[2] = Percentage(s.wrong)
		}
		if s.tput > 0 {
			row[3] = Rate(s.tput)
		}
		if s.p50 > 0 {
			row[4], row[5] = Nanos(s.p50), Nanos(s.p99)
		}
		if s.bytes > 0 {
			row[6] = strconv.FormatFloat(s.bytes, 'f', 1, 64)
		}
		if slices.ContainsFunc(row[1:], func(c string) bool { return c != "" }) {
			t.Rows = append(t.Rows, row)
		}
	}
	// A column the run measured nothing for goes, header and all.
	for c := len(t.Header) - 1; c > 0; c-- {
		if !slices.ContainsFunc(t.Rows, func(r []string) bool { return r[c] != "" }) {
			t.Header = slices.Delete(t.Header, c, c+1)
			for i := range t.Rows {
				t.Rows[i] = slices.Delete(t.Rows[i], c, c+1)
			}
		}
	}
	return t
}

// Percentage formats a fraction as a percentage with three significant
// figures at most: 4.43%, 0.0503%.
func Percentage(v float64) string {
	if v == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*v, 'g', 3, 64) + "%"
}

// paced reports whether r sent its requests at an offered rate.
func paced(r results.Row) bool { return r.SettingFloat(results.Offered) > 0 }

// unpaced reports whether r measured decisions a second with goroutines
// sending as fast as they could.
func unpaced(r results.Row) bool {
	return r.Setting(results.Goroutines) != "" && !paced(r) && !r.Has(results.MostInWindow) && r.Has(results.Throughput)
}
