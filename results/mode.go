package results

// Mode is one way the lab measures, declared once, in one file (the
// harness's, beside the code that measures): its name, what it measures,
// and what compare, merge and the gate compare of it. Its tables, charts
// and picks are the presentation's (package results/report).
type Mode struct {
	// Name is the mode's name, as --modes and the rows say it.
	Name string
	// About says in a line what the mode measures, for bench --help.
	About string
	// Order places the mode among the others: in the lab's run, the
	// tables and the report, lowest first.
	Order int
	// Scored says the mode's rows count in the scorecard: the headline
	// numbers of accuracy, throughput, latency and memory, and the picks
	// made from them.
	Scored bool
	// Gates are the metrics compare and the gate compare, and merge pools.
	Gates []Gate
	// Outside says the lab's bench does not run the mode: its rows come
	// from a limiter judged from outside (ratelab probe), and only its
	// tables, charts and report are the lab's.
	Outside bool
}

// Modes are the modes compare, merge and the gate know, in their Order:
// the lab's or the probe's.
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
