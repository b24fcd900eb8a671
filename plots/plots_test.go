package plots

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/ratelab/ratelab/harness" // registers the modes, whose tables and picks a report holds
	"github.com/ratelab/ratelab/results"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture is a real run, small: ratelab bench --quick with five limiters,
// two workloads, 1 and 2 goroutines, on a machine otherwise idle (its
// paced latencies are the machine's as much as the limiters'):
//
//	ratelab bench --quick --limiters fixed-window,sliding-log,gcra,x/time/rate,go-limiter \
//		--workloads uniform,boundary-attack --modes simulated,realtime,memory \
//		--users 20 --attackers 5 --many-users 1000 --simulated 5s --goroutines 1,2 --realtime 20ms --redis=false
func fixture(t *testing.T) *results.File {
	t.Helper()
	f, err := results.ReadFile(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code makes now; if the change is meant, go test -update rewrites it:\n%s", path, firstDiff(got, want))
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return "line " + strconv.Itoa(i+1) + ":\n  got:  " + string(gl) + "\n  want: " + string(wl)
		}
	}
	return ""
}

// TestChartDataGolden pins the data behind every chart, so that a change
// in what a chart shows is a change someone saw.
func TestChartDataGolden(t *testing.T) {
	f := fixture(t)
	var b bytes.Buffer
	panels := func(name string, ps []Panel) {
		fmt.Fprintf(&b, "== %s\n", name)
		for _, p := range ps {
			fmt.Fprintf(&b, "-- %s (limit %g)\n", p.Title, p.Limit)
			for _, l := range p.Lines {
				fmt.Fprintf(&b, "%s:", l.Name)
				for _, pt := range l.Points {
					fmt.Fprintf(&b, " %.6g,%.6g", pt.X, pt.Y)
				}
				b.WriteString("\n")
			}
		}
	}
	bars := func(name string, bs Bars) {
		fmt.Fprintf(&b, "== %s (series %s; overlay %v)\n", name, strings.Join(bs.Series, ", "), bs.Overlay)
		for g, group := range bs.Groups {
			fmt.Fprintf(&b, "%s:", group)
			for _, v := range bs.Values[g] {
				fmt.Fprintf(&b, " %.6g", v)
			}
			b.WriteString("\n")
		}
	}
	allow, deny := Accuracy(f)
	panels("latency", Latency(f))
	panels("edge", Edge(f))
	bars("accuracy: false allows", allow)
	bars("accuracy: false denies", deny)
	bars("memory", Memory(f))
	panels("scaling", Scaling(f))
	panels("contention", Contention(f))
	golden(t, "charts.golden", b.Bytes())
}

