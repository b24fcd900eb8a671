package results

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/ratelab/ratelab/limiters"
)

// Table is one of the lab's tables.
type Table struct {
	// Name is the table's file name in the output folder, without an
	// extension.
	Name string
	// Title heads it; Note says how to read it.
	Title, Note string
	Header      []string
	Rows        [][]string
	// Left is how many leading columns are labels (aligned left); the
	// rest are numbers (aligned right).
	Left int
}

// Tables returns the tables for f, one per concern, leaving out those f has
// no runs for.
func Tables(f *File) []Table {
	var out []Table
	for _, t := range []Table{
		accuracyTable(f, "simulated"),
		accuracyTable(f, "realtime"),
		latencyTable(f),
		perGoroutines(f, "throughput", "Throughput under overload: decisions per second, unpaced",
			"Every sender sends the workload's requests as fast as it can, so keys are asked far beyond their limit and most requests are denied "+
				"(admitted: the share admitted with one goroutine). A column per number of goroutines; on 2 cores, more than 2 show what contention costs. "+
				"The harness floor is a limiter that decides nothing.",
			func(r Run) string { return rate(r.ThroughputPerS) }),
		perGoroutines(f, "contention", "Lock contention: time blocked on locks per decision, unpaced",
			"Time goroutines spent parked on a sync.Mutex, a sync.RWMutex or a lock inside the runtime, as the runtime counts it "+
				"(/sync/mutex/wait/total, sampled), divided by decisions. Spinning before parking is not counted. "+
				"The harness floor row is what the runtime and the harness add with no limiter at all.",
			func(r Run) string {
				switch w := r.LockWaitNSPerOp; {
				case w == nil:
					return ""
				case *w == 0:
					return "0"
				case *w < 0.1:
					return "<0.1ns"
				case *w < 10:
					return strconv.FormatFloat(*w, 'f', 1, 64) + "ns"
				}
				return nanos(*r.LockWaitNSPerOp)
			}),
		memoryTable(f),
		timingTable(f),
		httpTable(f),
		fleetTable(f),
		llmTable(f),
		outageTable(f),
	} {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

func accuracyTable(f *File, mode string) Table {
	t := Table{
		Name:  "accuracy",
		Title: "Accuracy against the ideal (the sliding window log on the same requests), in simulated time",
		Note: "False allows: admitted where the ideal denied; false denies: the other way; as counts and per request. " +
			"Most in any W: the most one key had admitted in any interval of the window's length, over the limit (1.00 is exact; a fixed window reaches 2.00). " +
			"A bucket of capacity C refilled at R is judged as C per C/R.",
		Header: []string{"workload", "limiter", "judged as", "requests", "admitted", "ideal", "false allows", "false denies", "most in any W", "allocs/decision"},
		Left:   3,
	}
	t.Note += " Allocs/decision: heap allocations per decision over a second pass of the workload, after the first made the keys."
	if mode == "realtime" {
		t.Name = "accuracy-realtime"
		t.Title = "Accuracy against the ideal, in real time, for limiters that take no explicit time"
		t.Note = "The workload is replayed by one sender on the real clock with time compressed (the limit's window alike), " +
			"and the ideal is run on the times the requests were really sent. A workload too dense to send on time at the most compression is compressed less; " +
			"send lag: how late requests went against their compressed schedule. Not reproducible to the request: the clock is real."
		t.Header = append(t.Header, "compressed", "send lag p99")
	}
	var runs []Run
	for _, r := range f.Runs {
		if r.Accuracy == nil || r.Mode != mode {
			continue
		}
		runs = append(runs, r)
		a := r.Accuracy
		judged := ""
		if j := r.Judged; j != nil {
			judged = fmt.Sprintf("N %d per W %v", j.Limit, j.Window.Duration())
			if limiters.Algorithm(r.Algorithm).IsBucket() {
				judged = fmt.Sprintf("C %d over C/R %v", j.Limit, j.Window.Duration())
			}
		}
		t.Rows = append(t.Rows, []string{
			r.Workload, r.Limiter, judged,
			count(r.Decisions), count(a.Admitted), count(a.Ideal),
			countRate(a.FalseAllow, a.FalseAllowRate), countRate(a.FalseDeny, a.FalseDenyRate),
			strconv.FormatFloat(a.MaxWindowRatio, 'f', 2, 64),
			allocs(r.AllocsPerDecision),
		})
		if mode == "realtime" {
			lag := ""
			if r.SendLagNS != nil {
				lag = nanos(r.SendLagNS.P99)
			}
			last := &t.Rows[len(t.Rows)-1]
			*last = append(*last, strconv.FormatFloat(1/r.TimeScale, 'f', 0, 64)+"×", lag)
		}
	}
	t.Note = withNotes(t.Note, runs) + twins(runs)
	return t
}

func latencyTable(f *File) Table {
	t := Table{
		Name:  "latency",
		Title: "Latency of a decision, from its intended send time, paced (open loop)",
		Note: "Senders send the workload's requests at a fixed total rate; each request's latency runs from when it was due, so a stall counts against every request it delays. " +
			"The limit's window is scaled so that each key is asked for the same multiple of its limit as in the workload; " +
			"a run spans only a window or two of it, so buckets, which start full, admit more than they would in a long one. " +
			"Kept pace: the share of the offered rate sent; late: decided more than 1ms after due; admitted: the share admitted. " +
			"On a shared machine the tail beyond p99 is mostly the scheduler; the harness floor row is a limiter that decides nothing. " +
			"Each run is repeated: every quantile is the median of the runs', and p99 of runs is their lowest and highest p99, so that one stall of the machine decides nothing.",
		Header: []string{"workload", "limiter", "offered", "p50", "p90", "p99", "p99 of runs", "p99.9", "max", "kept pace", "late", "admitted"},
		Left:   2,
	}
	var runs []Run
	for _, r := range f.Runs {
		if r.Mode != "realtime" || r.OfferedRate == 0 || r.LatencyNS == nil {
			continue
		}
		runs = append(runs, r)
		l := r.LatencyNS
		kept := ""
		if r.AchievedFraction != nil {
			kept = fmt.Sprintf("%.0f%%", 100*min(*r.AchievedFraction, 1))
		}
		t.Rows = append(t.Rows, []string{
			r.Workload, r.Limiter, fmt.Sprintf("%s by %d", rate(r.OfferedRate), r.Goroutines),
			nanos(l.P50), nanos(l.P90), nanos(l.P99), spread(r.LatencyRunsNS), nanos(l.P999), nanos(l.Max), kept,
			percent(r.LateFraction), percent(r.AdmittedFraction),
		})
	}
	t.Note = withNotes(t.Note, runs)
	return t
}

// spread is the lowest and the highest p99 of runs, "" for fewer than two.
func spread(runs []Latency) string {
	if len(runs) < 2 {
		return ""
	}
	lo, hi := runs[0].P99, runs[0].P99
	for _, r := range runs[1:] {
		lo, hi = min(lo, r.P99), max(hi, r.P99)
	}
	return nanos(lo) + "–" + nanos(hi)
}

// perGoroutines is a table of the unpaced real-time runs, a row per
// workload and limiter, a column per goroutine count.
func perGoroutines(f *File, name, title, note string, cell func(Run) string) Table {
	var gs []int
	type row struct{ workload, limiter string }
	var rows []row
	cells := map[row]map[int]string{}
	admitted := map[row]string{}
	var runs []Run
	for _, r := range f.Runs {
		if r.Mode != "realtime" || r.OfferedRate != 0 || r.Accuracy != nil {
			continue
		}
		runs = append(runs, r)
		k := row{r.Workload, r.Limiter}
		if cells[k] == nil {
			cells[k] = map[int]string{}
			rows = append(rows, k)
			admitted[k] = percent(r.AdmittedFraction)
		}
		cells[k][r.Goroutines] = cell(r)
		if !slices.Contains(gs, r.Goroutines) {
			gs = append(gs, r.Goroutines)
		}
	}
	slices.Sort(gs)
	t := Table{Name: name, Title: title, Note: withNotes(note, runs), Header: []string{"workload", "limiter"}, Left: 2}
	for _, g := range gs {
		h := fmt.Sprintf("%d goroutines", g)
		if g == 1 {
			h = "1 goroutine"
		}
		t.Header = append(t.Header, h)
	}
	if name == "throughput" {
		t.Header = append(t.Header, "admitted")
	}
	for _, k := range rows {
		line := []string{k.workload, k.limiter}
		for _, g := range gs {
			line = append(line, cells[k][g])
		}
		if name == "throughput" {
			line = append(line, admitted[k])
		}
		t.Rows = append(t.Rows, line)
	}
	return t
}

// allocs formats allocations per decision, "" for not measured.
func allocs(a *float64) string {
	if a == nil {
		return ""
	}
	return strconv.FormatFloat(*a, 'f', 2, 64)
}

func timingTable(f *File) Table {
	t := Table{
		Name:  "timing",
		Title: "Cost of one decision, one goroutine, against the harness floor",
		Note: "Every limiter takes its turn deciding as fast as one goroutine can for a short sample, the harness floor (a limiter that decides nothing) " +
			"sampled between each two, round after round, so that each of a limiter's samples can be divided by the floor's just before and after it: " +
			"the machine's speed at that moment cancels out. Decisions/s and the time of one decision (p50 and p90 over stretches of 256 decisions, " +
			"the clock being too coarse to time one) are medians over the rounds; × floor is the median over rounds of the limiter's time per decision " +
			"over the floor's: how many floor decisions one of its decisions costs.",
		Header: []string{"workload", "limiter", "decisions/s", "p50", "p90", "× floor", "rounds"},
		Left:   2,
	}
	for _, r := range f.Runs {
		if r.Mode != "timing" || len(r.Rounds) == 0 {
			continue
		}
		row := []string{r.Workload, r.Limiter, rate(MedianOf(r.Rounds, func(x Round) float64 { return x.ThroughputPerS })),
			nanos(MedianOf(r.Rounds, func(x Round) float64 { return x.P50NS })), nanos(MedianOf(r.Rounds, func(x Round) float64 { return x.P90NS })),
			"", strconv.Itoa(len(r.Rounds))}
		if c, ok := Costs(r); ok {
			row[5] = strconv.FormatFloat(c.Throughput, 'f', 2, 64)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func memoryTable(f *File) Table {
	t := Table{
		Name:  "memory",
		Title: "Memory per user: live heap per key held, after garbage collection",
		Note: "One request from each of the users, each key a fresh 16-byte string: a limiter that keeps its keys pays for them, " +
			"one that keeps a hash does not.",
		Header: []string{"limiter", "users", "bytes per user"},
		Left:   1,
	}
	var runs []Run
	for _, r := range f.Runs {
		if r.Mode != "memory" {
			continue
		}
		runs = append(runs, r)
		t.Rows = append(t.Rows, []string{r.Limiter, count(int64(r.Users)), strconv.FormatFloat(r.BytesPerUser, 'f', 1, 64)})
	}
	t.Note = withNotes(t.Note, runs)
	return t
}

func (t Table) config() tablewriter.Config {
	align := make([]tw.Align, len(t.Header))
	for i := range align {
		align[i] = tw.AlignRight
		if i < t.Left {
			align[i] = tw.AlignLeft
		}
	}
	return tablewriter.Config{
		Header: tw.CellConfig{Formatting: tw.CellFormatting{AutoFormat: tw.Off}},
		Row:    tw.CellConfig{Alignment: tw.CellAlignment{PerColumn: align}},
	}
}

// Text writes t for a terminal: its title, the table, and its note.
func (t Table) Text(w io.Writer) error {
	fmt.Fprintf(w, "%s\n", t.Title)
	tb := tablewriter.NewTable(w, tablewriter.WithConfig(t.config()))
	tb.Header(t.Header)
	if err := tb.Bulk(t.Rows); err != nil {
		return err
	}
	if err := tb.Render(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", Wrap(t.Note, 100))
	return err
}

// Markdown writes t as a Markdown section: a heading, the note, the table.
func (t Table) Markdown(w io.Writer) error { return t.MarkdownAt(w, 2) }

// MarkdownAt is Markdown with a heading of the given level (2 is "##").
func (t Table) MarkdownAt(w io.Writer, level int) error {
	fmt.Fprintf(w, "%s %s\n\n%s\n\n", strings.Repeat("#", max(level, 1)), t.Title, t.Note)
	tb := tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()), tablewriter.WithConfig(t.config()))
	tb.Header(t.Header)
	if err := tb.Bulk(t.Rows); err != nil {
		return err
	}
	return tb.Render()
}

// Wrap breaks s into lines of at most width characters, at spaces.
func Wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteByte('\n')
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// percent formats a fraction as a percentage, "" for none.
func percent(f *float64) string {
	switch {
	case f == nil:
		return ""
	case *f == 0:
		return "0%"
	case *f < 0.001:
		return "<0.1%"
	}
	return strconv.FormatFloat(100**f, 'f', 1, 64) + "%"
}

// count formats n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + count(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// countRate formats a count and its rate per request as a percentage.
func countRate(n int64, rate float64) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%s (%s%%)", count(n), strconv.FormatFloat(100*rate, 'g', 3, 64))
}

// nanos formats a time in nanoseconds with a unit fit for its size.
func nanos(ns float64) string {
	switch {
	case ns == 0:
		return "0"
	case ns < 1000:
		return strconv.FormatFloat(ns, 'f', 0, 64) + "ns"
	case ns < 1e6:
		return strconv.FormatFloat(ns/1e3, 'f', 1, 64) + "µs"
	case ns < 1e9:
		return strconv.FormatFloat(ns/1e6, 'f', 1, 64) + "ms"
	}
	return time.Duration(ns).Round(10 * time.Millisecond).String()
}

// rate formats a rate per second.
func rate(r float64) string {
	switch {
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'f', 2, 64) + "M/s"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'f', 0, 64) + "k/s"
	}
	return strconv.FormatFloat(math.Round(r), 'f', 0, 64) + "/s"
}

// WriteDir writes f into dir (created if need be): results.json, and its
// tables as tables.md and tables.txt. It returns the paths written.
func WriteDir(dir string, f *File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(dir, "results.json"), filepath.Join(dir, "tables.md"), filepath.Join(dir, "tables.txt")}
	if err := WriteFile(paths[0], f); err != nil {
		return nil, err
	}
	var md, txt bytes.Buffer
	fmt.Fprintf(&md, "# ratelab: %s\n\n%s\n\n", f.Meta.Start.Format(time.RFC3339), MetaLine(f))
	for i, t := range Tables(f) {
		if i > 0 {
			md.WriteString("\n")
			txt.WriteString("\n")
		}
		if err := t.Markdown(&md); err != nil {
			return nil, err
		}
		if err := t.Text(&txt); err != nil {
			return nil, err
		}
	}
	if err := WriteAtomic(paths[1], md.Bytes()); err != nil {
		return nil, err
	}
	if err := WriteAtomic(paths[2], txt.Bytes()); err != nil {
		return nil, err
	}
	return paths, nil
}

