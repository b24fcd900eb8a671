package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/results"
)

// Pick is an answer to "which limiter should I pick?" for one need,
// derived from a run's numbers.
type Pick struct {
	// Need is what the user needs; Limiter the one that served it best in
	// this run (or, for what to avoid, the ones to avoid, worst first), or
	// "" for none, and Why says how close one came; Why gives the numbers.
	Need, Limiter, Why string
	// Evidence is the mode whose section of the report holds the
	// numbers the pick was read from ("" for none).
	Evidence string
}

// Picks answers "which limiter should I pick?" for the common needs from
// f's numbers, and compares each peer with ratelab's limiter of the same
// algorithm on the same backend. A need f has no numbers for is left out.
// The needs of one process are answered from the limiters in memory; the
// limiters kept in Redis, a round trip a decision, answer the need of a
// limit many processes share; each mode adds its own (Mode.Picks).
func Picks(f *results.File, ms Modes) (picks []Pick, versus []string) {
	everyone, floor := scores(f, ms)
	everyone = slices.DeleteFunc(everyone, func(s *score) bool { return s.own }) // not held to the same limit
	c := card{f: f, everyone: everyone, floor: floor, g: fullSpeed(f, ms),
		all: slices.DeleteFunc(slices.Clone(everyone), func(s *score) bool { return s.outside })}
	// Each need of the scorecard's, and the metric it is read from: its
	// evidence is the first mode that measured it.
	for _, need := range []struct {
		pick   func() (Pick, bool)
		metric string
	}{
		{c.exact, results.MostInWindow}, {c.closest, results.MostInWindow}, {c.fastest, results.Throughput},
		{c.steady, results.Latency + ".p50"}, {c.leanest, results.BytesPerUser},
	} {
		if p, ok := need.pick(); ok {
			p.Evidence = modeWith(f, ms, need.metric)
			picks = append(picks, p)
		}
	}
	if p, ok := fleetPick(everyone, c.all, c.g); ok {
		p.Evidence = modeWith(f, ms, results.Throughput)
		picks = append(picks, p)
	}
	for _, m := range ms {
		if rows := measuredRows(f.RowsOf(m.Name)); m.Picks != nil && len(rows) > 0 {
			for _, p := range m.Picks(f, rows) {
				p.Evidence = cmp.Or(p.Evidence, m.Name)
				picks = append(picks, p)
			}
		}
	}
	if p, ok := c.avoid(); ok {
		p.Evidence = modeWith(f, ms, results.MostInWindow)
		picks = append(picks, p)
	}
	return picks, c.versus()
}

// modeWith is the first of ms, in their order, with a measured row of f
// that has metric, or "".
func modeWith(f *results.File, ms Modes, metric string) string {
	for _, m := range ms {
		if slices.ContainsFunc(measuredRows(f.RowsOf(m.Name)), func(r results.Row) bool { return r.Has(metric) }) {
			return m.Name
		}
	}
	return ""
}

// card is a run's scores, as the picks read them: everyone held to the
// lab's limit, all of them in memory, the harness floor, and the
// goroutines whose throughput is compared.
type card struct {
	f             *results.File
	everyone, all []*score
	floor         *score
	g             int
}

// exactly is how near 1 the most in any W of an exact limiter is.
const exactly = 1 + 1e-9

// best is the score of all that keep keeps and less puts first.
func (c card) best(keep func(*score) bool, less func(a, b *score) bool) *score {
	var b *score
	for _, s := range c.all {
		if keep(s) && (b == nil || less(s, b)) {
			b = s
		}
	}
	return b
}

func measured(s *score) bool { return s.accuracy > 0 }

func names(ss []*score) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

// near lists the others within 10% of s by v, which is closer than a
// shared machine tells apart.
func (c card) near(s *score, v func(*score) float64) string {
	var n []*score
	for _, o := range c.all {
		if o != s && v(o) > 0 && math.Abs(v(o)-v(s)) <= 0.1*v(s) {
			n = append(n, o)
		}
	}
	if len(n) == 0 {
		return ""
	}
	return fmt.Sprintf(" Within 10%%, too close to call on a shared machine: %s.", names(n))
}

func (c card) exact() (Pick, bool) {
	closest := c.best(measured, func(a, b *score) bool { return a.worst < b.worst })
	if closest == nil {
		return Pick{}, false
	}
	var exacts []*score
	for _, s := range c.all {
		if measured(s) && s.worst <= exactly {
			exacts = append(exacts, s)
		}
	}
	p := Pick{Need: "Never more than N in any window"}
	if len(exacts) == 0 {
		p.Why = fmt.Sprintf("No limiter was exact; the closest, %s, let a key have %.2f×N in one window.", closest.name, closest.worst)
		return p, true
	}
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
	return p, true
}