// TestChartDataTrue checks the chart data against the rows it comes from,
// by a path apart from the code that extracts it.
func TestChartDataTrue(t *testing.T) {
	f := fixture(t)
	find := func(keep func(results.Row) bool) results.Row {
		t.Helper()
		i := slices.IndexFunc(f.Rows, keep)
		if i < 0 {
			t.Fatal("no such row in the fixture")
		}
		return f.Rows[i]
	}
	// unpacedRow is the unpaced real-time row of a limiter on a workload
	// at a number of goroutines: no offered rate, no accuracy.
	unpacedRow := func(workload, limiter string, goroutines float64) results.Row {
		t.Helper()
		return find(func(r results.Row) bool {
			return r.Mode == "realtime" && r.Setting(results.Offered) == "" && !r.Has(results.MostInWindow) &&
				r.Workload == workload && r.Limiter == limiter && float64(r.SettingInt(results.Goroutines)) == goroutines
		})
	}

	for name, n := range map[string]int{"scaling": len(Scaling(f)), "contention": len(Contention(f)), "memory": len(Memory(f).Groups)} {
		if n == 0 {
			t.Fatalf("the fixture gives the %s chart nothing to check", name)
		}
	}
	for _, pn := range Scaling(f) {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				r := unpacedRow(pn.Title, l.Name, pt.X)
				if want := r.Get(results.Throughput) / 1e6; pt.Y != want {
					t.Errorf("scaling %s %s at %v goroutines: %v, want %v", pn.Title, l.Name, pt.X, pt.Y, want)
				}
			}
		}
	}
	for _, pn := range Contention(f) {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				r := unpacedRow(pn.Title, l.Name, pt.X)
				if w, ok := r.Value("lock_wait"); !ok {
					t.Errorf("contention %s %s at %v goroutines: a point for a wait not measured", pn.Title, l.Name, pt.X)
				} else if want := max(w, Floor); pt.Y != want {
					t.Errorf("contention %s %s at %v goroutines: %v, want %v", pn.Title, l.Name, pt.X, pt.Y, want)
				}
			}
		}
	}
	latency := Latency(f)
	if len(latency) == 0 {
		t.Fatal("no latency panels")
	}
	for _, pn := range latency {
		for _, l := range pn.Lines {
			r := find(func(r results.Row) bool {
				return r.Mode == "realtime" && r.SettingFloat(results.Offered) > 0 && r.Workload == pn.Title && r.Limiter == l.Name
			})
			c := r.Curve("latency_curve")
			if c == nil || len(c.X) != len(c.Y) {
				t.Fatalf("latency %s %s: the row's curve is %+v, want a quantile for each value", pn.Title, l.Name, c)
			}
			if len(l.Points) != len(c.Y) {
				t.Fatalf("latency %s %s: %d points, want %d", pn.Title, l.Name, len(l.Points), len(c.Y))
			}
			for i, q := range c.X {
				if got, v := l.Points[i], c.Y[i]; got.Y != max(v, Floor) || got.X != 1/(1-q) {
					t.Errorf("latency %s %s at q=%v: %+v, want y %v", pn.Title, l.Name, q, got, v)
				}
			}
		}
	}
	edge := Edge(f)
	if len(edge) == 0 {
		t.Fatal("no edge panels")
	}
	for _, pn := range edge {
		top := 0.0
		for _, pt := range pn.Lines[0].Points {
			top = max(top, pt.Y)
		}
		if pn.Title == "fixed-window" && top < 1.9*pn.Limit {
			t.Errorf("the fixed window's edge panel peaks at %v, want about 2N = %v", top, 2*pn.Limit)
		}
		if pn.Title == "sliding-log" && top > pn.Limit {
			t.Errorf("the sliding log's edge panel peaks at %v, over N = %v", top, pn.Limit)
		}
	}
	allow, deny := Accuracy(f)
	for g, name := range allow.Groups {
		for s, w := range allow.Series {
			i := slices.IndexFunc(f.Rows, func(r results.Row) bool { return r.Has(results.MostInWindow) && r.Limiter == name && r.Workload == w })
			if i < 0 {
				if allow.Values[g][s] != 0 {
					t.Errorf("accuracy %s %s: a bar with no row", name, w)
				}
				continue
			}
			a, _ := f.Rows[i].AccuracyOf()
			if allow.Values[g][s] != 100*a.FalseAllowRate || deny.Values[g][s] != 100*a.FalseDenyRate {
				t.Errorf("accuracy %s %s: %v%% and %v%%, want %v%% and %v%%", name, w, allow.Values[g][s], deny.Values[g][s], 100*a.FalseAllowRate, 100*a.FalseDenyRate)
			}
		}
	}
	m := Memory(f)
	for g, name := range m.Groups {
		r := find(func(r results.Row) bool { return r.Mode == "memory" && r.Limiter == name })
		if want := r.Get(results.BytesPerUser); m.Values[g][0] != want {
			t.Errorf("memory %s: %v, want %v", name, m.Values[g][0], want)
		}
	}
}

