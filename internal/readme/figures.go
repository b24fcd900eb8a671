package readme

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ratelab/ratelab/results"
)

// figures are the README's, in its order. Each regexp takes the words
// that state a figure and, where the README states one, its range.
var figures = []figure{
	{
		name:  "the version of Go",
		re:    regexp.MustCompile(`On a fresh machine with Go (1\.\d+):`),
		check: setting("go.mod", regexp.MustCompile(`(?m)^go (1\.\d+)`)),
	},
	{
		name:  "what the commands take",
		re:    regexp.MustCompile(`(?s)What they take on 2 cores,.*?held to (\d+)%:\n\n(\|[^\n]*\|\n\|[-|]+\|\n(?:\|[^\n]*\|\n)+)`),
		check: checkTimes,
	},
	{
		name:  "Redis's usual address",
		re:    regexp.MustCompile(`(127\.0\.0\.1:6379)`),
		check: setting("tools/with-redis", regexp.MustCompile(`already answering on (127\.0\.0\.1:6379)`)),
	},
	{
		name:  "make soak's histories",
		re:    regexp.MustCompile("`make soak` checks (\\d+)\\s+concurrent histories"),
		check: setting("Makefile", regexp.MustCompile(`-soak=(\d+)`)),
	},
	{
		name:  "make soak-serve's sampling",
		re:    regexp.MustCompile(`prints its memory, descriptors and goroutines every (\d+) s`),
		check: setting("cmd/ratelab/soak_test.go", regexp.MustCompile(`time\.NewTicker\((\d+) \* time\.Second\)`)),
	},
	{
		name:  "the plan of the synthetic shop",
		re:    regexp.MustCompile("(?s)\\$ make plan\n.*?\n(The policy to set\n.*?)\n```\n\nThe (\\w+) keys refused are the log's (\\w+) abusers, its (\\w+) offices a tier of\\s+their own, and none of its ([\\d,]+) users\\. `make readme-check` reruns it and wants\\s+the same table, line for line"),
		check: checkPlan,
	},
	{
		name:  "the allocations of a decision",
		re:    regexp.MustCompile(`(\d\.\d\d) to (\d\.\d\d) allocations a decision, the sliding log's (\d\.\d\d) to\s+(\d\.\d\d)`),
		check: checkAllocs,
	},
	{
		name:  "a fixed window's edge",
		re:    regexp.MustCompile(`aligned to the epoch \((\d)N can pass around an edge\)`),
		check: checkEdge,
	},
	{
		name:  "bytes per key",
		re:    regexp.MustCompile("(?s)\\| package \\| admits a request .*? \\| bytes per key at 1M keys \\|\n\\|[-|:]+\\|\n((?:\\|[^\n]*\\|\n)+).*?`make readme-check` holds them to (\\d+)%"),
		check: checkBytes,
	},
	{
		name:  "the picks of a quick lab",
		re:    regexp.MustCompile("(?s)Which limiter should I pick\\? This run's answers, from the numbers above:\n(.*?)\n```\n.*?The excerpt\\s+above is from one quick run on (AMD EPYC|Intel Xeon); .*?bytes and ×N within (\\d+)%, its rates within a factor of (\\d+)"),
		check: checkPicks,
	},
	{
		name:  "HTTP's status codes",
		re:    regexp.MustCompile(`\b(429|503)\b`),
		check: func([]string, *Run) []Result { return nil }, // names, not measures
	},
	{
		name:  "the library's release",
		re:    regexp.MustCompile(`its release \((v\d+\.\d+\.\d+) now\)`),
		check: setting("tools/releases", regexp.MustCompile(`(?m)^github\.com/ratelab/ratelab/limiters (v\d+\.\d+\.\d+) [0-9a-f]+ limiters\n*\z`)),
	},
}

// setting checks a figure that is a setting of the tree: the README's
// (its first submatch) must be what re finds in the file.
func setting(file string, re *regexp.Regexp) func(m []string, r *Run) []Result {
	return func(m []string, r *Run) []Result {
		res := Result{Figure: fmt.Sprintf("%s (%s)", m[1], file), Says: m[1]}
		if r.Root == "" {
			res.Why = "no tree to read"
			return []Result{res}
		}
		b, err := os.ReadFile(filepath.Join(r.Root, file))
		if err != nil {
			res.Why = err.Error()
			return []Result{res}
		}
		if got := re.FindSubmatch(b); got != nil {
			res.Got = string(got[1])
		} else {
			res.Got = "(not found)"
		}
		res.Drift = res.Got != m[1]
		return []Result{res}
	}
}

