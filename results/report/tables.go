package report

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
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/ratelab/ratelab/limiters"

	"github.com/ratelab/ratelab/results"
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
	// Mode is the mode the table is of, whose section it goes in.
	Mode string
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

// TextWidth is the most columns a table's text takes: what an ordinary
// terminal shows without wrapping its lines.
const TextWidth = 120

// fitted is t's configuration with its widest columns wrapped, in turn,
// until the table fits width columns, or each of them is down to its
// longest word (then it is as narrow as it goes).
func (t Table) fitted(width int) tablewriter.Config {
	c := t.config()
	n := len(t.Header)
	if n == 0 {
		return c
	}
	cols, cells, least := t.measure()
	room := width - (3*n + 1) // each column's padding and border, and the last border
	total := 0
	for _, w := range cols {
		total += w
	}
	if total <= room {
		return c
	}
	// First the headers wider than their column's cells ("allocs per
	// decision" over 0.00), down to the cells; then the words (the label
	// columns, and those whose cells say more than a figure); then any
	// column: a figure wrapped reads worst.
	wordy := t.wordy()
	narrowed := narrow(cols, total-room,
		func(i int) int { return max(cells[i], least[i]) },
		func(i int) int {
			if wordy[i] {
				return least[i]
			}
			return cols[i]
		},
		func(i int) int { return least[i] })
	per := tw.NewMapper[int, int]()
	for i := range narrowed {
		per.Set(i, cols[i])
	}
	for _, cc := range []*tw.CellConfig{&c.Header, &c.Row} {
		cc.ColMaxWidths = tw.CellWidth{PerColumn: per}
		cc.Formatting.AutoWrap = tw.WrapNormal
	}
	// A column wrapped is words, not a number: read from the left.
	for i := range narrowed {
		if wordy[i] {
			c.Row.Alignment.PerColumn[i] = tw.AlignLeft
		}
	}
	return c
}

// measure returns, for each of t's columns, its widest line (the header's
// too), its widest cell's line, and its longest word.
func (t Table) measure() (cols, cells, least []int) {
	n := len(t.Header)
	cols, least, cells = make([]int, n), make([]int, n), make([]int, n)
	add := func(row []string, header bool) {
		for i, cell := range row[:min(len(row), n)] {
			for line := range strings.SplitSeq(cell, "\n") {
				cols[i] = max(cols[i], twwidth.Width(line))
				if !header {
					cells[i] = max(cells[i], twwidth.Width(line))
				}
				for word := range strings.FieldsSeq(line) {
					least[i] = max(least[i], twwidth.Width(word))
				}
			}
		}
	}
	add(t.Header, true)
	for _, r := range t.Rows {
		add(r, false)
	}
	return cols, cells, least
}

// wordy says which of t's columns are words: the label columns, and
// those whose cells say more than a figure.
func (t Table) wordy() []bool {
	wordy := make([]bool, len(t.Header))
	for i := range wordy {
		wordy[i] = i < t.Left
		for _, r := range t.Rows {
			if i >= len(r) {
				continue
			}
			for line := range strings.SplitSeq(r[i], "\n") {
				wordy[i] = wordy[i] || len(strings.Fields(line)) > 2
			}
		}
	}
	return wordy
}

// narrow takes over columns from cols, a column at a time from the
// widest, down to each floor in turn (a column's least width at that
// step), and says which it narrowed.
func narrow(cols []int, over int, floors ...func(i int) int) map[int]bool {
	narrowed := map[int]bool{}
	for _, floor := range floors {
		for over > 0 {
			widest := -1
			for i, w := range cols {
				if w > floor(i) && (widest < 0 || w > cols[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			cols[widest]--
			over--
			narrowed[widest] = true
		}
	}
	return narrowed
}

// Text writes t for a terminal: its title, the table, and its note. A
// table wider than TextWidth has its widest columns wrapped to fit; one
// that cannot fit so (too many columns, as narrow as their words) is
// split: its label columns and as many of the others as fit, then the
// label columns again with the rest, "(continued)".
func (t Table) Text(w io.Writer) error {
	if err := t.textTable(w, t.Title); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", results.Wrap(t.Note, 100))
	return err
}

// textTable writes t's table under title, split as Text says.
func (t Table) textTable(w io.Writer, title string) error {
	out, err := t.render()
	if err != nil {
		return err
	}
	n := len(t.Header)
	if width(out) > TextWidth && n-t.Left >= 2 {
		// The most columns whose table fits, at least one beyond the
		// labels; then, if the rest would fit in one more table, the
		// columns halved between the two (two tables of seven read better
		// than one of ten and one of one).
		for k := n - 1; k > t.Left; k-- {
			out, err := t.columns(0, k).render()
			if err != nil {
				return err
			}
			if width(out) > TextWidth && k > t.Left+1 {
				continue
			}
			if half := t.Left + (n-t.Left+1)/2; half < k {
				rest, err := t.columns(half, n).render()
				if err != nil {
					return err
				}
				if width(rest) <= TextWidth {
					k = half
					if out, err = t.columns(0, k).render(); err != nil {
						return err
					}
				}
			}
			fmt.Fprintf(w, "%s\n%s", title, out)
			return t.columns(k, n).textTable(w, strings.TrimSuffix(t.Title, " (continued)")+" (continued)")
		}
	}
	_, err = fmt.Fprintf(w, "%s\n%s", title, out)
	return err
}

// columns is t with its label columns and its columns [from, to).
func (t Table) columns(from, to int) Table {
	pick := func(row []string) []string {
		var out []string
		for i, c := range row {
			if i < t.Left || i >= max(from, t.Left) && i < to {
				out = append(out, c)
			}
		}
		return out
	}
	c := t
	c.Header = pick(t.Header)
	c.Rows = make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		c.Rows[i] = pick(r)
	}
	return c
}

// width is the most columns a line of out takes.
func width(out string) int {
	w := 0
	for line := range strings.SplitSeq(out, "\n") {
		w = max(w, twwidth.Width(line))
	}
	return w
}

// render draws t's table, fitted to TextWidth as far as its columns go.
func (t Table) render() (string, error) {
	// tablewriter wraps a column at a word, and may take a column or so
	// more than asked: asked again for less, as often as it takes.
	var out bytes.Buffer
	for width := TextWidth; ; {
		out.Reset()
		tb := tablewriter.NewTable(&out, tablewriter.WithConfig(t.fitted(width)))
		tb.Header(t.Header)
		if err := tb.Bulk(t.Rows); err != nil {
			return "", err
		}
		if err := tb.Render(); err != nil {
			return "", err
		}
		over := 0
		for line := range strings.SplitSeq(out.String(), "\n") {
			over = max(over, twwidth.Width(line)-TextWidth)
		}
		if over <= 0 || width < TextWidth/2 {
			break
		}
		width -= over
	}
	return out.String(), nil
}

// Markdown writes t as a Markdown section: a heading, the note, the table.
func (t Table) Markdown(w io.Writer) error { return t.MarkdownAt(w, 2) }

// MarkdownAt is Markdown with a heading of the given level (2 is "##").
func (t Table) MarkdownAt(w io.Writer, level int) error {
	fmt.Fprintf(w, "%s %s\n\n%s\n\n", strings.Repeat("#", max(level, 1)), t.Title, t.Note)
	tb := tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()), tablewriter.WithConfig(t.config()))
	tb.Header(t.Header)
	// A cell of two lines is one line of a Markdown table, broken.
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		for _, c := range r {
			rows[i] = append(rows[i], strings.ReplaceAll(c, "\n", "<br>"))
		}
	}
	if err := tb.Bulk(rows); err != nil {
		return err
	}
	return tb.Render()
}