// An outage row's panel: per bin, the shares of its answers, which stack
// to 100, and of its decisions made without Redis; a bin with no request
// is left out. The chart draws it.
func TestOutage(t *testing.T) {
	r := results.Row{Limiter: "gcra (redis)", Mode: "outage"}
	r.Set("fault", "refused")
	r.Set("failure", "fallback")
	r.SetInt("fleet", 2)
	r.Add("away", results.UnitSeconds, 0.1)
	r.Add("back", results.UnitSeconds, 0.2)
	r.Add("bin", results.UnitSeconds, 0.1)
	// Four bins: {OK 3, Limited 1}, {OK 1, Limited 2, Errors 1}, none,
	// {Unavailable 2}.
	for _, s := range []results.Series{
		{Name: "bins.ok", Y: []float64{3, 1, 0, 0}},
		{Name: "bins.limited", Y: []float64{1, 2, 0, 0}},
		{Name: "bins.unavailable", Y: []float64{0, 0, 0, 2}},
		{Name: "bins.other", Y: []float64{0, 0, 0, 0}},
		{Name: "bins.errors", Y: []float64{0, 1, 0, 0}},
		{Name: "failed", Y: []float64{0, 8, 0, 2}},
	} {
		s.Unit = results.UnitCount
		r.AddSeries(s)
	}
	f := &results.File{Rows: []results.Row{r, {Limiter: "gcra (redis)", Mode: "outage", Skipped: "no Redis"}}}
	panels := Outage(f)
	if len(panels) != 1 {
		t.Fatalf("%d panels, want 1", len(panels))
	}
	p := panels[0]
	if p.Title != "Redis down (refused), fall back (fleet of 2)" || p.Away != 0.1 || p.Back != 0.2 || p.Bin != 0.1 {
		t.Errorf("panel %q, away %v, back %v, bin %v", p.Title, p.Away, p.Back, p.Bin)
	}
	want := [][]XY{
		{{0.05, 75}, {0.15, 25}, {0.35, 0}},
		{{0.05, 25}, {0.15, 50}, {0.35, 0}},
		{{0.05, 0}, {0.15, 0}, {0.35, 100}},
		{{0.05, 0}, {0.15, 25}, {0.35, 0}},
	}
	for i, l := range p.Layers {
		if l.Name != OutageLayers[i] || !slices.EqualFunc(l.Points, want[i], func(a, b XY) bool { return near(a.X, b.X) && near(a.Y, b.Y) }) {
			t.Errorf("layer %d: %s %v, want %s %v", i, l.Name, l.Points, OutageLayers[i], want[i])
		}
	}
	// More failed than answered in a bin (the metrics count a decision
	// when it fails, a request by when it was sent): drawn at 100%.
	if got := p.Failed.Points; len(got) != 3 || got[0].Y != 0 || got[1].Y != 100 || got[2].Y != 100 {
		t.Errorf("failed: %v", got)
	}
	charts := Charts(f)
	if len(charts) != 1 || charts[0].Name != "outage" {
		t.Fatalf("charts: %d", len(charts))
	}
	if png, err := charts[0].Render("png"); err != nil || len(png) == 0 {
		t.Errorf("render: %v", err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The llm chart's data: a group a limiter, a series a way of charging
// (with the estimate it used), and the three measures of each row.
func TestLLM(t *testing.T) {
	row := func(limiter, charge string, estimate int, most, wrong float64, tokens int64) results.Row {
		r := results.Row{Limiter: limiter, Mode: "llm"}
		r.Set("charge", charge)
		if estimate > 0 {
			r.SetInt("estimate", estimate)
		}
		r.SetAccuracy(results.Accuracy{MaxWindowRatio: most, FalseAllowRate: wrong})
		r.Add("tokens", results.UnitTokens, float64(tokens))
		r.Add("ideal_tokens", results.UnitTokens, 200)
		return r
	}
	simulated := results.Row{Limiter: "gcra", Mode: "simulated"}
	simulated.SetAccuracy(results.Accuracy{MaxWindowRatio: 1})
	f := &results.File{Rows: []results.Row{
		row("gcra", "estimate only", 100, 3.5, 0.2, 340),
		row("gcra", "max then settle", 0, 1.7, 0.4, 190),
		row("sliding-log", "estimate only", 100, 3.4, 0.1, 330),
		simulated,
	}}
	most, tokens, wrong := LLM(f)
	if !slices.Equal(most.Groups, []string{"gcra", "sliding-log"}) || !slices.Equal(most.Series, []string{"estimate only (100)", "max then settle"}) {
		t.Fatalf("groups %v, series %v", most.Groups, most.Series)
	}
	if most.Values[0][1] != 1.7 || most.Values[1][1] != 0 || tokens.Values[0][0] != 170 || !near(wrong.Values[1][0], 10) {
		t.Errorf("most %v, tokens %v, wrong %v", most.Values, tokens.Values, wrong.Values)
	}
	if allow, _ := Accuracy(f); len(allow.Groups) != 1 || len(allow.Series) != 0 && allow.Series[0] == "llm" {
		t.Errorf("the accuracy chart took the llm rows: %+v", allow)
	}
}