// MetaLine says in one line what machine and parameters f ran with.
func MetaLine(f *File) string {
	m, p := f.Meta, f.Meta.Params
	quick := ""
	if p.Quick {
		quick = ", quick"
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s; seed %d%s; limit %d per %v; %v of simulated time per workload, %d users (%d attacking, %s in many-users).",
		m.CPU, m.Cores, m.GOMAXPROCS, m.GoVersion, m.Seed, quick, p.Limit, p.Window.Duration(), p.Simulated.Duration(), p.Users, p.Attackers, count(int64(p.ManyUsers)))
}

// SimulationSpeed says how many decisions a second simulated time made, the
// limiters and the harness together; "" if there were none.
func SimulationSpeed(f *File) string {
	var decisions int64
	for _, r := range f.Runs {
		if r.Mode == "simulated" {
			decisions += r.Decisions
		}
	}
	if decisions == 0 || f.Meta.SimulationPerS == 0 {
		return ""
	}
	return fmt.Sprintf("Simulated time: %s decisions at %.1f million a second on one core (limiters and harness together).", count(decisions), f.Meta.SimulationPerS/1e6)
}

// Skipped lists the runs that did not happen, and why: a line a reason,
// naming the limiters and workloads it kept from running ("a, b on w1,
// w2: why", every named limiter skipped on every named workload), so that
// a server that did not answer is one line, not one a run.
func Skipped(f *File) []string {
	type group struct {
		why      string
		limiters []string
		on       map[string][]string // each limiter's workloads
	}
	var groups []*group
	for _, r := range f.Runs {
		if r.SkippedBecause == "" {
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.why == r.SkippedBecause })
		if i < 0 {
			groups = append(groups, &group{why: r.SkippedBecause, on: map[string][]string{}})
			i = len(groups) - 1
		}
		g := groups[i]
		if !slices.Contains(g.limiters, r.Limiter) {
			g.limiters = append(g.limiters, r.Limiter)
		}
		if !slices.Contains(g.on[r.Limiter], r.Workload) {
			g.on[r.Limiter] = append(g.on[r.Limiter], r.Workload)
		}
	}
	var out []string
	for _, g := range groups {
		// Limiters skipped on the same workloads share a line.
		var lines, names [][]string
		for _, l := range g.limiters {
			i := slices.IndexFunc(lines, func(ws []string) bool { return slices.Equal(ws, g.on[l]) })
			if i < 0 {
				lines, names = append(lines, g.on[l]), append(names, nil)
				i = len(lines) - 1
			}
			names[i] = append(names[i], l)
		}
		for i, ws := range lines {
			out = append(out, fmt.Sprintf("%s on %s: %s", strings.Join(names[i], ", "), strings.Join(ws, ", "), g.why))
		}
	}
	return out
}

