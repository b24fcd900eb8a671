package results

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// score is one limiter's headline numbers across a run's workloads.
type score struct {
	name, algorithm string
	peer            bool
	// own is whether the limiter had limits of its own (Run.OwnLimits):
	// in the scorecard, never in the picks.
	own bool
	// outside is whether it kept its state in a server (Run.Outside):
	// picked for a limit many processes share, not against memory.
	outside bool
	// checked is how many of its decisions were compared with the same
	// algorithm's in memory (Run.DiffersFromMemory), differs how many of
	// them differed.
	checked, differs int64
	// worst is the most any key had in any window, over N, on the
	// workload where it was most; attack is that on the attacks on a
	// window edge, the epoch's or a key's own.
	worst, attack float64
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

// isFloor reports whether r measured the harness floor, which decides
// nothing (in a file from before Run.Floor, the run with no algorithm that
// is not a limiter of someone's own, in memory).
func isFloor(r Run) bool {
	return !r.Outside() && (r.Floor || r.Algorithm == "" && r.Backend != "memory")
}

// fullSpeed is the goroutine count whose unpaced throughput scores compare:
// GOMAXPROCS if the run swept it, else the most below it, else the fewest.
func fullSpeed(f *File) int {
	var gs []int
	for _, r := range f.Runs {
		if r.Mode == "realtime" && r.OfferedRate == 0 && r.Accuracy == nil && !slices.Contains(gs, r.Goroutines) {
			gs = append(gs, r.Goroutines)
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
func scores(f *File) (out []*score, floor *score) {
	g := fullSpeed(f)
	find := func(r Run) *score {
		if isFloor(r) {
			if floor == nil {
				floor = &score{name: r.Limiter}
			}
			return floor
		}
		i := slices.IndexFunc(out, func(s *score) bool { return s.name == r.Limiter })
		if i < 0 {
			out = append(out, &score{name: r.Limiter, algorithm: r.Algorithm, peer: r.Library != "ratelab", own: r.OwnLimits != "", outside: r.Outside()})
			i = len(out) - 1
		}
		return out[i]
	}
	logs := map[*score][]float64{}
	for _, r := range f.Runs {
		if r.SkippedBecause != "" || r.Limiter == "" || r.Floor && r.Outside() || r.Mode == "fleet" || r.Mode == "llm" || r.Mode == "outage" {
			// A Redis floor decides nothing: it is read beside the rows,
			// not scored. A fleet is the same limiter as its Redis row,
			// shared; the llm runs judge ways of charging, the outage
			// runs a server's failure modes: their tables and picks are
			// their own.
			continue
		}
		s := find(r)
		switch {
		case r.Accuracy != nil:
			a := r.Accuracy
			s.worst = max(s.worst, a.MaxWindowRatio)
			if r.Workload == "boundary-attack" || r.Workload == "anchored-attack" {
				s.attack = max(s.attack, a.MaxWindowRatio)
			}
			s.wrong += a.FalseAllowRate + a.FalseDenyRate
			s.accuracy++
			s.realtime = s.realtime || r.Mode == "realtime"
			if d := r.DiffersFromMemory; d != nil {
				s.checked += r.Decisions
				s.differs += *d
			}
		case r.Mode == "memory":
			s.bytes = r.BytesPerUser
		case r.Mode == "realtime" && r.OfferedRate > 0 && r.LatencyNS != nil:
			s.p50 = max(s.p50, r.LatencyNS.P50)
			s.p99 = max(s.p99, r.LatencyNS.P99)
		case r.Mode == "realtime" && r.OfferedRate == 0 && r.Goroutines == g && r.ThroughputPerS > 0:
			logs[s] = append(logs[s], math.Log(r.ThroughputPerS))
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
func Scorecard(f *File) Table {
	g := fullSpeed(f)
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
	all, floor := scores(f)
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
			row[2] = percentage(s.wrong)
		}
		if s.tput > 0 {
			row[3] = rate(s.tput)
		}
		if s.p50 > 0 {
			row[4], row[5] = nanos(s.p50), nanos(s.p99)
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

// percentage formats a fraction as a percentage with three significant
// figures at most.
func percentage(v float64) string {
	if v == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*v, 'g', 3, 64) + "%"
}

// Pick is an answer to "which limiter should I pick?" for one need,
// derived from a run's numbers.
type Pick struct {
	// Need is what the user needs; Limiter the one that served it best in
	// this run (or, for what to avoid, the ones to avoid, worst first), or
	// "" for none, and Why says how close one came; Why gives the numbers.
	Need, Limiter, Why string
}

// Picks answers "which limiter should I pick?" for the common needs from
// f's numbers, and compares each peer with ratelab's limiter of the same
// algorithm on the same backend. A need f has no numbers for is left out.
// The needs of one process are answered from the limiters in memory; the
// limiters kept in Redis, a round trip a decision, answer the need of a
// limit many processes share.
func Picks(f *File) (picks []Pick, versus []string) {
	everyone, floor := scores(f)
	everyone = slices.DeleteFunc(everyone, func(s *score) bool { return s.own }) // not held to the same limit
	all := slices.DeleteFunc(slices.Clone(everyone), func(s *score) bool { return s.outside })
	g := fullSpeed(f)
	best := func(keep func(*score) bool, less func(a, b *score) bool) *score {
		var b *score
		for _, s := range all {
			if keep(s) && (b == nil || less(s, b)) {
				b = s
			}
		}
		return b
	}
	measured := func(s *score) bool { return s.accuracy > 0 }
	names := func(ss []*score) string {
		var n []string
		for _, s := range ss {
			n = append(n, s.name)
		}
		return strings.Join(n, ", ")
	}

	const exact = 1 + 1e-9
	if closest := best(measured, func(a, b *score) bool { return a.worst < b.worst }); closest != nil {
		var exacts []*score
		for _, s := range all {
			if measured(s) && s.worst <= exact {
				exacts = append(exacts, s)
			}
		}
		p := Pick{Need: "Never more than N in any window"}
		if len(exacts) == 0 {
			p.Limiter = ""
			p.Why = fmt.Sprintf("No limiter was exact; the closest, %s, let a key have %.2f×N in one window.", closest.name, closest.worst)
		} else {
			s := exacts[0]
			for _, e := range exacts[1:] {
				if e.tput > s.tput {
					s = e
				}
			}
			p.Limiter = s.name
			p.Why = fmt.Sprintf("No key had more than N in any window on any workload%s", s.costs())
			if others := slices.DeleteFunc(slices.Clone(exacts), func(e *score) bool { return e == s }); len(others) > 0 {
				p.Why += fmt.Sprintf(" Also exact: %s.", names(others))
			}
		}
		picks = append(picks, p)
	}

	// The ideal is the limiter the run judged the others against: the one
	// that never differs from it.
	ideal := best(func(s *score) bool { return measured(s) && s.wrong == 0 && s.worst <= exact }, func(a, b *score) bool { return false })
	if s := best(func(s *score) bool { return measured(s) && s != ideal }, func(a, b *score) bool { return a.wrong < b.wrong }); s != nil {
		why := fmt.Sprintf("%s of its decisions differed from the ideal's, averaged over the workloads, and the most a key had in one window was %.2f×N", percentage(s.wrong), s.worst)
		if ideal != nil && s.bytes > 0 && ideal.bytes > 0 {
			why += fmt.Sprintf("; %.1f bytes per user against the ideal's %.1f (at a limit of %d)", s.bytes, ideal.bytes, f.Meta.Params.Limit)
		}
		picks = append(picks, Pick{Need: "Closest to the ideal, short of the ideal itself", Limiter: s.name, Why: why + "."})
	}

	// near lists the others within 10% of s by v, which is closer than
	// a shared machine tells apart.
	near := func(s *score, v func(*score) float64) string {
		var n []*score
		for _, o := range all {
			if o != s && v(o) > 0 && math.Abs(v(o)-v(s)) <= 0.1*v(s) {
				n = append(n, o)
			}
		}
		if len(n) == 0 {
			return ""
		}
		return fmt.Sprintf(" Within 10%%, too close to call on a shared machine: %s.", names(n))
	}

	tput := func(s *score) float64 { return s.tput }
	if s := best(func(s *score) bool { return s.tput > 0 }, func(a, b *score) bool { return a.tput > b.tput }); s != nil {
		why := fmt.Sprintf("It made %s with %d goroutines sending as fast as they could (the geometric mean over the workloads)", rate(s.tput), g)
		if p := best(func(p *score) bool { return p.peer && p.tput > 0 && p != s }, func(a, b *score) bool { return a.tput > b.tput }); p != nil {
			why += fmt.Sprintf("; the fastest peer, %s, made %s (%.1f times fewer)", p.name, rate(p.tput), s.tput/p.tput)
		}
		picks = append(picks, Pick{Need: "Most decisions per second under overload", Limiter: s.name, Why: why + "." + near(s, tput)})
	}

	p50 := func(s *score) float64 { return s.p50 }
	if s := best(func(s *score) bool { return s.p50 > 0 }, func(a, b *score) bool { return a.p50 < b.p50 }); s != nil {
		why := fmt.Sprintf("Its median decision came %s after the request was due, on its slowest workload", nanos(s.p50))
		if floor != nil && floor.p50 > 0 {
			why += fmt.Sprintf("; the harness alone, deciding nothing, took %s", nanos(floor.p50))
		}
		why += "." + near(s, p50)
		// A tail is the limiter's when it is well beyond what the
		// harness alone shows: three times the floor's p99.
		if floor != nil && floor.p99 > 0 {
			var long []string
			for _, o := range all {
				if o.p99 > 3*floor.p99 {
					long = append(long, fmt.Sprintf("%s (%s)", o.name, nanos(o.p99)))
				}
			}
			if len(long) == 0 {
				why += fmt.Sprintf(" No limiter's p99 was over three times the harness floor's %s: the tails were the machine's more than the limiters'.", nanos(floor.p99))
			} else {
				why += fmt.Sprintf(" The harness floor's p99 was %s; over three times that: %s. One stall of a shared machine in a run is enough for that: compare with another run before blaming a limiter.", nanos(floor.p99), strings.Join(long, ", "))
			}
		}
		picks = append(picks, Pick{Need: "Fastest decision at a steady rate", Limiter: s.name, Why: why})
	}

	if s := best(func(s *score) bool { return s.bytes > 0 }, func(a, b *score) bool { return a.bytes < b.bytes }); s != nil {
		why := fmt.Sprintf("It held %.1f bytes per user", s.bytes)
		if m := best(func(s *score) bool { return s.bytes > 0 }, func(a, b *score) bool { return a.bytes > b.bytes }); m != s {
			why += fmt.Sprintf("; the most, %s, held %.1f", m.name, m.bytes)
		}
		picks = append(picks, Pick{Need: "Least memory per user", Limiter: s.name, Why: why + "."})
	}

	if p, ok := fleetPick(everyone, all, g); ok {
		picks = append(picks, p)
	}
	if p, ok := overloadPick(f); ok {
		picks = append(picks, p)
	}
	if p, ok := leasePick(f); ok {
		picks = append(picks, p)
	}
	picks = append(picks, llmPicks(f)...)

	// Every limiter an attacker got well past N with, worst first, on
	// any backend: the edge is the algorithm's.
	var over []*score
	for _, s := range everyone {
		if s.attack > 1.05 {
			over = append(over, s)
		}
	}
	slices.SortStableFunc(over, func(a, b *score) int { return cmp.Compare(b.attack, a.attack) })
	if len(over) > 0 {
		at := []string{fmt.Sprintf("%s admitted %.2f×N to a boundary attacker", over[0].name, over[0].attack)}
		for _, s := range over[1:] {
			at = append(at, fmt.Sprintf("%s %.2f×N", s.name, s.attack))
		}
		picks = append(picks, Pick{Need: "Avoid where clients can time the window edge", Limiter: names(over),
			Why: fmt.Sprintf("In a single window, %s.", prose(at))})
	}

	for _, p := range everyone {
		if !p.peer {
			continue
		}
		i := slices.IndexFunc(everyone, func(s *score) bool { return !s.peer && s.algorithm == p.algorithm && s.outside == p.outside })
		if i < 0 {
			continue
		}
		s := everyone[i]
		var parts []string
		if s.tput > 0 && p.tput > 0 {
			parts = append(parts, fmt.Sprintf("%s against %s under overload (%.2f×)", rate(s.tput), rate(p.tput), s.tput/p.tput))
		}
		if s.bytes > 0 && p.bytes > 0 {
			parts = append(parts, fmt.Sprintf("%.1f against %.1f bytes per user (%.2f×)", s.bytes, p.bytes, s.bytes/p.bytes))
		}
		if s.p50 > 0 && p.p50 > 0 {
			parts = append(parts, fmt.Sprintf("a median decision of %s against %s", nanos(s.p50), nanos(p.p50)))
		}
		if s.accuracy > 0 && p.accuracy > 0 {
			how := ""
			if s.realtime != p.realtime {
				how = fmt.Sprintf(" (%s's measured in real time)", map[bool]string{true: s.name, false: p.name}[s.realtime])
			}
			parts = append(parts, fmt.Sprintf("%s against %s of decisions differing from the ideal%s", percentage(s.wrong), percentage(p.wrong), how))
		}
		if len(parts) > 0 {
			versus = append(versus, fmt.Sprintf("%s against %s (both %s): %s.", s.name, p.name, s.algorithm, strings.Join(parts, "; ")))
		}
	}
	return picks, versus
}

// llmPicks are the picks for requests whose cost is known only after the
// response (an LLM's tokens), of the ways of charging that can be
// shipped: the one that admits closest to the tokens its own algorithm
// admits knowing every cost up front, whatever the client's estimate (the
// worst over the estimates run); and the one that kept every key within
// 1.05 times the limit in any window with its decisions closest to the
// ideal's.
func llmPicks(f *File) []Pick {
	const known = "actual up front"
	type way struct{ limiter, charge string }
	var runs []Run
	reference := map[string]Run{} // by limiter
	for _, r := range f.Runs {
		if r.Mode != "llm" || r.LLM == nil || r.Accuracy == nil || r.SkippedBecause != "" {
			continue
		}
		if r.LLM.Charge == known {
			reference[r.Limiter] = r
		} else {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	wrong := func(r Run) float64 { return r.Accuracy.FalseAllowRate + r.Accuracy.FalseDenyRate }
	says := func(r Run) string {
		charge := fmt.Sprintf("%q", r.LLM.Charge)
		if r.LLM.Estimate > 0 {
			charge = fmt.Sprintf("%s with an estimate of %d", charge, r.LLM.Estimate)
		}
		return fmt.Sprintf("charged %s, %s of its decisions differed from the ideal's, it admitted %s of the ideal's tokens, and the most a key had in one window was %.2f×N",
			charge, percentage(wrong(r)), percentage(float64(r.LLM.Tokens)/float64(max(r.LLM.IdealTokens, 1))), r.Accuracy.MaxWindowRatio)
	}
	var picks []Pick
	// The worst, over the estimates, of how far each way of charging
	// strays from its algorithm knowing the costs, in tokens admitted.
	worst := map[way]Run{}
	off := func(r Run) float64 {
		ref := reference[r.Limiter]
		return math.Abs(float64(r.LLM.Tokens)/float64(max(ref.LLM.Tokens, 1)) - 1)
	}
	var ways []way
	for _, r := range runs {
		if _, ok := reference[r.Limiter]; !ok {
			continue
		}
		k := way{r.Limiter, r.LLM.Charge}
		if w, seen := worst[k]; !seen || off(r) > off(w) {
			if !seen {
				ways = append(ways, k)
			}
			worst[k] = r
		}
	}
	if len(ways) > 0 {
		b := worst[slices.MinFunc(ways, func(x, y way) int { return cmp.Compare(off(worst[x]), off(worst[y])) })]
		ref := reference[b.Limiter]
		picks = append(picks, Pick{Need: "Costs known only after the response (LLM tokens), as if known up front", Limiter: b.Limiter + " (" + b.LLM.Charge + ")",
			Why: fmt.Sprintf("Whatever the client's estimate, it admitted within %s of the tokens %s admits knowing every cost when the request is sent (%.2f×N at most in one window, against %.2f×N); at its worst, %s.",
				percentage(off(b)), b.Limiter, b.Accuracy.MaxWindowRatio, ref.Accuracy.MaxWindowRatio, says(b))})
	}
	within := slices.DeleteFunc(slices.Clone(runs), func(r Run) bool { return r.Accuracy.MaxWindowRatio > 1.05 })
	if len(within) > 0 {
		b := slices.MinFunc(within, func(x, y Run) int { return cmp.Compare(wrong(x), wrong(y)) })
		w := says(b)
		picks = append(picks, Pick{Need: "Costs known only after the response, never past the limit", Limiter: b.Limiter + " (" + b.LLM.Charge + ")",
			Why: strings.ToUpper(w[:1]) + w[1:] + "."})
	}
	return picks
}

// fleetPick is the pick for a limit many processes share: of the limiters
// kept in Redis (in everyone), the fastest under overload that a boundary
// attacker did not get past N with, set against the fastest in memory
// (in local), which is what one process needs.
func fleetPick(everyone, local []*score, g int) (Pick, bool) {
	var fleet []*score
	for _, s := range everyone {
		if s.outside && s.tput > 0 {
			fleet = append(fleet, s)
		}
	}
	if len(fleet) == 0 {
		return Pick{}, false
	}
	fastest := func(ss []*score, keep func(*score) bool) *score {
		var b *score
		for _, s := range ss {
			if keep(s) && (b == nil || s.tput > b.tput) {
				b = s
			}
		}
		return b
	}
	s := fastest(fleet, func(s *score) bool { return s.attack <= 1.05 })
	if s == nil {
		s = fastest(fleet, func(*score) bool { return true })
	}
	why := fmt.Sprintf("Of the limiters kept in Redis that no boundary attacker got past N with, it made the most decisions a second: %s with %d goroutines", rate(s.tput), g)
	if s.p50 > 0 {
		why += fmt.Sprintf(", a median paced decision of %s", nanos(s.p50))
	}
	why += ". Every decision is a round trip to the server"
	if m := fastest(local, func(*score) bool { return true }); m != nil {
		why += fmt.Sprintf("; in memory, %s made %s: one process needs no Redis", m.name, rate(m.tput))
	}
	why += "."
	var others []string
	for _, o := range fleet {
		if o != s && math.Abs(o.tput-s.tput) <= 0.1*s.tput {
			others = append(others, o.name)
		}
	}
	if len(others) > 0 {
		why += fmt.Sprintf(" Within 10%%, too close to call on a shared machine: %s.", strings.Join(others, ", "))
	}
	if e := fastest(fleet, func(o *score) bool { return o.accuracy > 0 && o.worst <= 1+1e-9 }); e != nil && e != s {
		why += fmt.Sprintf(" Never more than N in any window: %s, at %s.", e.name, rate(e.tput))
	}
	var checked, differs int64
	var wrong []string
	for _, o := range fleet {
		checked += o.checked
		differs += o.differs
		if o.differs > 0 {
			wrong = append(wrong, o.name)
		}
	}
	switch {
	case checked > 0 && differs == 0:
		why += fmt.Sprintf(" On a sample of the workloads (%s requests), each of ratelab's decided as the same algorithm in memory does.", count(checked))
	case differs > 0:
		why += fmt.Sprintf(" But %s decided otherwise than the same algorithm in memory on %s of %s requests: a bug.", strings.Join(wrong, ", "), count(differs), count(checked))
	}
	return Pick{Need: "One limit shared by many processes (Redis)", Limiter: s.name, Why: why}, true
}

// costs says, after a clause, what s costs: its throughput and memory.
func (s *score) costs() string {
	var parts []string
	if s.tput > 0 {
		parts = append(parts, rate(s.tput)+" under overload")
	}
	if s.bytes > 0 {
		parts = append(parts, strconv.FormatFloat(s.bytes, 'f', 1, 64)+" bytes per user")
	}
	if len(parts) == 0 {
		return "."
	}
	return "; its cost: " + strings.Join(parts, " and ") + "."
}

// WritePicks writes, for a terminal, the scorecard and which limiter to
// pick for which need.
func WritePicks(w io.Writer, f *File) error {
	if t := Scorecard(f); len(t.Rows) > 0 {
		if err := t.Text(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	picks, versus := Picks(f)
	if len(picks) > 0 {
		fmt.Fprintln(w, "Which limiter should I pick? This run's answers, from the numbers above:")
	}
	for _, p := range picks {
		fmt.Fprintf(w, "%s\n", indent(Wrap(fmt.Sprintf("- %s: %s. %s", p.Need, cmp.Or(p.Limiter, "none"), p.Why), 98), "  "))
	}
	if len(versus) > 0 {
		fmt.Fprintln(w, "\nAgainst the peers:")
	}
	for _, v := range versus {
		fmt.Fprintf(w, "%s\n", indent(Wrap("- "+v, 98), "  "))
	}
	return nil
}

// indent indents every line of s but the first.
func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// prose joins phrases as a sentence does: "a", "a and b", "a, b and c".
func prose(phrases []string) string {
	if len(phrases) < 2 {
		return strings.Join(phrases, "")
	}
	return strings.Join(phrases[:len(phrases)-1], ", ") + " and " + phrases[len(phrases)-1]
}

// overloadPick is the pick for a fleet under overload: of the fleets
// (Run.Fleet) that decided on their samples as the same algorithm in
// memory does, the one that made the fewest round trips a decision in
// real time on the workload where the fleets made the most, set against
// the one that made the most there.
func overloadPick(f *File) (Pick, bool) {
	type fleet struct {
		name                   string
		trips, tput, cpu       map[string]float64
		checked, differs, runs int64
	}
	var fleets []*fleet
	var workloads []string
	for _, r := range f.Runs {
		fl := r.Fleet
		if r.Mode != "fleet" || fl == nil || r.SkippedBecause != "" {
			continue
		}
		i := slices.IndexFunc(fleets, func(x *fleet) bool { return x.name == r.Limiter })
		if i < 0 {
			fleets = append(fleets, &fleet{name: r.Limiter, trips: map[string]float64{}, tput: map[string]float64{}, cpu: map[string]float64{}})
			i = len(fleets) - 1
		}
		x := fleets[i]
		x.runs++
		// The routing that made the most round trips: the worse of the two.
		if fl.RoundTrips >= x.trips[r.Workload] {
			x.trips[r.Workload], x.tput[r.Workload], x.cpu[r.Workload] = fl.RoundTrips, r.ThroughputPerS, fl.ServerCPUNS
		}
		if r.DiffersFromMemory != nil {
			x.checked += r.Decisions
			x.differs += *r.DiffersFromMemory
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	if len(fleets) < 2 {
		return Pick{}, false
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
		return Pick{}, false
	}
	worst := fleets[0]
	for _, x := range fleets {
		if x.trips[w] > worst.trips[w] {
			worst = x
		}
	}
	why := fmt.Sprintf("A fleet of processes sharing one Redis, sent to as fast as they could go: on %s it made %.3f round trips a decision against %s's %.3f, "+
		"%s against %s, and the server spent %s of CPU a decision against %s. On samples of the workloads in simulated time its %s decisions were the same algorithm's in memory, every one.",
		w, best.trips[w], worst.name, worst.trips[w], rate(best.tput[w]), rate(worst.tput[w]), nanos(best.cpu[w]), nanos(worst.cpu[w]), count(best.checked))
	return Pick{Need: "A fleet under attack or overload", Limiter: best.name, Why: why}, true
}

// leasePick is the pick for a fleet that may admit a little more than the
// limit for fewer round trips: of the fleets that lease quota, the one
// with the fewest round trips an admitted request, in simulated time, on
// its worse routing of the workload where it made the most; with its
// worst error against the ideal, beside the exact fleets'.
func leasePick(f *File) (Pick, bool) {
	type fleet struct {
		name  string
		trips map[string]float64 // a workload's worse routing
		most  float64            // the most in any W, anywhere
		wrong float64            // the largest share unlike the ideal
	}
	var leases []*fleet
	exactWrong := 0.0
	for _, r := range f.Runs {
		fl, a := r.Fleet, r.Accuracy
		if r.Mode != "fleet" || fl == nil || a == nil || r.SkippedBecause != "" {
			continue
		}
		wrong := a.FalseAllowRate + a.FalseDenyRate
		if !fl.Lease {
			exactWrong = max(exactWrong, wrong)
			continue
		}
		i := slices.IndexFunc(leases, func(x *fleet) bool { return x.name == r.Limiter })
		if i < 0 {
			leases = append(leases, &fleet{name: r.Limiter, trips: map[string]float64{}})
			i = len(leases) - 1
		}
		x := leases[i]
		x.trips[r.Workload] = max(x.trips[r.Workload], fl.RoundTripsPerAdmitted)
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
		return Pick{}, false
	}
	w, t := extreme(best.trips, true)
	bw, bt := extreme(best.trips, false)
	why := fmt.Sprintf("Each process leases units of a key's quota and admits from them for at most the lease time: %.3f round trips an admitted request on %s, %.3f on %s, in simulated time (the worse routing of each). "+
		"The price is accuracy: up to %.1f%% of decisions unlike the ideal's, against %.1f%% for the exact fleets, and at most %.2f×N in any window (the bound: C + (W+τ)·R).",
		bt, bw, t, w, 100*best.wrong, 100*exactWrong, best.most)
	return Pick{Need: "A fleet that may admit a little more for far fewer round trips", Limiter: best.name, Why: why}, true
}