// Percent formats a row's metric, a fraction, as a percentage; "" when
// the row has none.
func Percent(r results.Row, name string) string {
	f, ok := r.Value(name)
	switch {
	case !ok:
		return ""
	case f == 0:
		return "0%"
	case f < 0.001:
		return "<0.1%"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}

// CountRate formats a count and its rate per request as a percentage.
func CountRate(n int64, rate float64) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%s (%s%%)", results.Count(n), strconv.FormatFloat(100*rate, 'g', 3, 64))
}

// Nanos formats a time in nanoseconds with a unit fit for its size.
func Nanos(ns float64) string {
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

// Rate formats a rate per second.
func Rate(r float64) string {
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
func WriteDir(dir string, f *results.File, ms Modes) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(dir, "results.json"), filepath.Join(dir, "tables.md"), filepath.Join(dir, "tables.txt")}
	if err := results.WriteFile(paths[0], f); err != nil {
		return nil, err
	}
	var md, txt bytes.Buffer
	fmt.Fprintf(&md, "# ratelab: %s\n\n%s\n\n", f.Meta.Start.Format(time.RFC3339), MetaLine(f))
	for i, t := range Tables(f, ms) {
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
	if err := results.WriteAtomic(paths[1], md.Bytes()); err != nil {
		return nil, err
	}
	if err := results.WriteAtomic(paths[2], txt.Bytes()); err != nil {
		return nil, err
	}
	return paths, nil
}

// MetaLine says in one line what machine and parameters f ran with.
func MetaLine(f *results.File) string {
	m := f.Meta
	quick := ""
	if m.Setting("quick") == "true" {
		quick = ", quick"
	}
	limit, _ := limiters.ParseLimit(m.Setting("limit"))
	simulated, _ := time.ParseDuration(m.Setting("simulated"))
	manyUsers, _ := strconv.ParseInt(m.Setting("many-users"), 10, 64)
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s; seed %d%s; limit %d per %v; %v of simulated time per workload, %s users (%s attacking, %s in many-users).",
		m.CPU, m.Cores, m.GOMAXPROCS, m.GoVersion, m.Seed, quick, limit.N, limit.Per, simulated, m.Setting("users"), m.Setting("attackers"), results.Count(manyUsers))
}

// SimulationSpeed says how many decisions a second simulated time made, the
// limiters and the harness together; "" if there were none.
func SimulationSpeed(f *results.File) string {
	if f.Meta.SimulatedDecisions == 0 || f.Meta.SimulationPerS == 0 {
		return ""
	}
	return fmt.Sprintf("Simulated time: %s decisions at %.1f million a second on one core (limiters and harness together).", results.Count(f.Meta.SimulatedDecisions), f.Meta.SimulationPerS/1e6)
}

// Skipped lists the runs that did not happen, and why: a line a reason,
// naming the limiters and workloads it kept from running ("a, b on w1,
// w2: why", every named limiter skipped on every named workload), so that
// a server that did not answer is one line, not one a run.
func Skipped(f *results.File) []string {
	type group struct {
		why      string
		limiters []string
		on       map[string][]string // each limiter's workloads
	}
	var groups []*group
	for _, r := range f.Rows {
		if r.Skipped == "" {
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.why == r.Skipped })
		if i < 0 {
			groups = append(groups, &group{why: r.Skipped, on: map[string][]string{}})
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