func (c card) closest() (Pick, bool) {
	// The ideal is the limiter the run judged the others against: the
	// one that never differs from it.
	ideal := c.best(func(s *score) bool { return measured(s) && s.wrong == 0 && s.worst <= exactly }, func(a, b *score) bool { return false })
	s := c.best(func(s *score) bool { return measured(s) && s != ideal }, func(a, b *score) bool { return a.wrong < b.wrong })
	if s == nil {
		return Pick{}, false
	}
	why := fmt.Sprintf("%s of its decisions differed from the ideal's, averaged over the workloads, and the most a key had in one window was %.2f×N", Percentage(s.wrong), s.worst)
	if ideal != nil && s.bytes > 0 && ideal.bytes > 0 {
		why += fmt.Sprintf("; %.1f bytes per user against the ideal's %.1f (at a limit of %s)", s.bytes, ideal.bytes, c.f.Meta.Setting("limit"))
	}
	return Pick{Need: "Closest to the ideal, short of the ideal itself", Limiter: s.name, Why: why + "."}, true
}

func (c card) fastest() (Pick, bool) {
	tput := func(s *score) float64 { return s.tput }
	s := c.best(func(s *score) bool { return s.tput > 0 }, func(a, b *score) bool { return a.tput > b.tput })
	if s == nil {
		return Pick{}, false
	}
	why := fmt.Sprintf("It made %s with %d goroutines sending as fast as they could (the geometric mean over the workloads)", Rate(s.tput), c.g)
	if p := c.best(func(p *score) bool { return p.peer && p.tput > 0 && p != s }, func(a, b *score) bool { return a.tput > b.tput }); p != nil {
		why += fmt.Sprintf("; the fastest peer, %s, made %s (%.1f times fewer)", p.name, Rate(p.tput), s.tput/p.tput)
	}
	return Pick{Need: "Most decisions per second under overload", Limiter: s.name, Why: why + "." + c.near(s, tput)}, true
}

func (c card) steady() (Pick, bool) {
	p50 := func(s *score) float64 { return s.p50 }
	s := c.best(func(s *score) bool { return s.p50 > 0 }, func(a, b *score) bool { return a.p50 < b.p50 })
	if s == nil {
		return Pick{}, false
	}
	why := fmt.Sprintf("Its median decision came %s after the request was due, on its slowest workload", Nanos(s.p50))
	if c.floor != nil && c.floor.p50 > 0 {
		why += fmt.Sprintf("; the harness alone, deciding nothing, took %s", Nanos(c.floor.p50))
	}
	why += "." + c.near(s, p50)
	// A tail is the limiter's when it is well beyond what the harness
	// alone shows: three times the floor's p99.
	if c.floor != nil && c.floor.p99 > 0 {
		var long []string
		for _, o := range c.all {
			if o.p99 > 3*c.floor.p99 {
				long = append(long, fmt.Sprintf("%s (%s)", o.name, Nanos(o.p99)))
			}
		}
		if len(long) == 0 {
			why += fmt.Sprintf(" No limiter's p99 was over three times the harness floor's %s: the tails were the machine's more than the limiters'.", Nanos(c.floor.p99))
		} else {
			why += fmt.Sprintf(" The harness floor's p99 was %s; over three times that: %s. One stall of a shared machine in a run is enough for that: compare with another run before blaming a limiter.", Nanos(c.floor.p99), strings.Join(long, ", "))
		}
	}
	return Pick{Need: "Fastest decision at a steady rate", Limiter: s.name, Why: why}, true
}

func (c card) leanest() (Pick, bool) {
	s := c.best(func(s *score) bool { return s.bytes > 0 }, func(a, b *score) bool { return a.bytes < b.bytes })
	if s == nil {
		return Pick{}, false
	}
	why := fmt.Sprintf("It held %.1f bytes per user", s.bytes)
	if m := c.best(func(s *score) bool { return s.bytes > 0 }, func(a, b *score) bool { return a.bytes > b.bytes }); m != s {
		why += fmt.Sprintf("; the most, %s, held %.1f", m.name, m.bytes)
	}
	return Pick{Need: "Least memory per user", Limiter: s.name, Why: why + "."}, true
}

// avoid names every limiter an attacker got well past N with, worst
// first, on any backend: the edge is the algorithm's.
func (c card) avoid() (Pick, bool) {
	var over []*score
	for _, s := range c.everyone {
		if s.attack > 1.05 {
			over = append(over, s)
		}
	}
	slices.SortStableFunc(over, func(a, b *score) int { return cmp.Compare(b.attack, a.attack) })
	if len(over) == 0 {
		return Pick{}, false
	}
	at := []string{fmt.Sprintf("%s admitted %.2f×N to %s", over[0].name, over[0].attack, attacker(over[0].attackedBy))}
	for _, s := range over[1:] {
		at = append(at, fmt.Sprintf("%s %.2f×N (%s)", s.name, s.attack, s.attackedBy))
	}
	return Pick{Need: "Avoid where clients can time the window edge", Limiter: names(over), Why: fmt.Sprintf("In a single window, %s.", prose(at))}, true
}