// withNotes returns note followed by each distinct Note of runs, in order.
func withNotes(note string, runs []Run) string {
	var seen []string
	for _, r := range runs {
		if r.Note != "" && !slices.Contains(seen, r.Note) {
			seen = append(seen, r.Note)
			note += " " + r.Note
		}
	}
	return note
}

// twins says, for an accuracy table, whether the limiters kept outside the
// process decided as the same algorithm in memory did on the same
// requests; "" when the table has none.
func twins(runs []Run) string {
	var n, differ int64
	var where []string
	for _, r := range runs {
		if d := r.DiffersFromMemory; d != nil {
			n += r.Decisions
			if *d > 0 {
				differ += *d
				where = append(where, fmt.Sprintf("%s on %s, %s of %s", r.Limiter, r.Workload, count(*d), count(r.Decisions)))
			}
		}
	}
	switch {
	case n == 0:
		return ""
	case differ == 0:
		return fmt.Sprintf(" Each row kept in a server decided as the same algorithm in memory did on the same requests, all %s of them.", count(n))
	}
	return fmt.Sprintf(" Rows kept in a server that decided otherwise than the same algorithm in memory on the same requests (a bug): %s.", strings.Join(where, "; "))
}

func httpTable(f *File) Table {
	t := Table{
		Name:  "http",
		Title: "Over HTTP: ratelab serve on loopback, attacked by vegeta",
		Note: "The server of ratelab serve (package server: the middleware, limiters/httplimit, in front of a tiny JSON handler) runs in the lab's process on a loopback port, " +
			"each algorithm in memory; vegeta sends the workload's users in turn at the offered rate, the key in a header, after a warm-up on a key of its own that opens the connections (a tenth of the run). " +
			"The limit's window is scaled so that each key is asked for the workload's multiple of its limit. " +
			"Ideal 200s: the same requests, at the times vegeta sent them, through the same algorithm in memory; the server decides when it reads them, a little later. " +
			"Sent: the requests a second vegeta achieved (it sends fewer when its workers cannot keep up). Latency runs from send to the end of the response.",
		Header: []string{"workload", "limiter", "offered", "sent", "200", "429", "ideal 200s", "other", "errors", "p50", "p99", "max"},
		Left:   2,
	}
	var runs []Run
	for _, r := range f.Runs {
		if r.Mode != "http" || r.HTTP == nil || r.LatencyNS == nil {
			continue
		}
		runs = append(runs, r)
		h, l := r.HTTP, r.LatencyNS
		t.Rows = append(t.Rows, []string{
			r.Workload, r.Limiter, rate(r.OfferedRate), rate(r.ThroughputPerS),
			count(h.OK), count(h.Limited), count(h.Ideal), count(h.Other), count(h.Errors),
			nanos(l.P50), nanos(l.P99), nanos(l.Max),
		})
	}
	t.Note = withNotes(t.Note, runs)
	return t
}

