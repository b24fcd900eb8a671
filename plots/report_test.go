package plots

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// htmlDoc is what the tests read out of report.html.
type htmlDoc struct {
	headings []string // "h2 Charts"
	images   []string // img src
	links    []string // a href
	// in is, for each element with an id, the h2 it is under ("" for
	// none).
	in   map[string]string
	text string
}

// parseHTML reads an HTML page with encoding/xml in its lenient mode,
// failing on markup it cannot follow.
func parseHTML(t *testing.T, b []byte) htmlDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	doc := htmlDoc{in: map[string]string{}}
	var text strings.Builder
	heading, h2 := "", ""
	var open []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("report.html does not parse: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			open = append(open, tk.Name.Local)
			attr := func(name string) string {
				for _, a := range tk.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			if id := attr("id"); id != "" {
				doc.in[id] = h2
			}
			switch tk.Name.Local {
			case "h1", "h2", "h3":
				heading = tk.Name.Local + " "
			case "img":
				doc.images = append(doc.images, attr("src"))
			case "a":
				doc.links = append(doc.links, attr("href"))
			}
		case xml.EndElement:
			if n := len(open); n > 0 {
				open = open[:n-1]
			}
			switch tk.Name.Local {
			case "h1", "h2", "h3":
				doc.headings = append(doc.headings, strings.TrimSpace(heading))
				if tk.Name.Local == "h2" {
					h2 = strings.TrimPrefix(strings.TrimSpace(heading), "h2 ")
				}
				heading = ""
			}
		case xml.CharData:
			if heading != "" {
				heading += string(tk)
			}
			if !slices.Contains(open, "style") {
				text.Write(tk)
			}
		}
	}
	doc.text = text.String()
	return doc
}

func writeReport(t *testing.T, f *results.File) (dir string, html htmlDoc, md string) {
	t.Helper()
	dir = t.TempDir()
	paths, err := WriteReport(dir, f, harness.Modes(), "saved/results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("WriteReport returned %s, which is not there: %v", p, err)
		}
	}
	h, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, parseHTML(t, h), string(m)
}

