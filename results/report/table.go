package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/results"
)

// TableSpec declares one of a mode's tables: a row of cells for each of
// the mode's rows it keeps, or, with a Pivot, a column for each value of
// a setting.
type TableSpec struct {
	// Name is the table's file name in the output folder, without an
	// extension; Title heads it; Note says how to read it.
	Name, Title, Note string
	Header            []string
	// Left is how many leading columns are labels (aligned left); the
	// rest are numbers (aligned right).
	Left int
	// Keep selects the rows the table shows, of the mode's measured ones
	// (nil: all of them).
	Keep func(results.Row) bool
	// Cells are a row's cells, one for each of Header's columns (with a
	// Pivot, the columns before the pivot's).
	Cells func(results.Row) []string
	// Pivot, if set, makes one table row of the rows with the same
	// Cells, and a column of each value of a setting.
	Pivot *Pivot
	// More, if set, says after Note what the rows shown have in common;
	// then come each distinct note of the rows; then Last's.
	More, Last func(rows []results.Row) string
}

// Pivot spreads a setting's values over columns: the rows that have the
// same Cells make one table row, with a column for each value of the
// setting By (an integer, in increasing order, headed by Head), holding
// Cell of the row with that value; then Tail's columns, of the first such
// row.
type Pivot struct {
	By   string
	Head func(v int) string
	Cell func(results.Row) string
	// TailHeader heads the columns Tail fills.
	TailHeader []string
	Tail       func(first results.Row) []string
}

// Tables returns the tables of f, mode by mode, leaving out those f has no
// rows for.
func Tables(f *results.File, ms Modes) []Table {
	var out []Table
	for _, m := range ms {
		rows := measuredRows(f.RowsOf(m.Name))
		for _, spec := range m.Tables {
			if t := spec.build(rows); len(t.Rows) > 0 {
				t.Mode = m.Name
				out = append(out, t)
			}
		}
	}
	return out
}

// build makes the table of rows.
func (s TableSpec) build(rows []results.Row) Table {
	var kept []results.Row
	for _, r := range rows {
		if s.Keep == nil || s.Keep(r) {
			kept = append(kept, r)
		}
	}
	t := Table{Name: s.Name, Title: s.Title, Header: slices.Clone(s.Header), Left: s.Left}
	if s.Pivot != nil {
		t.Header, t.Rows = s.Pivot.spread(t.Header, kept, s.Cells)
	} else {
		for _, r := range kept {
			t.Rows = append(t.Rows, s.Cells(r))
		}
	}
	t.Note = s.Note
	if s.More != nil && len(kept) > 0 {
		t.Note += s.More(kept)
	}
	t.Note = withNotes(t.Note, kept)
	if s.Last != nil {
		t.Note += s.Last(kept)
	}
	return t
}

// spread makes the pivoted table of rows: its header, after header, and
// its rows.
func (p *Pivot) spread(header []string, rows []results.Row, cells func(results.Row) []string) ([]string, [][]string) {
	var values []int
	type line struct {
		label []string
		first results.Row
		at    map[int]string
	}
	var lines []*line
	for _, r := range rows {
		label := cells(r)
		i := slices.IndexFunc(lines, func(l *line) bool { return slices.Equal(l.label, label) })
		if i < 0 {
			lines = append(lines, &line{label: label, first: r, at: map[int]string{}})
			i = len(lines) - 1
		}
		v := r.SettingInt(p.By)
		lines[i].at[v] = p.Cell(r)
		if !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	for _, v := range values {
		header = append(header, p.Head(v))
	}
	header = append(header, p.TailHeader...)
	var out [][]string
	for _, l := range lines {
		row := slices.Clone(l.label)
		for _, v := range values {
			row = append(row, l.at[v])
		}
		if p.Tail != nil {
			row = append(row, p.Tail(l.first)...)
		}
		out = append(out, row)
	}
	return header, out
}

// withNotes returns note followed by each distinct Note of rows, in order.
func withNotes(note string, rows []results.Row) string {
	var seen []string
	for _, r := range rows {
		if r.Note != "" && !slices.Contains(seen, r.Note) {
			seen = append(seen, r.Note)
			note += " " + r.Note
		}
	}
	return note
}

// Twins says, for a table of accuracy, whether the limiters kept outside
// the process decided as the same algorithm in memory did on the same
// requests; "" when the table has none.
func Twins(rows []results.Row) string {
	var n, differ int64
	var where []string
	for _, r := range rows {
		d, ok := r.Value(results.DiffersFromMemory)
		if !ok {
			continue
		}
		n += r.Count(results.Decisions)
		if d > 0 {
			differ += int64(d)
			where = append(where, fmt.Sprintf("%s on %s, %s of %s", r.Limiter, r.Workload, results.Count(int64(d)), results.Count(r.Count(results.Decisions))))
		}
	}
	switch {
	case n == 0:
		return ""
	case differ == 0:
		return fmt.Sprintf(" Each row kept in a server decided as the same algorithm in memory did on the same requests, all %s of them.", results.Count(n))
	}
	return fmt.Sprintf(" Rows kept in a server that decided otherwise than the same algorithm in memory on the same requests (a bug): %s.", strings.Join(where, "; "))
}

// Judged formats the limit a row's accuracy was judged against, N per W:
// "100/1s", or for a bucket C per C/R, "100/1s (C/R)"; "" for none.
func Judged(r results.Row, bucket bool) string {
	n := r.Setting(results.JudgedN)
	if n == "" {
		return ""
	}
	if bucket {
		return fmt.Sprintf("%s/%s (C/R)", n, r.Setting(results.JudgedPer))
	}
	return fmt.Sprintf("%s/%s", n, r.Setting(results.JudgedPer))
}

// Fixed formats v with digits after the point.
func Fixed(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }

// measuredRows returns the rows of rows that were measured.
func measuredRows(rows []results.Row) []results.Row {
	return slices.DeleteFunc(slices.Clone(rows), func(r results.Row) bool { return !r.Measured() })
}