func fleetTable(f *File) Table {
	t := Table{
		Name:  "fleet",
		Title: "A fleet: processes sharing one Redis, each with a client and a limiter of its own",
		Note: "The workload's requests go to the processes as a load balancer would send them: each to a process at random, or every request of a key to the same one (sticky). " +
			"In simulated time, on the sample of the workload the Redis rows decide: round trips a decision as the clients counted them, accuracy against the ideal, " +
			"and differs: decisions unlike the same algorithm's in memory (0: exact). In real time, every process's goroutines sending the requests routed to it as fast as they can, " +
			"so keys are asked far beyond their limit: decisions a second, p99, round trips a decision, and the server's CPU a decision (INFO cpu). " +
			"Plain: one round trip a decision; batched: decisions gathered into batches; cached: Redis's denials remembered in each process until their retry-after (exact); " +
			"lease: each process leases units of a key's quota and admits from them for at most a lease time τ (approximate: at most C + (D+τ)·R in any interval D, where the exact limiter admits C + D·R).",
		Header: []string{"workload", "limiter", "routing", "round trips/decision", "round trips/admitted", "false allows", "false denies", "most in any W", "differs",
			"real time: decisions/s", "p99", "round trips/decision", "server CPU/decision"},
		Left: 3,
	}
	var runs []Run
	for _, r := range f.Runs {
		fl := r.Fleet
		if r.Mode != "fleet" || fl == nil || r.SkippedBecause != "" {
			continue
		}
		runs = append(runs, r)
		row := []string{r.Workload, r.Limiter, fmt.Sprintf("%s, %d", fl.Routing, fl.Processes), "", "", "", "", "", ""}
		if a := r.Accuracy; a != nil {
			row[3] = strconv.FormatFloat(fl.RoundTripsSimulated, 'f', 3, 64)
			if a.Admitted > 0 {
				row[4] = strconv.FormatFloat(fl.RoundTripsPerAdmitted, 'f', 3, 64)
			}
			row[5], row[6] = countRate(a.FalseAllow, a.FalseAllowRate), countRate(a.FalseDeny, a.FalseDenyRate)
			row[7] = strconv.FormatFloat(a.MaxWindowRatio, 'f', 2, 64)
			if r.DiffersFromMemory != nil {
				row[8] = count(*r.DiffersFromMemory)
			}
		}
		p99 := ""
		if r.LatencyNS != nil {
			p99 = nanos(r.LatencyNS.P99)
		}
		row = append(row, rate(r.ThroughputPerS), p99, strconv.FormatFloat(fl.RoundTrips, 'f', 3, 64), nanos(fl.ServerCPUNS))
		t.Rows = append(t.Rows, row)
	}
	t.Note = withNotes(t.Note, runs)
	return t
}

