package results_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// tablesMode is a mode of the tests' own whose tables show what a
// TableSpec does: a plain one, a pivoted one, and one that never has rows.
const tablesMode = "test-tables"

// tables is the mode tablesMode names.
var tables = report.Mode{Mode: results.Mode{Name: tablesMode, Order: 1001}, Tables: []report.TableSpec{{
	Name: "plain", Title: "Plain", Note: "How to read it.", Header: []string{"limiter", "n"}, Left: 1,
	Keep:  func(r results.Row) bool { return r.Has("n") },
	Cells: func(r results.Row) []string { return []string{r.Limiter, report.Fixed(r.Get("n"), 0)} },
	More:  func(rows []results.Row) string { return fmt.Sprintf(" %d rows.", len(rows)) },
	Last:  func([]results.Row) string { return " The end." },
}, {
	Name: "pivot", Title: "Pivot", Header: []string{"workload", "limiter"}, Left: 2,
	Keep:  func(r results.Row) bool { return r.Has(results.Throughput) },
	Cells: func(r results.Row) []string { return []string{r.Workload, r.Limiter} },
	Pivot: &report.Pivot{
		By:         results.Goroutines,
		Head:       func(g int) string { return fmt.Sprintf("%d g", g) },
		Cell:       func(r results.Row) string { return report.Rate(r.Get(results.Throughput)) },
		TailHeader: []string{"mark"},
		Tail:       func(first results.Row) []string { return []string{first.Setting("mark")} },
	},
}, {
	Name: "never", Title: "Never", Header: []string{"limiter"},
	Keep:  func(results.Row) bool { return false },
	Cells: func(r results.Row) []string { return []string{r.Limiter} },
}}}

// tput is a row of the tables mode that made tput decisions a second
// with g goroutines.
func tput(workload, limiter string, g int, tput float64, mark string) results.Row {
	r := results.Row{Mode: tablesMode, Workload: workload, Limiter: limiter}
	r.SetInt(results.Goroutines, g)
	if mark != "" {
		r.Set("mark", mark)
	}
	r.Add(results.Throughput, results.UnitPerS, tput)
	return r
}

// TestTableSpec checks each part of a mode's table: which rows it keeps,
// their cells, a pivot's columns (one for each value of the setting, in
// increasing order, whatever the rows' order), the tail of a pivoted row
// (from its first row), and the note (the spec's, More's, each row's
// note once, Last's). A table with no rows is left out, and so are the
// rows not measured.
func TestTableSpec(t *testing.T) {
	gcra16 := tput("uniform", "gcra", 16, 3e6, "first")
	gcra16.Note = "A note."
	fw := tput("uniform", "fixed-window", 1, 1e6, "")
	fw.Note = "A note."
	notMeasured := tput("uniform", "gcra", 4, 0, "")
	notMeasured.Skipped = "not measured"
	f := &results.File{Rows: []results.Row{
		gcra16,
		tput("uniform", "gcra", 2, 2e6, "second"),
		fw,
		tput("bursty", "gcra", 2, 5e5, ""),
		notMeasured,
		with(results.Row{Mode: tablesMode, Limiter: "gcra"}, "n", results.UnitCount, 7),
		with(results.Row{Mode: tablesMode, Limiter: "sliding-log", Note: "Another."}, "n", results.UnitCount, 9),
		with(results.Row{Mode: "timing", Limiter: "not this mode's"}, "n", results.UnitCount, 1),
	}}
	tables := report.Tables(f, modes)
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Name)
	}
	if !slices.Equal(names, []string{"plain", "pivot"}) {
		t.Fatalf("tables %q, want plain and pivot", names)
	}
	plain, pivot := tables[0], tables[1]
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"plain header", plain.Header, []string{"limiter", "n"}},
		{"plain rows", plain.Rows, [][]string{{"gcra", "7"}, {"sliding-log", "9"}}},
		{"plain note", plain.Note, "How to read it. 2 rows. Another. The end."},
		{"plain title and left", fmt.Sprint(plain.Title, " ", plain.Left), "Plain 1"},
		{"pivot header", pivot.Header, []string{"workload", "limiter", "1 g", "2 g", "16 g", "mark"}},
		{"pivot rows", pivot.Rows, [][]string{
			{"uniform", "gcra", "", "2.00M/s", "3.00M/s", "first"},
			{"uniform", "fixed-window", "1.00M/s", "", "", ""},
			{"bursty", "gcra", "", "500k/s", "", ""},
		}},
		{"pivot note", pivot.Note, " A note."},
		{"pivot left", pivot.Left, 2},
	} {
		switch want := c.want.(type) {
		case []string:
			if got := c.got.([]string); !slices.Equal(got, want) {
				t.Errorf("%s: %q, want %q", c.name, got, want)
			}
		case [][]string:
			if got := c.got.([][]string); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s:\n%q\nwant\n%q", c.name, got, want)
			}
		default:
			if c.got != c.want {
				t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
			}
		}
	}
	// The spec's header is not the pivot's to grow.
	if again := report.Tables(f, modes); !slices.Equal(again[1].Header, pivot.Header) {
		t.Errorf("the pivot's header the second time: %q, want %q", again[1].Header, pivot.Header)
	}
	var txt strings.Builder
	if err := pivot.Text(&txt); err != nil || !strings.Contains(txt.String(), "16 g") {
		t.Errorf("the pivot as text (%v):\n%s", err, txt.String())
	}
}