// attacker names the attack of a workload: the epoch's window edges
// (boundary-attack) or a key's own (anchored-attack).
func attacker(workload string) string {
	switch workload {
	case "boundary-attack":
		return "an attacker at the epoch's window edges (boundary-attack)"
	case "anchored-attack":
		return "an attacker at its own window's edges (anchored-attack)"
	}
	return "an attacker at the window edge (" + workload + ")"
}

// versus compares each peer with ratelab's limiter of the same algorithm
// on the same backend.
func (c card) versus() []string {
	var out []string
	for _, p := range c.everyone {
		if !p.peer {
			continue
		}
		i := slices.IndexFunc(c.everyone, func(s *score) bool { return !s.peer && s.algorithm == p.algorithm && s.outside == p.outside })
		if i < 0 {
			continue
		}
		s := c.everyone[i]
		var parts []string
		if s.tput > 0 && p.tput > 0 {
			parts = append(parts, fmt.Sprintf("%s against %s under overload (%.2f×)", Rate(s.tput), Rate(p.tput), s.tput/p.tput))
		}
		if s.bytes > 0 && p.bytes > 0 {
			parts = append(parts, fmt.Sprintf("%.1f against %.1f bytes per user (%.2f×)", s.bytes, p.bytes, s.bytes/p.bytes))
		}
		if s.p50 > 0 && p.p50 > 0 {
			parts = append(parts, fmt.Sprintf("a median decision of %s against %s", Nanos(s.p50), Nanos(p.p50)))
		}
		if s.accuracy > 0 && p.accuracy > 0 {
			how := ""
			if s.realtime != p.realtime {
				how = fmt.Sprintf(" (%s's measured in real time)", map[bool]string{true: s.name, false: p.name}[s.realtime])
			}
			parts = append(parts, fmt.Sprintf("%s against %s of decisions differing from the ideal%s", Percentage(s.wrong), Percentage(p.wrong), how))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s against %s (both %s): %s.", s.name, p.name, s.algorithm, strings.Join(parts, "; ")))
		}
	}
	return out
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
	why := fmt.Sprintf("Of the limiters kept in Redis that no boundary attacker got past N with, it made the most decisions a second: %s with %d goroutines", Rate(s.tput), g)
	if s.p50 > 0 {
		why += fmt.Sprintf(", a median paced decision of %s", Nanos(s.p50))
	}
	why += ". Every decision is a round trip to the server"
	if m := fastest(local, func(*score) bool { return true }); m != nil {
		why += fmt.Sprintf("; in memory, %s made %s: one process needs no Redis", m.name, Rate(m.tput))
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
		why += fmt.Sprintf(" Never more than N in any window: %s, at %s.", e.name, Rate(e.tput))
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
		why += fmt.Sprintf(" On a sample of the workloads (%s requests), each of ratelab's decided as the same algorithm in memory does.", results.Count(checked))
	case differs > 0:
		why += fmt.Sprintf(" But %s decided otherwise than the same algorithm in memory on %s of %s requests: a bug.", strings.Join(wrong, ", "), results.Count(differs), results.Count(checked))
	}
	return Pick{Need: "One limit shared by many processes (Redis)", Limiter: s.name, Why: why}, true
}

// costs says, after a clause, what s costs: its throughput and memory.
func (s *score) costs() string {
	var parts []string
	if s.tput > 0 {
		parts = append(parts, Rate(s.tput)+" under overload")
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
func WritePicks(w io.Writer, f *results.File, ms Modes) error {
	if t := Scorecard(f, ms); len(t.Rows) > 0 {
		if err := t.Text(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	picks, versus := Picks(f, ms)
	if len(picks) > 0 {
		fmt.Fprintln(w, "Which limiter should I pick? This run's answers, from the numbers above:")
	}
	for _, p := range picks {
		fmt.Fprintf(w, "%s\n", indent(results.Wrap(fmt.Sprintf("- %s: %s. %s", p.Need, cmp.Or(p.Limiter, "none"), p.Why), 98), "  "))
	}
	if len(versus) > 0 {
		fmt.Fprintln(w, "\nAgainst the peers:")
	}
	for _, v := range versus {
		fmt.Fprintf(w, "%s\n", indent(results.Wrap("- "+v, 98), "  "))
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
