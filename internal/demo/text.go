package demo

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratelab/ratelab/results"
)

// Write writes scenes for a person at a terminal: a table of
// decisions a scene (steps alike elided), colours when color is set.
func Write(w io.Writer, scenes []Scene, color bool) error {
	p := painter(color)
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, p.bold("ratelab demo")+p.dim(": rate limiters at work, in simulated time (the same answers every run)"))
	for i, s := range scenes {
		fmt.Fprintf(bw, "\n%s %s\n", p.title(fmt.Sprintf("%d.", i+1)), p.title(s.Title))
		for _, line := range s.Intro {
			fmt.Fprintln(bw, wrapIndent(line, "   ", 88))
		}
		fmt.Fprintln(bw)
		if s.Summary != nil {
			writeSummary(bw, p, s.Summary)
		} else {
			writeSteps(bw, p, s.Steps)
		}
		fmt.Fprintln(bw)
		for _, line := range s.Outro {
			fmt.Fprintln(bw, wrapIndent(line, "   ", 88))
		}
	}
	return bw.Flush()
}

func writeSteps(w io.Writer, p painter, steps []Step) {
	deniedBy := false
	for _, st := range steps {
		deniedBy = deniedBy || st.DeniedBy != ""
	}
	header := []string{"t", "user", "limiter", "result", "left", "retry in"}
	if deniedBy {
		header = append(header, "denied by")
	}
	rows, kinds := stepRows(steps, deniedBy)
	rows, kinds = append([][]string{header}, rows...), append([]string{"header"}, kinds...)
	widths := make([]int, len(header))
	for k, r := range rows {
		if kinds[k] == "elided" {
			continue
		}
		for c := range header {
			if c < len(r) {
				widths[c] = max(widths[c], utf8.RuneCountInString(r[c]))
			}
		}
	}
	for k, r := range rows {
		fmt.Fprintln(w, stepLine(p, r, kinds[k], widths))
	}
}

// stepRows are the steps' rows (a shown step's cells and its note, or a
// run of steps not shown as one line), each with its kind: "elided", or
// the step's result.
func stepRows(steps []Step, deniedBy bool) (rows [][]string, kinds []string) {
	for i := 0; i < len(steps); {
		st := steps[i]
		if !st.Shown {
			j, admitted := i, 0
			for ; j < len(steps) && !steps[j].Shown; j++ {
				if steps[j].Allowed {
					admitted++
				}
			}
			what := fmt.Sprintf("%d more alike", j-i)
			switch admitted {
			case j - i:
				what += ", all admitted"
			case 0:
				what += ", all denied"
			default:
				what += fmt.Sprintf(": %d admitted, %d denied", admitted, j-i-admitted)
			}
			rows = append(rows, []string{"⋮", what})
			kinds = append(kinds, "elided")
			i = j
			continue
		}
		result, retry := "ALLOW", ""
		if !st.Allowed {
			result, retry = "DENY", "never"
			if st.RetryAfter != nil {
				retry = seconds(*st.RetryAfter)
			}
		}
		row := []string{seconds(st.At), st.User, st.Limiter, result, fmt.Sprint(st.Remaining), retry}
		if deniedBy {
			row = append(row, st.DeniedBy)
		}
		rows = append(rows, append(row, st.Note))
		kinds = append(kinds, result)
		i++
	}
	return rows, kinds
}

// stepLine is row r of kind as printed: padded to widths, the result in
// its colour, the header, an elided run and a note dim.
func stepLine(p painter, r []string, kind string, widths []int) string {
	var b strings.Builder
	b.WriteString("   ")
	if kind == "elided" {
		b.WriteString(pad(r[0], widths[0], true))
		b.WriteString("  ")
		b.WriteString(p.dim(r[1]))
		return b.String()
	}
	right := map[int]bool{0: true, 4: true, 5: true} // t, left, retry
	for c, cell := range r {
		if c >= len(widths) { // the note
			if cell != "" {
				b.WriteString("  ")
				b.WriteString(p.dim(cell))
			}
			continue
		}
		if c > 0 {
			b.WriteString("  ")
		}
		padded := pad(cell, widths[c], right[c])
		switch {
		case kind == "header":
			padded = p.dim(padded)
		case c == 3 && cell == "ALLOW":
			padded = p.green(padded)
		case c == 3 && cell == "DENY":
			padded = p.red(padded)
		}
		b.WriteString(padded)
	}
	return strings.TrimRight(b.String(), " ")
}

func writeSummary(w io.Writer, p painter, s *Summary) {
	widths := make([]int, len(s.Header))
	for _, r := range append([][]string{s.Header}, s.Rows...) {
		for c, cell := range r {
			widths[c] = max(widths[c], utf8.RuneCountInString(cell))
		}
	}
	line := func(r []string, style func(string) string) {
		var b strings.Builder
		b.WriteString("   ")
		for c, cell := range r {
			if c > 0 {
				b.WriteString("  ")
			}
			b.WriteString(style(pad(cell, widths[c], c > 0 && c < len(r)-1)))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(s.Header, p.dim)
	for i, r := range s.Rows {
		style := p.green
		if s.Bad[i] {
			style = p.red
		}
		line(r, style)
	}
}

// seconds formats s seconds for the demo: 0.5s, 12s, 2m28.5s.
func seconds(s float64) string {
	d := time.Duration(math.Round(s*10)) * 100 * time.Millisecond
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}

func pad(s string, width int, right bool) string {
	gap := strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s)))
	if right {
		return gap + s
	}
	return s + gap
}

// wrapIndent wraps s at width, each line indented.
func wrapIndent(s, indent string, width int) string {
	return indent + strings.ReplaceAll(results.Wrap(s, width-len(indent)), "\n", "\n"+indent)
}

// painter colours text with ANSI escapes, or leaves it plain.
type painter bool

func (p painter) paint(code, s string) string {
	if !p {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}
func (p painter) bold(s string) string  { return p.paint("1", s) }
func (p painter) title(s string) string { return p.paint("1;36", s) }
func (p painter) dim(s string) string   { return p.paint("2", s) }
func (p painter) green(s string) string { return p.paint("32", s) }
func (p painter) red(s string) string   { return p.paint("1;31", s) }
