package report

import "github.com/ratelab/ratelab/results"

// Mode is a mode as the report presents it: its tables, its charts
// and its picks, beside what results knows of it.
type Mode struct {
	results.Mode
	// Tables are the mode's tables; a table with no rows is left out.
	Tables []TableSpec
	// Picks are the mode's own answers to "which limiter should I pick?",
	// from its measured rows of f.
	Picks func(f *results.File, rows []results.Row) []Pick
	// Charts are the mode's charts, from its measured rows of f (which may
	// be none: a chart may draw on other modes' rows too); a figure with
	// no panel is left out.
	Charts func(f *results.File, rows []results.Row) []Figure
	// Page is how the report page of a file of this mode alone reads (a
	// mode Outside the lab: the probe's, the plan's).
	Page Page
	// Heading heads the mode's section of the report, its charts and
	// tables together ("Accuracy, in simulated time").
	Heading string
}

// Page is the head of a report page of one outside mode's file.
type Page struct {
	// Title heads the page; Of begins its subtitle, before the file's
	// target ("A probe of"); Target labels the target among the run's
	// facts ("Target", "Log").
	Title, Of, Target string
}

// Modes are the modes a report presents, in their Order: the lab's
// (harness.Modes) or the probe's. The tables, the charts and the picks of
// a file are given them, and read each mode's rows through its Mode.
type Modes []Mode

// Results returns the modes as compare, merge and the gate know them.
func (ms Modes) Results() results.Modes {
	out := make(results.Modes, len(ms))
	for i, m := range ms {
		out[i] = m.Mode
	}
	return out
}

// scored reports whether rows of mode m count in the scorecard; a mode ms
// does not have does not.
func (ms Modes) scored(m string) bool {
	mode, ok := ms.Results().Named(m)
	return ok && mode.Scored
}
