package readme

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// measured is the folder make readme-check leaves its runs in; without
// it TestREADME checks only what needs no run (the settings).
var (
	measured = flag.String("measured", "", "the folder of make readme-check's runs (lab.txt, lab/, plan.txt, genlog.txt, memory.txt)")
	times    = flag.String("times", "", "out/times.tsv, the make targets' times")
)

const root = "../.."

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADME checks the README against make readme-check's runs, or,
// under make test, against the tree alone: every figure found, every
// number accounted for, the settings it names the tree's.
func TestREADME(t *testing.T) {
	r := &Run{Root: root, Host: results.CPUModel()}
	if *measured != "" {
		var err error
		if r, err = Measure(*measured, *times, root); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := Check(readREADME(t), r)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the README's figures on %s:\n%s", r.Host, b.String())
	for _, d := range Drifted(rs) {
		t.Errorf("%s: the README says %s, this run %s", d.Figure, d.Says, d.Got)
	}
	if *measured == "" {
		for _, res := range rs {
			if strings.Contains(res.Figure, "(") && res.Got == "" {
				t.Errorf("%s: a setting not read from the tree: %s", res.Figure, res.Why)
			}
		}
	}
}

// TestCheckFlagsDrift runs Check on a run made to agree with the README,
// then plants one drift at a time: each is flagged, by its figure.
func TestCheckFlagsDrift(t *testing.T) {
	readme := readREADME(t)
	agree := func() *Run { return agreeing(t, readme) }
	rs, err := Check(readme, agree())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rs {
		if res.Got == "" && !strings.Contains(res.Why, "has not run here") {
			t.Errorf("%s: not measured by a run made to agree (%s)", res.Figure, res.Why)
		}
	}
	if d := Drifted(rs); len(d) > 0 {
		t.Fatalf("a run made to agree drifted: %+v", d)
	}
	// A bound holds a run far faster than it: good news is no drift.
	fast := agree()
	for i := range fast.Times {
		fast.Times[i].Seconds /= 10
	}
	if rs, err := Check(readme, fast); err != nil || len(Drifted(rs)) > 0 {
		t.Errorf("a run ten times faster than the README: %v, drifted %+v", err, Drifted(rs))
	}

	plants := []struct {
		name   string
		figure string // a part of the drifted figure's name
		plant  func(r *Run)
	}{
		{"make test took three times its time", "make test,", func(r *Run) {
			for i := range r.Times {
				if r.Times[i].Target == "test" && !r.Times[i].EmptyCache {
					r.Times[i].Seconds *= 3
				}
			}
		}},
		{"the plan's table changed a cell", "the plan's table", func(r *Run) {
			r.PlanText = strings.Replace(r.PlanText, "│", "│x", 5)
		}},
		{"the log has more users", "the log's users", func(r *Run) {
			r.Genlog = strings.Replace(r.Genlog, " of 22365 normal users", " of 22366 normal users", 1)
		}},
		{"a pick's bytes grew 10%", "pick: Least memory per user", func(r *Run) {
			r.LabText = strings.Replace(r.LabText, "held 22.7 bytes", "held 25.0 bytes", 1)
		}},
		{"a pick names another limiter", "pick: Least memory per user", func(r *Run) {
			r.LabText = strings.Replace(r.LabText, "Least memory per user: gcra.", "Least memory per user: fixed-window.", 1)
		}},
		{"a rate fell threefold", "pick: Never more than N", func(r *Run) {
			r.LabText = strings.Replace(r.LabText, "26.33M/s", "8.10M/s", 1)
		}},
		{"gcra's key grew", "bytes per key at 1M, gcra", func(r *Run) { r.BytesPerKey["gcra"] *= 1.05 }},
		{"the sliding log allocates more", "sliding-log", func(r *Run) {
			for i, row := range r.Lab.Rows {
				if row.Limiter == "sliding-log" && row.Workload == "many-users" {
					setMetric(&r.Lab.Rows[i], results.AllocsPerDecision, 0.5)
				}
			}
		}},
		{"the soak checks fewer histories", "(Makefile)", func(r *Run) { r.Root = plantedTree(t, "Makefile", "-soak=300", "-soak=30") }},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			r := agree()
			p.plant(r)
			rs, err := Check(readme, r)
			if err != nil {
				t.Fatal(err)
			}
			d := Drifted(rs)
			if len(d) != 1 || !strings.Contains(d[0].Figure, p.figure) {
				t.Errorf("drifted: %+v; want one, of %q", d, p.figure)
			}
		})
	}
}

