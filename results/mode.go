package results

import "slices"

// Mode is one way the lab measures, declared once, in one file (the
// harness's, beside the code that measures): its name, what it measures,
// its tables, its charts, its picks and what the gate compares of it.
// Everything that reports on a file (the tables, the report, the picks,
// compare, merge, the gate) reads a mode's rows through its Mode.
type Mode struct {
	// Name is the mode's name, as --modes and the rows say it.
	Name string
	// About says in a line what the mode measures, for bench --help.
	About string
	// Order places the mode among the others: in the lab's run, the
	// tables and the report, lowest first.
	Order int
	// Tables are the mode's tables; a table with no rows is left out.
	Tables []TableSpec
	// Scored says the mode's rows count in the scorecard: the headline
	// numbers of accuracy, throughput, latency and memory, and the picks
	// made from them.
	Scored bool
	// Picks are the mode's own answers to "which limiter should I pick?",
	// from its measured rows of f.
	Picks func(f *File, rows []Row) []Pick
	// Charts are the mode's charts, from its measured rows of f (which may
	// be none: a chart may draw on other modes' rows too); a figure with
	// no panel is left out.
	Charts func(f *File, rows []Row) []Figure
	// Gates are the metrics compare and the gate compare, and merge pools.
	Gates []Gate
	// Outside says the lab's bench does not run the mode: its rows come
	// from a limiter judged from outside (ratelab probe), and only its
	// tables, charts and report are the lab's.
	Outside bool
}

// Modes are the modes a report knows, in their Order: the lab's
// (harness.Modes) or the probe's. Everything that reports on a file (the
// tables, the report, the picks, compare, merge, the gate) is given them,
// and reads each mode's rows through its Mode.
type Modes []Mode

// Named returns the mode of that name, and whether ms has it.
func (ms Modes) Named(name string) (Mode, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return Mode{}, false
}

// gates returns the gates of mode m, nil for a mode ms does not have.
func (ms Modes) gates(m string) []Gate {
	mode, _ := ms.Named(m)
	return mode.Gates
}

// scored reports whether rows of mode m count in the scorecard; a mode ms
// does not have does not.
func (ms Modes) scored(m string) bool {
	mode, ok := ms.Named(m)
	return ok && mode.Scored
}

// RowsOf returns f's rows of mode m, measured or skipped, in order.
func (f *File) RowsOf(m string) []Row {
	var out []Row
	for _, r := range f.Rows {
		if r.Mode == m {
			out = append(out, r)
		}
	}
	return out
}

// measuredRows returns the rows of rows that were measured.
func measuredRows(rows []Row) []Row {
	return slices.DeleteFunc(slices.Clone(rows), func(r Row) bool { return !r.Measured() })
}