// TestReportStructure pins the outline of both reports, and checks that
// each holds the run's meta, every table, every chart with its caption
// and the picks.
func TestReportStructure(t *testing.T) {
	f := fixture(t)
	_, html, md := writeReport(t, f)

	var outline bytes.Buffer
	outline.WriteString("report.html:\n")
	for _, h := range html.headings {
		outline.WriteString(h + "\n")
	}
	outline.WriteString("\nreport.md:\n")
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			outline.WriteString(line + "\n")
		}
	}
	golden.Check(t, "report-outline.golden", outline.Bytes())

	if len(report.Tables(f, harness.Modes())) == 0 {
		t.Fatal("the fixture makes no tables: are the modes registered (the harness, imported for its side effect)?")
	}
	picks, versus := report.Picks(f, harness.Modes())
	if len(picks) < 4 || len(versus) == 0 {
		t.Fatalf("the fixture gives %d picks and %d comparisons with peers; want a fuller report", len(picks), len(versus))
	}
	for name, text := range map[string]string{"report.html": html.text, "report.md": md} {
		want := []string{"The verdict", "Why these picks", f.Meta.GoVersion, f.Meta.CPU, "Seed", "x/time v0.16.0", "ratelab report saved/results.json"}
		for _, p := range picks {
			want = append(want, p.Need, p.Why)
		}
		want = append(want, versus...)
		for _, tb := range append(report.Tables(f, harness.Modes()), report.Scorecard(f, harness.Modes())) {
			want = append(want, tb.Title, tb.Note)
			for _, row := range tb.Rows {
				want = append(want, strings.Join(row, ""))
			}
		}
		for _, c := range charts(f, harness.Modes()) {
			want = append(want, c.Caption)
		}
		flat := strings.Join(strings.Fields(strings.NewReplacer("|", "", "`", "", "**", "", "<br>", "").Replace(text)), "")
		for _, w := range want {
			if !strings.Contains(flat, strings.Join(strings.Fields(w), "")) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
	if n, want := len(html.images), len(charts(f, harness.Modes())); n != want {
		t.Errorf("report.html has %d images, want one per chart: %d", n, want)
	}

	// A section a mode: its charts and tables under its heading, every
	// link of the page to a place in it, and each pick to its evidence.
	heading := map[string]string{}
	for _, m := range harness.Modes() {
		heading[m.Name] = m.Heading
	}
	for _, c := range charts(f, harness.Modes()) {
		if got := html.in["chart-"+c.Name]; got != heading[c.Mode] || got == "" {
			t.Errorf("chart %s is under %q, want its mode's heading %q", c.Name, got, heading[c.Mode])
		}
	}
	for _, tb := range report.Tables(f, harness.Modes()) {
		if got := html.in["table-"+anchor(tb.Name)]; got != heading[tb.Mode] || got == "" {
			t.Errorf("table %s is under %q, want its mode's heading %q", tb.Name, got, heading[tb.Mode])
		}
	}
	for _, l := range html.links {
		if id, ok := strings.CutPrefix(l, "#"); ok {
			if _, there := html.in[id]; !there {
				t.Errorf("report.html links to #%s, which is not on the page", id)
			}
		}
	}
	for _, p := range picks {
		if p.Evidence == "" {
			t.Errorf("pick %q names no evidence", p.Need)
		} else if !slices.Contains(html.links, "#"+sectionID(p.Evidence)) {
			t.Errorf("pick %q: no link to its evidence, #%s", p.Need, sectionID(p.Evidence))
		}
	}
	// The verdict comes first: before the contents and every section.
	if len(html.headings) < 2 || html.headings[1] != "h2 The verdict" {
		t.Errorf("the page opens with %v, want the verdict after the title", html.headings[:min(3, len(html.headings))])
	}
}

// TestReportImages checks that every image either report references is
// there and decodes: the HTML's inlined PNGs, the files it links to, and
// the Markdown's images and links.
func TestReportImages(t *testing.T) {
	dir, html, md := writeReport(t, fixture(t))
	if len(html.images) == 0 {
		t.Fatal("report.html has no images")
	}
	for _, src := range html.images {
		data, ok := strings.CutPrefix(src, "data:image/png;base64,")
		if !ok {
			t.Errorf("report.html: image %.40q is not inlined, so the page would not open offline", src)
			continue
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Errorf("report.html: inlined image: %v", err)
			continue
		}
		checkPNG(t, "report.html's inlined image", b)
	}
	var files []string
	for _, href := range html.links {
		if strings.HasSuffix(href, ".png") || strings.HasSuffix(href, ".svg") {
			files = append(files, href)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(([^)]+\.(?:png|svg))\)`).FindAllStringSubmatch(md, -1) {
		files = append(files, m[1])
	}
	if len(files) < 2*len(html.images) {
		t.Errorf("the reports link %d chart files, want at least %d", len(files), 2*len(html.images))
	}
	for _, rel := range files {
		if filepath.IsAbs(rel) || strings.Contains(rel, "..") {
			t.Errorf("%s: a link should be relative to the report, inside its folder", rel)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("a report links %s: %v", rel, err)
			continue
		}
		if strings.HasSuffix(rel, ".png") {
			checkPNG(t, rel, b)
		} else {
			checkSVG(t, rel, b)
		}
	}
}

func checkPNG(t *testing.T, name string, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if r := img.Bounds(); r.Dx() < 600 || r.Dy() < 300 {
		t.Errorf("%s is %dx%d pixels, too small to read", name, r.Dx(), r.Dy())
	}
}

func checkSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	var root struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
	}
	if err := xml.Unmarshal(b, &root); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if root.XMLName.Local != "svg" || root.Width == "" {
		t.Errorf("%s: root <%s width=%q>, want an <svg> with a width", name, root.XMLName.Local, root.Width)
	}
}

// TestStaleCharts checks that a report written over an older one does not
// leave the older one's charts behind.
func TestStaleCharts(t *testing.T) {
	dir := t.TempDir()
	f := fixture(t)
	if _, err := WriteReport(dir, f, harness.Modes(), ""); err != nil {
		t.Fatal(err)
	}
	memoryOnly := *f
	memoryOnly.Rows = slices.DeleteFunc(slices.Clone(f.Rows), func(r results.Row) bool { return !r.Has(results.BytesPerUser) })
	if _, err := WriteReport(dir, &memoryOnly, harness.Modes(), ""); err != nil {
		t.Fatal(err)
	}
	left, err := filepath.Glob(filepath.Join(dir, ChartDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left {
		names = append(names, filepath.Base(p))
	}
	if want := []string{"memory.png", "memory.svg"}; !slices.Equal(names, want) {
		t.Errorf("charts left: %v, want %v", names, want)
	}
}

// TestDegenerateRuns draws runs that put zeros and single points on log
// axes: no lock wait anywhere, one goroutine count, a latency of zero.
// gonum panics on those unless the axes are set up for them.
func TestDegenerateRuns(t *testing.T) {
	f := &results.File{Schema: results.Schema, Meta: results.Meta{Cores: 2, GOMAXPROCS: 2, Start: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		Settings: map[string]string{"limit": "10/s", "goroutines": "4"}}}
	for _, l := range []string{"gcra", "fixed-window"} {
		unpaced := results.Row{Limiter: l, Library: "ratelab", Algorithm: l, Workload: "uniform", Mode: "realtime"}
		unpaced.SetInt(results.Goroutines, 4)
		unpaced.Add(results.Throughput, results.UnitPerS, 1e6)
		unpaced.Add("lock_wait", results.UnitNS, 0)
		paced := results.Row{Limiter: l, Library: "ratelab", Algorithm: l, Workload: "uniform", Mode: "realtime"}
		paced.SetInt(results.Goroutines, 1)
		paced.SetFloat(results.Offered, 1000)
		paced.SetLatency(results.Latency, results.Quantiles{})
		paced.AddSeries(results.Series{Name: "latency_curve", Unit: results.UnitNS, XUnit: "quantile", X: []float64{0.5, 0.99}, Y: []float64{0, 0}})
		memory := results.Row{Limiter: l, Library: "ratelab", Algorithm: l, Workload: "many-users", Mode: "memory"}
		memory.Add(results.BytesPerUser, results.UnitBytes, 0)
		f.Rows = append(f.Rows, unpaced, paced, memory)
	}
	var names []string
	for _, c := range charts(f, harness.Modes()) {
		names = append(names, c.Name)
		for _, format := range []string{"png", "svg"} {
			if _, err := c.render(format); err != nil {
				t.Errorf("%s as %s: %v", c.Name, format, err)
			}
		}
	}
	if want := "latency scaling contention memory"; strings.Join(names, " ") != want {
		t.Errorf("charts %v, want %s", names, want)
	}
	if _, err := WriteReport(t.TempDir(), f, harness.Modes(), ""); err != nil {
		t.Fatal(err)
	}
}

func TestRenderRefusesUnknownFormat(t *testing.T) {
	c := charts(fixture(t), harness.Modes())[0]
	if _, err := c.render("gif"); err == nil {
		t.Error(`render("gif") did not fail`)
	}
}

// TestOddRuns draws results a hand-edited or damaged file could hold:
// edge series that are empty, do not pair up or run to absurd times;
// throughput far below a million a second; the maximum as a quantile; a
// lock wait not measured. Nothing may panic or hang, and what can be
// drawn must be.
func TestOddRuns(t *testing.T) {
	f := fixture(t)
	var edges []int
	for i, r := range f.Rows {
		if r.Curve("in_window") != nil {
			edges = append(edges, i)
		}
	}
	if len(edges) < 3 {
		t.Fatalf("the fixture has %d edge series, want 3 or more", len(edges))
	}
	edge := func(i int) results.Series { return *f.Rows[edges[i]].Curve("in_window") }
	f.Rows[edges[0]].AddSeries(results.Series{Name: "in_window"}) // empty
	short := edge(1)
	short.Y = short.Y[:3] // does not pair up
	f.Rows[edges[1]].AddSeries(short)
	f.Rows[edges[2]].AddSeries(results.Series{Name: "in_window", X: []float64{1e16, 2e16}, Y: []float64{1, 2}}) // absurd times
	var slow, curve, lock int = -1, -1, -1
	for i := range f.Rows {
		r := &f.Rows[i]
		switch {
		case unpaced(*r):
			r.Add(results.Throughput, results.UnitPerS, r.Get(results.Throughput)/1e3) // thousands a second, not millions
			if slow < 0 {
				slow = i
			}
			if lock < 0 && r.Limiter == "gcra" {
				r.Metrics = slices.DeleteFunc(r.Metrics, func(m results.Metric) bool { return m.Name == "lock_wait" })
				lock = i
			}
		case paced(*r) && r.Limiter == "gcra" && curve < 0:
			c := *r.Curve("latency_curve")
			c.X, c.Y = append(slices.Clone(c.X), 1), append(slices.Clone(c.Y), 2e6) // the maximum, as a quantile
			r.AddSeries(c)
			curve = i
		}
	}

	if panels := figure(t, f, "edge").Panels; len(panels) != len(edges)-2 {
		t.Errorf("edge: %d panels from %d series, two of them unusable", len(panels), len(edges))
	}
	for _, pn := range figure(t, f, "latency").Panels {
		if !slices.ContainsFunc(pn.Lines, func(l report.Line) bool { return l.Name == "gcra" && len(l.Points) > 0 }) {
			t.Errorf("latency %s: gcra's line is gone for one quantile it cannot draw", pn.Title)
		}
	}
	r := f.Rows[lock]
	g := r.SettingInt(results.Goroutines)
	for _, pn := range figure(t, f, "contention").Panels {
		for _, l := range pn.Lines {
			if pn.Title == r.Workload && l.Name == "gcra" && slices.ContainsFunc(l.Points, func(p report.XY) bool { return p.X == float64(g) }) {
				t.Errorf("contention: a point for gcra at %d goroutines on %s, whose wait was not measured", g, r.Workload)
			}
		}
	}
	for _, c := range charts(f, harness.Modes()) {
		if c.Name != "scaling" {
			continue
		}
		for i, pn := range c.Panels {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, l := range pn.Lines {
				for _, p := range l.Points {
					lo, hi = min(lo, p.Y), max(hi, p.Y)
				}
			}
			if a := c.panels[i].Y; a.Min > lo || a.Max < hi {
				t.Errorf("scaling %s: the axis spans %g to %g, the data %g to %g", pn.Title, a.Min, a.Max, lo, hi)
			}
		}
	}

	if _, err := WriteReport(t.TempDir(), f, harness.Modes(), ""); err != nil {
		t.Fatal(err)
	}
}