// A rate is the host's: the excerpt's rates are held on its kind of host
// alone, its bytes and ×N on any.
func TestPicksOnAnotherHost(t *testing.T) {
	readme := readREADME(t)
	r := agreeing(t, readme)
	r.Host = "Intel(R) Xeon(R) Processor"
	r.LabText = strings.Replace(r.LabText, "26.33M/s", "8.10M/s", 1)
	rs, err := Check(readme, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range Drifted(rs) {
		t.Errorf("on another kind of host, a rate a third of the excerpt's drifted: %+v", res)
	}
	r.LabText = strings.Replace(r.LabText, "held 22.7 bytes", "held 25.0 bytes", 1)
	if rs, _ := Check(readme, r); len(Drifted(rs)) != 1 || !strings.Contains(Drifted(rs)[0].Figure, "Least memory per user") {
		t.Errorf("on another kind of host, bytes grown 10%%: drifted %+v, want the memory pick", Drifted(rs))
	}
}

// TestUnaccounted: a number the README gains is caught, with its line.
func TestUnaccounted(t *testing.T) {
	readme := readREADME(t)
	if loose := Unaccounted(readme); len(loose) > 0 {
		t.Fatalf("the README has numbers no figure checks: %v", loose)
	}
	planted := strings.Replace(readme, "## Using the library", "It decides in 40 ns.\n\n## Using the library", 1)
	loose := Unaccounted(planted)
	if len(loose) != 1 || !strings.Contains(loose[0], `"40"`) {
		t.Errorf("Unaccounted(planted) = %v, want the planted 40", loose)
	}
	if _, err := Check(planted, &Run{}); err == nil || !strings.Contains(err.Error(), `"40"`) {
		t.Errorf("Check(planted) = %v, want an error naming the 40", err)
	}
	gone := strings.Replace(readme, "On a fresh machine with Go", "On a fresh machine, with Go", 1)
	if _, err := Check(gone, &Run{}); err == nil || !strings.Contains(err.Error(), "the version of Go") {
		t.Errorf("Check(the Go version reworded) = %v, want an error naming the figure", err)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi float64
	}{
		{"2:20–3:10", 140, 190},
		{"6:40", 0.9 * 400, 1.1 * 400},
	} {
		lo, hi, err := spread(c.in, clock)
		if err != nil || math.Abs(lo-c.lo) > 1e-9 || math.Abs(hi-c.hi) > 1e-9 {
			t.Errorf("spread(%q) = %v, %v, %v; want %v, %v", c.in, lo, hi, err, c.lo, c.hi)
		}
	}
	for _, c := range []struct {
		in     string
		memory bool
		lo, hi float64
	}{
		{"within 5:30", false, 0, 330},
		{"within 0.7 GB", true, 0, 0.7},
		{"0.9–1.8 GB", true, 0.9, 1.8},
	} {
		lo, hi, err := cellRange(c.in, c.memory)
		if err != nil || math.Abs(lo-c.lo) > 1e-9 || math.Abs(hi-c.hi) > 1e-9 {
			t.Errorf("cellRange(%q) = %v, %v, %v; want %v, %v", c.in, lo, hi, err, c.lo, c.hi)
		}
	}
	for _, bad := range []string{"within 0.7", "within 5m"} {
		if _, _, err := cellRange(bad, strings.HasSuffix(bad, "0.7")); err == nil {
			t.Errorf("cellRange(%q): no error", bad)
		}
	}
	for _, bad := range []string{"2m20s", "3:75", "–3:00"} {
		if _, _, err := spread(bad, clock); err == nil {
			t.Errorf("spread(%q): no error", bad)
		}
	}
	if v, err := parseFloat("2½"); err != nil || v != 2.5 {
		t.Errorf("parseFloat(2½) = %v, %v", v, err)
	}
}

// match returns the submatches of the figure named name in readme.
func match(t *testing.T, readme, name string) []string {
	t.Helper()
	for _, f := range figures {
		if f.name == name {
			if m := f.re.FindStringSubmatch(readme); m != nil {
				return m
			}
			t.Fatalf("the README no longer states %s", name)
		}
	}
	t.Fatalf("no figure %q", name)
	return nil
}

// agreeing returns a run on an AMD EPYC host whose every measure is what
// the README says (the middle of a range).
func agreeing(t *testing.T, readme string) *Run {
	t.Helper()
	r := &Run{Host: "AMD EPYC 7B13", Root: root}

	rows := tableRows(match(t, readme, "what the commands take")[2])
	const col = 1 // the first host's
	if rows[0][col] != "AMD EPYC" {
		t.Fatalf("the times' first column is %q, want AMD EPYC", rows[0][col])
	}
	for _, row := range rows[1:] {
		if row[col] == "—" {
			continue // not measured on this kind of host
		}
		target := backticked.FindStringSubmatch(row[0])[1]
		empty := strings.Contains(row[0], "empty build cache")
		var tm *Timing
		for i := range r.Times {
			if r.Times[i].Target == target && r.Times[i].EmptyCache == empty {
				tm = &r.Times[i]
			}
		}
		if tm == nil {
			r.Times = append(r.Times, Timing{Target: target, EmptyCache: empty, CPU: r.Host, Seconds: 1})
			tm = &r.Times[len(r.Times)-1]
		}
		memory := strings.HasPrefix(row[0], "peak memory")
		lo, hi, err := cellRange(row[col], memory)
		if err != nil {
			t.Fatal(err)
		}
		if memory {
			tm.PeakKB = (lo + hi) / 2 * 1e9 / 1024
		} else {
			tm.Seconds = (lo + hi) / 2
		}
	}

	m := match(t, readme, "the plan of the synthetic shop")
	r.PlanText = "$ ratelab plan\n" + m[1] + "\n\nmore\n"
	r.Genlog = "genlog: 9928976 lines: 9321364 of " + strings.ReplaceAll(m[5], ",", "") + " normal users,\n  510071 of 8 abusers (a),\n  97541 of 3 offices (b)\n"

	r.LabText = "The lab took 1m0s.\n\nWhich limiter should I pick? This run's answers, from the numbers above:\n"
	for _, p := range orderedPicks(match(t, readme, "the picks of a quick lab")[1]) {
		r.LabText += p + "\n"
	}
	r.LabText += "\nThe lab took 1m.\n"

	m = match(t, readme, "the allocations of a decision")
	lo, _ := parseFloat(m[1])
	logLo, _ := parseFloat(m[3])
	r.Lab = &results.File{}
	for pkg, alg := range algorithmOf {
		row := results.Row{Mode: "accuracy", Workload: "many-users", Limiter: alg, Library: results.LibraryRatelab, Backend: results.BackendMemory}
		row.Add(results.AllocsPerDecision, results.UnitAllocs, map[bool]float64{true: logLo, false: lo}[pkg == "slidinglog"])
		r.Lab.Rows = append(r.Lab.Rows, row)
	}
	edge := results.Row{Mode: "accuracy", Workload: "boundary-attack", Limiter: "fixed-window", Library: results.LibraryRatelab, Backend: results.BackendMemory}
	edge.SetAccuracy(results.Accuracy{MaxWindowRatio: 2})
	r.Lab.Rows = append(r.Lab.Rows, edge)

	r.BytesPerKey = map[string]float64{}
	for _, row := range tableRows(match(t, readme, "bytes per key")[1]) {
		says := row[len(row)-1]
		base, rest, _ := strings.Cut(says, " + ")
		v, err := parseFloat(base)
		if err != nil {
			t.Fatal(err)
		}
		if rest != "" {
			per, err := parseFloat(strings.TrimSuffix(rest, " per request"))
			if err != nil {
				t.Fatal(err)
			}
			v += per
		}
		r.BytesPerKey[algorithmOf[strings.Trim(row[0], "`")]] = v
	}
	return r
}

func setMetric(r *results.Row, name string, v float64) {
	for i := range r.Metrics {
		if r.Metrics[i].Name == name {
			r.Metrics[i].Value = v
		}
	}
}

// plantedTree copies the files the README's settings come from into a
// folder of the test's own, old replaced by new in file.
func plantedTree(t *testing.T, file, old, new string) string {
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "Makefile", "tools/with-redis", "tools/releases", "cmd/ratelab/soak_test.go"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == file {
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s has no %q to plant over", f, old)
			}
			b = []byte(strings.Replace(string(b), old, new, 1))
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// out/times.tsv keeps a failed run's time too (a seventh field, its exit
// status), which is not held to the README; a line of six, as older
// records are, is a run that succeeded.
func TestReadTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.tsv")
	lines := "test\t250.0\t900000\twarm\tAMD EPYC 9R14\t2026-12-05T10:00:00Z\n" +
		"test\t20.5\t100000\twarm\tAMD EPYC 9R14\t2026-12-05T10:10:00Z\t2\n" +
		"plan\t61.0\t-\twarm\tAMD EPYC 9R14\t2026-12-05T10:20:00Z\t0\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := readTimes(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Times: ts}
	if tm, ok := r.latest("test", false, "AMD EPYC"); !ok || tm.Seconds != 250 {
		t.Errorf("latest make test = %+v, %v; want the run that succeeded, 250 s", tm, ok)
	}
	if tm, ok := r.latest("plan", false, "AMD EPYC"); !ok || tm.Seconds != 61 || tm.PeakKB != 0 {
		t.Errorf("latest make plan = %+v, %v; want 61 s, no peak", tm, ok)
	}
	if err := os.WriteFile(path, []byte("test\t1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readTimes(path); err == nil || !strings.Contains(err.Error(), ":1: want 6 or 7 fields") {
		t.Errorf("a line of two fields: %v, want an error naming its line", err)
	}
}