// checkTimes compares the README's table of times and peaks, in the
// column of this host's kind, with the latest record of each target.
func checkTimes(m []string, r *Run) []Result {
	rows := tableRows(m[2])
	if len(rows) < 2 {
		return []Result{{Figure: "what the commands take", Says: "a table", Got: "no rows", Drift: true}}
	}
	hosts := rows[0][1:]
	kind := hostKind(r.Host)
	col := slices.Index(hosts, kind)
	if col < 0 {
		return []Result{{Figure: "what the commands take", Says: strings.Join(hosts, ", "), Why: fmt.Sprintf("no column for this host (%s)", r.Host)}}
	}
	var out []Result
	for _, row := range rows[1:] {
		label, cell := row[0], row[1+col]
		name := fmt.Sprintf("%s, %s", strings.ReplaceAll(label, "`", ""), kind)
		if cell == "—" {
			continue // not measured on this kind of host yet
		}
		target := backticked.FindStringSubmatch(label)
		if target == nil {
			out = append(out, Result{Figure: name, Says: cell, Got: "no `make target` in the row", Drift: true})
			continue
		}
		empty := strings.Contains(label, "empty build cache")
		memory := strings.HasPrefix(label, "peak memory")
		show := formatClock
		if memory {
			show = func(v float64) string { return fmt.Sprintf("%.2f GB", v) }
		}
		lo, hi, err := cellRange(cell, memory)
		if err != nil {
			out = append(out, Result{Figure: name, Says: cell, Got: err.Error(), Drift: true})
			continue
		}
		t, ok := r.latest(target[1], empty, kind)
		switch {
		case !ok:
			out = append(out, Result{Figure: name, Says: cell, Why: fmt.Sprintf("make %s has not run here%s", target[1], map[bool]string{true: " on an empty build cache"}[empty])})
		case memory && t.PeakKB == 0:
			out = append(out, Result{Figure: name, Says: cell, Why: "no peak recorded (/usr/bin/time is missing)"})
		case memory:
			out = append(out, within(name, cell, t.PeakKB*1024/1e9, lo, hi, show))
		default:
			out = append(out, within(name, cell, t.Seconds, lo, hi, show))
		}
	}
	return out
}

var backticked = regexp.MustCompile("`make ([a-z-]+)`")