// The judged limit of an accuracy row, as a window's N per W or a
// bucket's C over C/R; and the twins note, of rows kept in a server
// checked against memory.
func TestJudgedAndTwins(t *testing.T) {
	r := accuracy(results.Row{}, 1000, results.Accuracy{MaxWindowRatio: 1})
	for _, c := range []struct{ got, want string }{
		{report.Judged(r, false), "100/1s"},
		{report.Judged(r, true), "100/1s (C/R)"},
		{report.Judged(results.Row{}, false), ""},
	} {
		if c.got != c.want {
			t.Errorf("Judged = %q, want %q", c.got, c.want)
		}
	}
	same := with(results.Row{Limiter: "gcra (redis)", Workload: "uniform"}, results.Decisions, results.UnitCount, 1000)
	same.Add(results.DiffersFromMemory, results.UnitCount, 0)
	other := with(clone(same), results.DiffersFromMemory, results.UnitCount, 3)
	other.Workload = "bursty"
	for _, c := range []struct {
		rows []results.Row
		want string
	}{
		{nil, ""},
		{[]results.Row{r}, ""},
		{[]results.Row{r, same}, " Each row kept in a server decided as the same algorithm in memory did on the same requests, all 1,000 of them."},
		{[]results.Row{same, other}, " Rows kept in a server that decided otherwise than the same algorithm in memory on the same requests (a bug): gcra (redis) on bursty, 3 of 1,000."},
	} {
		if got := report.Twins(c.rows); got != c.want {
			t.Errorf("Twins = %q, want %q", got, c.want)
		}
	}
}

// A table that cannot fit TextWidth by wrapping (too many columns, each
// as narrow as its words) is split: its label columns again in each
// part, every cell in one of them, no line over TextWidth.
func TestTextSplitsWideTable(t *testing.T) {
	tb := report.Table{Title: "Wide", Note: "The note.", Left: 2,
		Header: []string{"workload", "limiter"}}
	for i := range 11 {
		tb.Header = append(tb.Header, fmt.Sprintf("metric %d", i))
	}
	for _, w := range []string{"uniform", "boundary-attack"} {
		row := []string{w, "sliding-counter"}
		for i := range 11 {
			row = append(row, fmt.Sprintf("%d,595,299", 3+i))
		}
		tb.Rows = append(tb.Rows, row)
	}
	var b strings.Builder
	if err := tb.Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > report.TextWidth {
			t.Errorf("a line of %d columns: %s", n, line)
		}
	}
	if strings.Count(out, "Wide (continued)\n") < 1 || strings.Count(out, "boundary-attack") < 2 || strings.Count(out, "The note.") != 1 {
		t.Errorf("want the table split, labels in each part, the note once:\n%s", out)
	}
	for i := range 11 {
		if !strings.Contains(out, fmt.Sprintf("%d,595,299", 3+i)) || !strings.Contains(out, fmt.Sprintf("metric %d", i)) {
			t.Errorf("column %d is missing:\n%s", i, out)
		}
	}
	// A table that fits is not split.
	b.Reset()
	if err := tb.Text(&b); err != nil {
		t.Fatal(err)
	}
	small := tb
	small.Header, small.Rows = tb.Header[:4], [][]string{tb.Rows[0][:4]}
	b.Reset()
	if err := small.Text(&b); err != nil || strings.Contains(b.String(), "continued") {
		t.Errorf("a table that fits: %v\n%s", err, b.String())
	}
}