func outageTable(f *File) Table {
	t := Table{
		Name:  "outage",
		Title: "Redis taken away mid-run: what ratelab serve answers, per failure mode",
		Note: "ratelab serve's server decides on Redis through a proxy, attacked over loopback by vegeta at a steady rate, each user asking for twice its limit, " +
			"until the proxy takes Redis away (refused: as a server that is down; unanswered: as a network that drops everything) and later gives it back. " +
			"The answers are 200 · 429 · 503 as shares of the requests sent before, during and after; latency is of the requests sent while Redis was away. " +
			"Open serves everyone unmetered, closed refuses everyone, fallback decides in memory at the limit divided by the declared fleet. " +
			"Recovery: from Redis given back to the server's last decision made without it (its metrics, read every 10ms). " +
			"The server's breaker opens after 5 failures in a row and sends one probe a second later, so recovery is the wait for the next probe: " +
			"it depends on where in the breaker's cycle Redis comes back, and is at most the cool-down and a timeout (1s + 250ms), " +
			"and a second more when more dials failed at once than go-redis's pool holds connections (its own dial breaker then probes once a second).",
		Header: []string{"Redis", "failing", "before", "while away", "after", "p50 away", "p99 away", "max away", "recovery"},
		Left:   2,
	}
	var runs []Run
	for _, r := range f.Runs {
		o := r.Outage
		if r.Mode != "outage" || o == nil || r.SkippedBecause != "" {
			continue
		}
		runs = append(runs, r)
		fail := o.Failure
		if o.Fleet > 0 {
			fail = fmt.Sprintf("%s, fleet %d", fail, o.Fleet)
		}
		recovery := "not in " + (o.Bin.Duration() * time.Duration(len(o.Bins))).String()
		if o.Recovery != nil {
			recovery = nanos(float64(o.Recovery.Duration()))
		}
		l := o.During.LatencyNS
		t.Rows = append(t.Rows, []string{
			fmt.Sprintf("%s for %v", o.Kind, (o.Back - o.Away).Duration().Round(100*time.Millisecond)), fail,
			mix(o.Before.Answers), mix(o.During.Answers), mix(o.After.Answers),
			nanos(l.P50), nanos(l.P99), nanos(l.Max), recovery,
		})
	}
	if len(runs) > 0 {
		o := runs[0].Outage
		t.Note += fmt.Sprintf(" %s from %d users, each limited to %d per %v (%s).", rate(o.Rate), o.Users, o.Limit, o.Window.Duration(), runs[0].Limiter)
	}
	t.Note = withNotes(t.Note, runs)
	return t
}

