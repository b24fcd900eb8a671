package plots

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// ChartDir is the folder, inside a report's, that holds its charts.
const ChartDir = "charts"

// rendered is a chart drawn: its PNG, and where its files are, relative to
// the report.
type rendered struct {
	chart
	PNG      []byte
	PNGPath  string
	SVGPath  string
	ID       string
	Sections []string
}

// WriteReport writes f's charts, as PNG and SVG in ChartDir, and its
// report into dir: report.html, one self-contained page (the charts
// inlined) that opens from disk, and report.md, its Markdown twin, which
// links to the charts' files. source, if not "", is where f is saved, for
// the report to say how to draw it again. It returns the paths written.
func WriteReport(dir string, f *results.File, ms report.Modes, source string) ([]string, error) {
	charts := charts(f, ms)
	cdir := filepath.Join(dir, ChartDir)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	var out []rendered
	for _, c := range charts {
		r := rendered{chart: c, ID: "chart-" + c.Name}
		for _, format := range []string{"png", "svg"} {
			b, err := c.render(format)
			if err != nil {
				return nil, fmt.Errorf("plots: drawing %s: %w", c.Name, err)
			}
			p := filepath.Join(cdir, c.Name+"."+format)
			if err := results.WriteAtomic(p, b); err != nil {
				return nil, err
			}
			paths = append(paths, p)
			rel := path.Join(ChartDir, c.Name+"."+format)
			if format == "png" {
				r.PNG, r.PNGPath = b, rel
			} else {
				r.SVGPath = rel
			}
		}
		out = append(out, r)
	}
	if err := removeStale(cdir, paths); err != nil {
		return nil, err
	}
	var html, md bytes.Buffer
	pg := newPage(f, ms, out, source)
	if err := htmlPage.Execute(&html, pg); err != nil {
		return nil, err
	}
	if err := writeMarkdown(&md, pg); err != nil {
		return nil, err
	}
	for _, w := range []struct {
		name string
		b    []byte
	}{{"report.html", html.Bytes()}, {"report.md", md.Bytes()}} {
		p := filepath.Join(dir, w.name)
		if err := results.WriteAtomic(p, w.b); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// removeStale removes the charts in dir, as PNG or SVG, other than those
// at written: a chart this run has no data for must not linger from an
// older run.
func removeStale(dir string, written []string) error {
	for _, pattern := range []string{"*.png", "*.svg"} {
		old, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, p := range old {
			if slices.ContainsFunc(written, func(w string) bool { return filepath.Base(w) == filepath.Base(p) }) {
				continue
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// page is what the report's templates are given.
type page struct {
	Title, Subtitle string
	// Outside: a limiter judged from outside, with no picks to make.
	Outside bool
	// Source is where the results are saved, if known.
	Source    string
	Meta      [][2]string
	Notes     []string
	Picks     []report.Pick
	Versus    []string
	Scorecard report.Table
	// Sections are the modes', in their order: each mode's charts and
	// tables together under its heading.
	Sections []section
}

// section is one mode's part of the page.
type section struct {
	ID, Heading, About string
	Charts             []rendered
	Tables             []report.Table
}

// sectionID is the anchor of the section of mode.
func sectionID(mode string) string { return "mode-" + anchor(mode) }

// sections puts each of charts and tables in the section of its mode, in
// the order of ms; a mode with neither has none.
func sections(ms report.Modes, charts []rendered, tables []report.Table) []section {
	var out []section
	for _, m := range ms {
		s := section{ID: sectionID(m.Name), Heading: m.Heading, About: m.About}
		for _, c := range charts {
			if c.Mode == m.Name {
				s.Charts = append(s.Charts, c)
			}
		}
		for _, t := range tables {
			if t.Mode == m.Name {
				s.Tables = append(s.Tables, t)
			}
		}
		if len(s.Charts)+len(s.Tables) == 0 {
			continue
		}
		if s.Heading == "" {
			s.Heading = strings.ToUpper(m.About[:1]) + m.About[1:]
			if len(s.Tables) > 0 {
				s.Heading = s.Tables[0].Title
			}
		}
		out = append(out, s)
	}
	return out
}

// evidenced are picks whose Evidence names a section of secs, the rest
// with none: the verdict links only to what the page holds.
func evidenced(picks []report.Pick, secs []section) []report.Pick {
	out := slices.Clone(picks)
	for i, p := range out {
		if !slices.ContainsFunc(secs, func(s section) bool { return s.ID == sectionID(p.Evidence) }) {
			out[i].Evidence = ""
		}
	}
	return out
}

func newPage(f *results.File, ms report.Modes, charts []rendered, source string) page {
	picks, versus := report.Picks(f, ms)
	if f.Meta.Target != "" {
		return outsidePage(f, ms, charts, source)
	}
	secs := sections(ms, charts, report.Tables(f, ms))
	p := page{
		Title:     "ratelab: which rate limiter, measured",
		Subtitle:  "A run of " + f.Meta.Start.UTC().Format("2 January 2006 at 15:04 UTC"),
		Source:    source,
		Meta:      metaRows(f),
		Picks:     evidenced(picks, secs),
		Versus:    versus,
		Scorecard: report.Scorecard(f, ms),
		Sections:  secs,
	}
	if s := report.SimulationSpeed(f); s != "" {
		p.Notes = append(p.Notes, s)
	}
	for _, s := range report.Skipped(f) {
		p.Notes = append(p.Notes, "Not run: "+s)
	}
	return p
}

// outsidePage is the page of a limiter judged from outside: its target,
// charts and tables; no picks, for there was one subject.
func outsidePage(f *results.File, ms report.Modes, charts []rendered, source string) page {
	m := f.Meta
	head := report.Page{Title: "ratelab: " + m.Target, Of: "A run on", Target: "Target"}
	for _, mode := range ms {
		if len(f.Rows) > 0 && mode.Name == f.Rows[0].Mode && mode.Page.Title != "" {
			head = mode.Page
		}
	}
	facts := [][2]string{
		{head.Target, m.Target},
		{"Machine", fmt.Sprintf("%s, %d cores, GOMAXPROCS %d", m.CPU, m.Cores, m.GOMAXPROCS)},
		{"Go", m.GoVersion},
		{"Started", m.Start.UTC().Format(time.RFC3339)},
		{"Took", m.Elapsed.Duration().Round(100 * time.Millisecond).String()},
	}
	if len(m.Settings) > 0 {
		var set []string
		for _, k := range slices.Sorted(maps.Keys(m.Settings)) {
			set = append(set, "--"+k+" "+m.Settings[k])
		}
		facts = append(facts, [2]string{"Flags", strings.Join(set, ", ")})
	}
	// The verdict is the mode's own answers (the probe's, the plan's).
	secs := sections(ms, charts, report.Tables(f, ms))
	var picks []report.Pick
	for _, mode := range ms {
		rows := slices.DeleteFunc(f.RowsOf(mode.Name), func(r results.Row) bool { return !r.Measured() })
		if mode.Picks == nil || len(rows) == 0 {
			continue
		}
		for _, p := range mode.Picks(f, rows) {
			p.Evidence = cmp.Or(p.Evidence, mode.Name)
			picks = append(picks, p)
		}
	}
	return page{
		Title:    head.Title,
		Subtitle: head.Of + " " + m.Target + ", " + m.Start.UTC().Format("2 January 2006 at 15:04 UTC"),
		Source:   source,
		Outside:  true,
		Meta:     facts,
		Picks:    evidenced(picks, secs),
		Sections: secs,
	}
}

// metaRows are the run's machine and settings, as label and value.
func metaRows(f *results.File) [][2]string {
	m := f.Meta
	set := m.Setting
	mode := "full"
	if set("quick") == "true" {
		mode = "quick (--quick): fewer and shorter runs, for a look, not for a decision"
	}
	limit, _ := limiters.ParseLimit(set("limit"))
	count := func(name string) string {
		n, _ := strconv.ParseInt(set(name), 10, 64)
		return results.Count(n)
	}
	rows := [][2]string{
		{"Machine", fmt.Sprintf("%s, %d cores, GOMAXPROCS %d", m.CPU, m.Cores, m.GOMAXPROCS)},
		{"Go", m.GoVersion},
		{"Seed", fmt.Sprint(m.Seed)},
		{"Started", m.Start.UTC().Format(time.RFC3339)},
		{"Took", m.Elapsed.Duration().Round(100 * time.Millisecond).String()},
		{"Run", mode},
		{"Limit", fmt.Sprintf("%s: %d per %v (a bucket: a burst of %d refilled over %v)", limit, limit.N, limit.Per, limit.N, limit.Per)},
		{"Limiters", commas(set("limiters"))},
		{"Workloads", commas(set("workloads"))},
		{"Modes", commas(set("modes"))},
		{"Users", fmt.Sprintf("%s (uniform, bursty), %s attackers (boundary-attack, anchored-attack), %s (many-users and memory)", count("users"), count("attackers"), count("many-users"))},
		{"Simulated time", fmt.Sprintf("%s per workload", set("simulated"))},
	}
	var peers []string
	for _, r := range f.Rows {
		if r.Library != "" && r.Library != results.LibraryRatelab && !slices.Contains(peers, r.Library) {
			peers = append(peers, r.Library)
		}
	}
	if len(peers) > 0 {
		rows = append(rows, [2]string{"Peers", strings.Join(peers, ", ")})
	}
	if set("realtime") != "" {
		rows = append(rows,
			[2]string{"Real time", fmt.Sprintf("%s per run; unpaced with %s goroutines; paced at %s decisions per second by %s", set("realtime"), commas(set("goroutines")), set("rate"), set("latency-goroutines"))})
	}
	if set("redis-addr") != "" {
		rows = append(rows, [2]string{"Redis", fmt.Sprintf("%s, a round trip per decision, so on less: accuracy on the first %s users of each workload over its first %s; "+
			"real time %s per unpaced run, paced at %s decisions per second for %s; memory at %s keys", set("redis-addr"), set("redis-users"), set("redis-simulated"),
			set("redis-realtime"), set("redis-rate"), set("redis-latency-time"), count("redis-keys"))})
	}
	if others := otherSettings(m.Settings); others != "" {
		rows = append(rows, [2]string{"Settings", others})
	}
	return rows
}

// shownSettings are the settings metaRows shows in rows of their own.
var shownSettings = []string{"quick", "limit", "limiters", "workloads", "modes", "users", "attackers", "many-users", "simulated",
	"realtime", "goroutines", "rate", "latency-goroutines", "redis-addr", "redis-prefix", "redis-users", "redis-simulated",
	"redis-realtime", "redis-rate", "redis-latency-time", "redis-keys"}

// otherSettings are the settings not shown in rows of their own, as
// name=value, by name: every mode's own.
func otherSettings(settings map[string]string) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		if !slices.Contains(shownSettings, name) {
			out = append(out, name+"="+settings[name])
		}
	}
	return strings.Join(out, ", ")
}

// commas is a comma-separated list as a person writes it: "a, b".
func commas(s string) string { return strings.ReplaceAll(s, ",", ", ") }

var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"png": func(b []byte) template.URL {
		return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))
	},
	"align": func(t report.Table, i int) string {
		if i < t.Left {
			return "l"
		}
		return "r"
	},
	"anchor": anchor,
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { font-size: 26px; margin: 8px 0 0; }
h2 { font-size: 20px; margin: 40px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 28px 0 6px; }
.sub { color: #666; margin: 0 0 16px; }
nav.toc { font-size: 14px; margin: 12px 0 0; background: #f6f8fa; border: 1px solid #e4e7eb; border-radius: 4px; padding: 8px 16px; }
nav.toc ol { margin: 2px 0; padding-left: 20px; }
nav.toc > ol > li { margin: 2px 0; }
@media (min-width: 900px) { nav.toc ol ol { columns: 2; column-gap: 32px; } }
@media (max-width: 600px) { main { padding: 12px 12px 48px; } nav.toc { padding: 6px 8px; } nav.toc ol { padding-left: 16px; } }
a { color: #0b5cad; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; font-size: 14px; }
dl.meta dt { color: #666; }
dl.meta dd { margin: 0; }
p.note, figcaption { color: #555; font-size: 14px; max-width: 900px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 4px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f3f3f3; text-align: center; font-weight: 600; white-space: normal; }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: pre; }
td.l { text-align: left; white-space: pre-line; min-width: 7em; }
tbody tr:hover { background: #f6f9ff; }
.scroll { overflow-x: auto; }
table.picks { width: 100%; table-layout: fixed; }
table.picks th:nth-child(1) { width: 24%; }
table.picks th:nth-child(2) { width: 18%; }
table.picks td { white-space: normal; vertical-align: top; overflow-wrap: anywhere; }
table.picks td.need { font-weight: 600; }
table.picks td.pick { font-family: ui-monospace, Menlo, monospace; }
ol.verdict { margin: 8px 0 12px; padding-left: 22px; }
ol.verdict li { margin: 1px 0; }
ol.verdict .need { font-weight: 600; }
ol.verdict code { font-family: ui-monospace, Menlo, monospace; font-size: 14px; }
ol.verdict a { font-size: 13px; white-space: nowrap; }
p.about { color: #555; font-size: 14px; margin: 0 0 8px; }
figure { margin: 12px 0 28px; }
figure img { width: 100%; height: auto; border: 1px solid #eee; }
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p class="sub">{{.Subtitle}}</p>
{{if .Picks}}<h2 id="verdict">The verdict</h2>
<ol class="verdict">{{range .Picks}}
<li><span class="need">{{.Need}}</span>: <code>{{or .Limiter "none"}}</code>{{with .Evidence}} <a href="#mode-{{anchor .}}">the evidence</a>{{end}}</li>{{end}}
</ol>
<p class="note">This run's answers, each read from the numbers of the section it links to; why each, with its numbers, is <a href="#pick">below</a>. On another machine or with other parameters an answer may change.</p>
{{else if not .Outside}}<p>This run measured nothing to choose by.</p>
{{end}}<nav class="toc"><ol>
{{if .Picks}}<li><a href="#pick">Why these picks</a></li>{{end}}
{{range .Sections}}<li><a href="#{{.ID}}">{{.Heading}}</a><ol>{{range .Charts}}<li><a href="#{{.ID}}">{{.Title}}</a> (chart)</li>{{end}}{{range .Tables}}<li><a href="#table-{{anchor .Name}}">{{.Title}}</a></li>{{end}}</ol></li>
{{end}}<li><a href="#run">The run</a></li>
</ol></nav>

{{if .Picks}}<h2 id="pick">Why these picks</h2>
<div class="scroll"><table class="picks">
<thead><tr><th>If you need</th><th>pick</th><th>because, in this run</th></tr></thead>
<tbody>{{range .Picks}}
<tr><td class="need">{{.Need}}</td><td class="pick">{{or .Limiter "none"}}</td><td>{{.Why}}{{with .Evidence}} <a href="#mode-{{anchor .}}">The evidence.</a>{{end}}</td></tr>{{end}}
</tbody></table></div>
{{end}}{{if .Versus}}<h3>Against the peers</h3>
<ul>{{range .Versus}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{with .Scorecard}}{{if .Rows}}<h3>{{.Title}}</h3>
<p class="note">{{.Note}}</p>
{{template "table" .}}{{end}}{{end}}

{{range .Sections}}<h2 id="{{.ID}}">{{.Heading}}</h2>
{{with .About}}<p class="about">What it measures: {{.}}.</p>{{end}}
{{range .Charts}}<figure id="{{.ID}}">
<img src="{{png .PNG}}" alt="{{.Title}}">
<figcaption>{{.Caption}} <a href="{{.SVGPath}}">SVG</a> · <a href="{{.PNGPath}}">PNG</a></figcaption>
</figure>
{{end}}{{range .Tables}}<h3 id="table-{{anchor .Name}}">{{.Title}}</h3>
<p class="note">{{.Note}}</p>
{{template "table" .}}
{{end}}{{end}}
<h2 id="run">The run</h2>
<dl class="meta">{{range .Meta}}
<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}
</dl>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}{{with .Source}}<p class="note">To draw this page again from the run's results, without running it: <code>ratelab report {{.}}</code>.</p>{{end}}
</main>
</body>
</html>
{{define "table"}}<div class="scroll"><table>
<thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{$t := .}}{{range .Rows}}
<tr>{{range $i, $c := .}}<td class="{{align $t $i}}">{{$c}}</td>{{end}}</tr>{{end}}
</tbody></table></div>{{end}}`))

var notAnchor = regexp.MustCompile(`[^a-z0-9]+`)

// anchor makes s fit to be an HTML id.
func anchor(s string) string {
	return strings.Trim(notAnchor.ReplaceAllString(strings.ToLower(s), "-"), "-")
}