// tableRows splits a Markdown table into its rows' cells, the line of
// dashes left out.
func tableRows(table string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		line = strings.TrimSpace(line)
		if strings.Trim(line, "|-: ") == "" {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// numberWords are the numbers the README spells out.
var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

// checkPlan compares the README's plan table with the run's, line for
// line, and who the refused clients are with what genlog wrote.
func checkPlan(m []string, r *Run) []Result {
	const name = "the plan's table"
	res := Result{Figure: name, Says: fmt.Sprintf("%d lines", strings.Count(m[1], "\n")+1)}
	var out []Result
	if r.PlanText == "" {
		res.Why = "no plan run"
		out = append(out, res)
	} else {
		got := tableAfter(r.PlanText, "The policy to set")
		want := strings.Split(m[1], "\n")
		res.Got = fmt.Sprintf("%d lines", len(got))
		for i := range max(len(got), len(want)) {
			if i >= len(got) || i >= len(want) || strings.TrimRight(got[i], " ") != strings.TrimRight(want[i], " ") {
				res.Drift = true
				if i < len(got) {
					res.Got = fmt.Sprintf("line %d: %s", i+1, strings.TrimSpace(got[i]))
				}
				break
			}
		}
		out = append(out, res)
	}
	// Who was refused, against what genlog says it wrote: the abusers,
	// the offices in a tier of their own.
	refused, abusers, offices := numberWords[m[2]], numberWords[m[3]], numberWords[m[4]]
	if refused != abusers || refused == 0 {
		out = append(out, Result{Figure: "the keys refused", Says: m[2], Got: fmt.Sprintf("%s abusers", m[3]), Drift: true})
	}
	g := genlogLine.FindStringSubmatch(r.Genlog)
	users, _ := parseFloat(m[5])
	for _, c := range []struct {
		what string
		says float64
		word string
		i    int
	}{{"the log's users", users, m[5], 1}, {"the log's abusers", float64(abusers), m[3], 2}, {"the log's offices", float64(offices), m[4], 3}} {
		res := Result{Figure: c.what, Says: c.word}
		if g == nil {
			res.Why = "no genlog line"
		} else {
			got, _ := parseFloat(g[c.i])
			res.Got, res.Drift = g[c.i], got != c.says
		}
		out = append(out, res)
	}
	return out
}

var genlogLine = regexp.MustCompile(`(?s)genlog: \d+ lines: \d+ of (\d+) normal users,\s+\d+ of (\d+) abusers .*?,\s+\d+ of (\d+) offices`)

// tableAfter returns the lines of the box table that follows the line
// title in text, title included.
func tableAfter(text, title string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != title {
			continue
		}
		out := []string{title}
		for _, l := range lines[i+1:] {
			if !strings.ContainsAny(l, "┌│├└") {
				break
			}
			out = append(out, l)
		}
		return out
	}
	return nil
}

// checkAllocs compares the allocations a decision the README states for
// ratelab's limiters in memory on many-users with the quick lab's.
func checkAllocs(m []string, r *Run) []Result {
	lo, _ := parseFloat(m[1])
	hi, _ := parseFloat(m[2])
	logLo, _ := parseFloat(m[3])
	logHi, _ := parseFloat(m[4])
	others := Result{Figure: "allocs per decision, many-users, the others", Says: m[1] + " to " + m[2]}
	log := Result{Figure: "allocs per decision, many-users, sliding-log", Says: m[3] + " to " + m[4]}
	if r.Lab == nil {
		others.Why, log.Why = "no lab run", "no lab run"
		return []Result{others, log}
	}
	var got, gotLog []float64
	for _, row := range r.Lab.Rows {
		v, ok := row.Value(results.AllocsPerDecision)
		if !ok || row.Workload != "many-users" || row.Library != results.LibraryRatelab || row.Backend != results.BackendMemory || row.IsFloor() {
			continue
		}
		if row.Limiter == "sliding-log" {
			gotLog = append(gotLog, v)
		} else {
			got = append(got, v)
		}
	}
	return []Result{span(others, got, lo, hi), span(log, gotLog, logLo, logHi)}
}

// span is res with got, all of which must lie in [lo, hi] (to the
// hundredth the README writes).
func span(res Result, got []float64, lo, hi float64) Result {
	if len(got) == 0 {
		res.Why = "no such rows in the lab"
		return res
	}
	a, b := got[0], got[0]
	for _, v := range got {
		a, b = math.Min(a, v), math.Max(b, v)
	}
	res.Got = fmt.Sprintf("%.2f to %.2f", a, b)
	res.Drift = math.Round(a*100) < math.Round(lo*100) || math.Round(b*100) > math.Round(hi*100)
	return res
}

// checkEdge: a fixed window admits up to kN around an edge, which the
// boundary attack reaches.
func checkEdge(m []string, r *Run) []Result {
	k, _ := parseFloat(m[1])
	res := Result{Figure: "fixed-window's most in any W, boundary-attack", Says: m[1] + "N"}
	if r.Lab == nil {
		res.Why = "no lab run"
		return []Result{res}
	}
	for _, row := range r.Lab.Rows {
		if row.Limiter != "fixed-window" || row.Library != results.LibraryRatelab || row.Backend != results.BackendMemory || row.Workload != "boundary-attack" {
			continue
		}
		if a, ok := row.AccuracyOf(); ok {
			res.Got = fmt.Sprintf("%.2fN", a.MaxWindowRatio)
			res.Drift = math.Abs(a.MaxWindowRatio-k) > 0.03*k
			return []Result{res}
		}
	}
	res.Why = "no such row in the lab"
	return []Result{res}
}

// checkBytes compares the README's bytes per key with BenchmarkMemory's.
func checkBytes(m []string, r *Run) []Result {
	pct, _ := parseFloat(m[2])
	var out []Result
	for _, row := range tableRows(m[1]) {
		pkg := strings.Trim(row[0], "`")
		says := row[len(row)-1]
		res := Result{Figure: "bytes per key at 1M, " + pkg, Says: says}
		perRequest := 0.0
		base, rest, _ := strings.Cut(says, " + ")
		want, err := parseFloat(base)
		if rest != "" {
			if _, err2 := fmt.Sscanf(rest, "%g per request", &perRequest); err2 != nil {
				err = err2
			}
		}
		if err != nil {
			res.Got, res.Drift = err.Error(), true
			out = append(out, res)
			continue
		}
		want += perRequest // the benchmark sends each key one request
		got, ok := r.BytesPerKey[algorithmOf[pkg]]
		if !ok {
			res.Why = "no memory benchmark of it"
			out = append(out, res)
			continue
		}
		res.Got = fmt.Sprintf("%.1f", got-perRequest)
		if perRequest > 0 {
			res.Got += fmt.Sprintf(" + %g", perRequest)
		}
		res.Drift = math.Abs(got-want) > pct/100*want
		out = append(out, res)
	}
	return out
}

var algorithmOf = map[string]string{
	"fixedwindow": "fixed-window", "slidinglog": "sliding-log", "slidingcounter": "sliding-counter",
	"tokenbucket": "token-bucket", "leakybucket": "leaky-bucket", "gcra": "gcra",
}

// checkPicks compares the README's excerpt of a quick lab's picks with
// this run's, pick by pick: the same words, the bytes and ×N within the
// README's percentage, the rates within its factor.
func checkPicks(m []string, r *Run) []Result {
	pct, _ := parseFloat(m[3])
	factor, _ := parseFloat(m[4])
	if r.Host != "" && hostKind(r.Host) != m[2] {
		factor = math.Inf(1) // a rate is the host's: held only on the excerpt's kind
	}
	var run map[string]string
	if r.LabText != "" {
		_, after, _ := strings.Cut(r.LabText, "Which limiter should I pick? This run's answers, from the numbers above:\n")
		run = picks(after)
	}
	var out []Result
	for lead, says := range orderedPicks(m[1]) {
		res := Result{Figure: "pick: " + lead, Says: says}
		got, ok := run[lead]
		switch {
		case run == nil:
			res.Why = "no lab run"
		case !ok:
			res.Got, res.Drift = "(no such pick)", true
		default:
			res.Got = got
			res.Drift = !samePick(says, got, pct/100, factor)
		}
		out = append(out, res)
	}
	return out
}

// picks reads a lab's picks, one paragraph each ("- lead: text"), joined
// into one line, keyed by their lead.
func picks(text string) map[string]string {
	out := map[string]string{}
	for lead, p := range orderedPicks(text) {
		out[lead] = p
	}
	return out
}

// orderedPicks yields the picks of text in order, until a line that is
// neither a pick nor its continuation.
func orderedPicks(text string) func(yield func(string, string) bool) {
	return func(yield func(string, string) bool) {
		var cur []string
		flush := func() bool {
			if len(cur) == 0 {
				return true
			}
			p := strings.Join(cur, " ")
			cur = nil
			lead, _, _ := strings.Cut(strings.TrimPrefix(p, "- "), ":")
			return yield(lead, p)
		}
		for _, line := range strings.Split(text, "\n") {
			switch {
			case strings.HasPrefix(line, "- "):
				if !flush() {
					return
				}
				cur = []string{strings.TrimSpace(line)}
			case strings.HasPrefix(line, "  ") && len(cur) > 0:
				cur = append(cur, strings.TrimSpace(line))
			case strings.TrimSpace(line) == "...":
				if !flush() {
					return
				}
			default:
				flush()
				return
			}
		}
		flush()
	}
}

var pickNumber = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)

// samePick says whether a and b are the same pick: the same words, and
// each number within tol of the other's (rates within a factor).
func samePick(a, b string, tol, factor float64) bool {
	if pickNumber.ReplaceAllString(a, "#") != pickNumber.ReplaceAllString(b, "#") {
		return false
	}
	na, nb := pickNumber.FindAllStringIndex(a, -1), pickNumber.FindAllStringIndex(b, -1)
	for i := range na {
		x, _ := parseFloat(a[na[i][0]:na[i][1]])
		y, _ := parseFloat(b[nb[i][0]:nb[i][1]])
		rate := strings.HasPrefix(a[na[i][1]:], "M/s") || strings.HasPrefix(a[na[i][1]:], "k/s") || strings.HasPrefix(a[na[i][1]:], "/s")
		switch {
		case rate && (y > x*factor || y < x/factor):
			return false
		case !rate && math.Abs(x-y) > tol*math.Abs(x):
			return false
		}
	}
	return true
}
