// Package report is how a results file is presented: its tables (a
// TableSpec per table of a mode, built from the mode's rows), its figures
// (a small language of panels, lines and axes that package plots draws),
// the scorecard and the picks ("which limiter should I pick?"), and the
// formatting they share. What a results file is, package results says;
// a mode declares, beside what results knows of it (Mode), its tables,
// charts and picks here.
package report
