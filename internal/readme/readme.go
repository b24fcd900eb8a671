// Package readme holds the README to what a run measures. Each figure the
// README states is found by the words around it, with the range it states
// (or, where it quotes the command's output, the tolerance the README
// gives the quote), and compared with what make readme-check measured on
// this host: a quick lab, the plan of the synthetic shop, the memory
// benchmark, the times the make targets recorded in out/times.tsv, and
// the settings in the files the README speaks of (the Makefile, go.mod,
// the releases). A number in the README that no figure accounts for is a
// defect too: it would drift unseen.
package readme

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// A Result is one figure of the README beside what the run measured.
type Result struct {
	// Figure names it ("make test, AMD EPYC"), Says is the README's
	// words for it ("2:20–3:10"), Got what the run measured ("2:41"),
	// empty when it measured nothing for it; Why says then why.
	Figure, Says, Got, Why string
	// Drift is set when Got is outside the range the README states.
	Drift bool
}

// Drifted returns the results that drifted.
func Drifted(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if r.Drift {
			out = append(out, r)
		}
	}
	return out
}

// Write prints rs as a table, figure, the README, the run, the verdict,
// each line within 120 columns.
func Write(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tthe README says\tthis run\tverdict")
	for _, r := range rs {
		verdict := "holds"
		switch {
		case r.Drift:
			verdict = "DRIFTED"
		case r.Got == "":
			verdict = "not measured: " + r.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", clip(r.Figure, 44), clip(r.Says, 24), clip(r.Got, 24), clip(verdict, 20))
	}
	return tw.Flush()
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// A figure is one thing the README states, found by re: check reads the
// submatches and the run. Each figure's whole match accounts for the
// numbers in it.
type figure struct {
	name  string
	re    *regexp.Regexp
	check func(m []string, r *Run) []Result
}

// Check finds each of the README's figures in readme and compares it with
// r. An error says a figure's words are no longer in the README (the
// README changed: this package's figures must follow), or that the README
// states numbers no figure accounts for.
func Check(readme string, r *Run) ([]Result, error) {
	if r == nil {
		r = &Run{}
	}
	var out []Result
	var missing []string
	for _, f := range figures {
		m := f.re.FindStringSubmatch(readme)
		if m == nil {
			missing = append(missing, f.name)
			continue
		}
		out = append(out, f.check(m, r)...)
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("the README no longer states %s in the words internal/readme looks for: update its figures", strings.Join(missing, "; "))
	}
	if loose := Unaccounted(readme); len(loose) > 0 {
		return out, fmt.Errorf("the README states numbers no figure of internal/readme checks: %s", strings.Join(loose, "; "))
	}
	return out, nil
}

// number is a figure in prose: digits, with thousands' commas, a decimal
// point, a fraction, a unit glued to it.
var number = regexp.MustCompile(`\d(?:[\d,.:–]*\d)?½?`)

// Unaccounted returns the numbers of readme, each with its line, that no
// figure's match covers. It reads the prose, the tables and the quoted
// output, not Go code (a ```go block), commands to type (a ```sh block)
// or code spans (names and examples).
func Unaccounted(readme string) []string {
	covered := make([]bool, len(readme))
	cover := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			covered[i] = true
		}
	}
	for _, f := range figures {
		for _, loc := range f.re.FindAllStringIndex(readme, -1) {
			cover(loc[0], loc[1])
		}
	}
	for _, loc := range codeBlock.FindAllStringIndex(readme, -1) {
		cover(loc[0], loc[1])
	}
	for _, loc := range codeSpan.FindAllStringIndex(readme, -1) {
		cover(loc[0], loc[1])
	}
	for _, loc := range listMarker.FindAllStringIndex(readme, -1) {
		cover(loc[0], loc[1])
	}
	var loose []string
	for _, loc := range number.FindAllStringIndex(readme, -1) {
		if slices.Contains(covered[loc[0]:loc[1]], false) {
			line := 1 + strings.Count(readme[:loc[0]], "\n")
			loose = append(loose, fmt.Sprintf("line %d: %q", line, readme[loc[0]:loc[1]]))
		}
	}
	return loose
}

var (
	codeBlock = regexp.MustCompile("(?s)```(?:go|sh)\n.*?```")
	codeSpan  = regexp.MustCompile("`[^`\n]+`")
	// listMarker is an ordered list's "1. ".
	listMarker = regexp.MustCompile(`(?m)^\d+\. `)
)

// within is a Result for a number: Drift when got is outside [lo, hi].
func within(name, says string, got, lo, hi float64, format func(float64) string) Result {
	return Result{Figure: name, Says: says, Got: format(got), Drift: got < lo || got > hi}
}

// parseFloat reads a number as the README writes it: 22,365, 0.13, 2½.
func parseFloat(s string) (float64, error) {
	s = strings.ReplaceAll(s, ",", "")
	half := 0.0
	if t, ok := strings.CutSuffix(s, "½"); ok {
		s, half = t, 0.5
		if s == "" {
			return half, nil
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v + half, err
}

// spread is a stated range: "lo–hi", or one figure, which is one run's
// and is held to 10% of itself.
func spread(s string, parse func(string) (float64, error)) (lo, hi float64, err error) {
	if a, b, ok := strings.Cut(s, "–"); ok {
		if lo, err = parse(strings.TrimSpace(a)); err != nil {
			return 0, 0, err
		}
		hi, err = parse(strings.TrimSpace(b))
		return lo, hi, err
	}
	v, err := parse(strings.TrimSpace(s))
	return 0.9 * v, 1.1 * v, err
}

// cellRange is the range a cell of the times' table states: m:ss, or
// GB for a peak of memory; "within" a figure is a bound, which any time
// or peak under it holds (a faster run is no drift).
func cellRange(cell string, memory bool) (lo, hi float64, err error) {
	v, bound := strings.CutPrefix(cell, "within ")
	if memory {
		var ok bool
		if v, ok = strings.CutSuffix(v, " GB"); !ok {
			return 0, 0, fmt.Errorf("%q is not in GB", cell)
		}
	}
	parse := clock
	if memory {
		parse = parseFloat
	}
	if bound {
		hi, err = parse(v)
		return 0, hi, err
	}
	return spread(v, parse)
}

// clock reads m:ss as seconds.
func clock(s string) (float64, error) {
	m, sec, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("%q is not m:ss", s)
	}
	mi, err1 := strconv.Atoi(m)
	si, err2 := strconv.Atoi(sec)
	if err1 != nil || err2 != nil || si >= 60 {
		return 0, fmt.Errorf("%q is not m:ss", s)
	}
	return float64(60*mi + si), nil
}

func formatClock(s float64) string {
	t := int(math.Round(s))
	return fmt.Sprintf("%d:%02d", t/60, t%60)
}
