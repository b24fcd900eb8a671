package results

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// A comparison written for a terminal: its changes formatted, their table
// and the verdict.

// signed puts a plus before a positive formatted number.
func signed(s string, v int64) string {
	if v > 0 {
		return "+" + s
	}
	return s
}

// percentChange formats is against was as a signed percentage; a change
// that rounds to nothing is "0.0%", never "-0.0%".
func percentChange(was, is float64) string {
	if was == 0 {
		return "new"
	}
	p := 100 * (is/was - 1)
	if math.Abs(p) < 0.05 {
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", p)
}

// Write writes the comparison for a terminal: what was compared, a table
// of the changes (those within noise too when all), and the verdict.
func (c *Comparison) Write(w io.Writer, all bool) error {
	fmt.Fprintf(w, "OLD: %s, %s, %s\nNEW: %s, %s, %s\n",
		c.Old.Meta.Start.Format("2006-01-02 15:04 MST"), c.Old.Meta.CPU, c.Old.Meta.GoVersion,
		c.New.Meta.Start.Format("2006-01-02 15:04 MST"), c.New.Meta.CPU, c.New.Meta.GoVersion)
	fmt.Fprintln(w, Wrap(fmt.Sprintf("Tolerance: memory %.0f%% or %.0f bytes, allocations %.0f%% or %.3f a decision; accuracy in simulated time exact. "+
		"Timings are shown, not gated (ratelab gate times two builds in one run).",
		100*c.Tolerance.Memory, c.Tolerance.MemoryBytes, 100*c.Tolerance.Allocs, c.Tolerance.AllocsPerDecision), 100))
	for _, warn := range c.Warnings {
		fmt.Fprintln(w, Wrap("Warning: "+warn+".", 100))
	}
	if len(c.Floor) > 0 {
		var speeds []string
		for _, wl := range workloadOrder(c.New) {
			if v, ok := c.Floor[wl]; ok {
				speeds = append(speeds, fmt.Sprintf("%s %s", wl, percentChange(1, v)))
			}
		}
		fmt.Fprintf(w, "The harness floor, the yardstick, ran at NEW/OLD: %s (the machine's speed, cancelled out, not gated).\n", strings.Join(speeds, ", "))
	}
	tally := map[string]int{}
	var rows [][]string
	for _, ch := range c.Changes {
		tally[ch.Verdict]++
		if all || ch.Verdict == Regressed || ch.Verdict == Improved {
			rows = append(rows, []string{ch.Limiter, ch.Workload, ch.Metric, ch.Old, ch.New, ch.Delta, ch.Verdict})
		}
	}
	fmt.Fprintln(w)
	if len(rows) > 0 {
		align := []tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
		tb := tablewriter.NewTable(w, tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{Formatting: tw.CellFormatting{AutoFormat: tw.Off}},
			Row:    tw.CellConfig{Alignment: tw.CellAlignment{PerColumn: align}},
		}))
		tb.Header([]string{"limiter", "workload", "metric", "old", "new", "change", "verdict"})
		if err := tb.Bulk(rows); err != nil {
			return err
		}
		if err := tb.Render(); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("%d regressed, %d improved, %d within noise, %d changed but not gated", tally[Regressed], tally[Improved], tally[WithinNoise], tally[NotGated])
	fmt.Fprintln(w, Wrap(summary+".", 100))
	if c.Outside > 0 {
		fmt.Fprintln(w, Wrap(fmt.Sprintf("Not compared: NEW's %d run%s of limiters kept in Redis (a server outside the process, which the gate cannot count on being there).", c.Outside, plural(c.Outside)), 100))
	}
	if n := c.Regressions(); n > 0 {
		_, err := fmt.Fprintf(w, "REGRESSED: %d metric%s beyond tolerance.\n", n, plural(n))
		return err
	}
	_, err := fmt.Fprintln(w, "No regression.")
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// workloadOrder lists f's workloads in the order its runs have them.
func workloadOrder(f *File) []string {
	var out []string
	for _, r := range f.Rows {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}