// mix is the shares of a's answers that were 200, 429 and 503, in
// percent, and of the rest if any.
func mix(a Answers) string {
	n := a.Total()
	if n == 0 {
		return ""
	}
	p := func(k int64) string { return strconv.FormatFloat(100*float64(k)/float64(n), 'f', 0, 64) }
	s := p(a.OK) + " · " + p(a.Limited) + " · " + p(a.Unavailable)
	if rest := a.Other + a.Errors; rest > 0 {
		s += " (+" + p(rest) + " other)"
	}
	return s
}

func llmTable(f *File) Table {
	t := Table{
		Name:  "llm",
		Title: "Costs known after the response: an LLM endpoint limited in tokens, per way of charging, in simulated time",
		Note: "Each request's actual tokens are known only once its response is done; its client sends an estimate. Estimate only: charged the estimate, never corrected; " +
			"estimate then settle: the estimate reserved, then settled at the actual tokens when the response is done (refund or debt); max then settle: the most a request may cost reserved, then settled; " +
			"actual up front: the algorithm charged the actual tokens when the request is sent, for reference. " +
			"Judged on the actual tokens against the ideal, the sliding log charged each request its actual tokens when sent: false allows and denies, " +
			"tokens: the actual tokens admitted against the ideal's, and most in any W: the most actual tokens one key had admitted in any interval of the window's length, over the limit. " +
			"The token and leaky buckets decide as GCRA does, settles included, and are left out.",
		Header: []string{"limiter", "charged", "estimate", "requests", "admitted", "ideal", "false allows", "false denies", "tokens (of ideal)", "most in any W"},
		Left:   3,
	}
	var runs []Run
	for _, r := range f.Runs {
		x := r.LLM
		if r.Mode != "llm" || x == nil || r.Accuracy == nil || r.SkippedBecause != "" {
			continue
		}
		runs = append(runs, r)
		a := r.Accuracy
		share := ""
		if x.IdealTokens > 0 {
			share = fmt.Sprintf("%s (%s%%)", count(x.Tokens), strconv.FormatFloat(100*float64(x.Tokens)/float64(x.IdealTokens), 'f', 0, 64))
		}
		estimate := ""
		if x.Estimate > 0 {
			estimate = count(int64(x.Estimate))
		}
		t.Rows = append(t.Rows, []string{r.Limiter, x.Charge, estimate, count(r.Decisions), count(a.Admitted), count(a.Ideal),
			countRate(a.FalseAllow, a.FalseAllowRate), countRate(a.FalseDeny, a.FalseDenyRate), share, strconv.FormatFloat(a.MaxWindowRatio, 'f', 2, 64)})
	}
	if len(runs) > 0 {
		x := runs[0].LLM
		t.Note += fmt.Sprintf(" Each user limited to %s tokens per %v and asking for more; actual tokens log-normal, mean %s, spread %s (of their logarithm), at most %s; "+
			"the estimate is what the client sent: the mean, or less (a gateway that counts only the prompt's tokens).",
			count(int64(x.Limit)), x.Window.Duration(), strconv.FormatFloat(x.Mean, 'f', -1, 64), strconv.FormatFloat(x.Spread, 'f', -1, 64), count(int64(x.Max)))
	}
	t.Note = withNotes(t.Note, runs)
	return t
}
