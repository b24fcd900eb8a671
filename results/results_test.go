package results_test

import (
	"bytes"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// The libraries of the fixture's limiters.
const (
	ratelab   = results.LibraryRatelab
	xrate     = "golang.org/x/time v0.16.0"
	goLimiter = "github.com/sethvargo/go-limiter v0.7.1"
	floorName = "(harness floor)"
)

// The names the harness gives the metrics and series of its own
// (harness/realtime.go), which the tables read.
const (
	admittedFraction = "admitted_fraction"
	achievedFraction = "achieved_fraction"
	lateFraction     = "late_fraction"
	lockWait         = "lock_wait"
	sendLagP99       = "send_lag.p99"
	runP99           = "run_p99"
)

// measured is a row of a limiter in memory.
// modes are what the tests report with: the lab's modes (their tables,
// picks and gates), and the tests' own; gated are the same as compare,
// merge and the gate know them.
var (
	modes = append(harness.Modes(), report.Mode{Mode: checks}, tables)
	gated = modes.Results()
)

func measured(mode, workload, limiter, library, algorithm string) results.Row {
	return results.Row{Mode: mode, Workload: workload, Limiter: limiter, Library: library, Algorithm: algorithm, Backend: results.BackendMemory}
}

// floor is a row of the harness floor, which decides nothing.
func floor(mode, workload string) results.Row {
	r := results.Row{Mode: mode, Workload: workload, Limiter: floorName, Library: ratelab, Backend: "none"}
	r.Set(results.Floor, "true")
	return r
}

// accuracy is r with an accuracy judged against 100 per second.
func accuracy(r results.Row, decisions int64, a results.Accuracy) results.Row {
	r.SetInt(results.JudgedN, 100)
	r.Set(results.JudgedPer, "1s")
	r.Add(results.Decisions, results.UnitCount, float64(decisions))
	r.SetAccuracy(a)
	return r
}

// realTime is r with what a real-time run measured: unpaced, or paced
// at offered a second.
func realTime(r results.Row, goroutines int, offered float64, decisions int64, q results.Quantiles, tput float64) results.Row {
	r.Mode = "realtime"
	r.SetInt(results.Goroutines, goroutines)
	if offered > 0 {
		r.SetFloat(results.Offered, offered)
	}
	r.Add(results.Decisions, results.UnitCount, float64(decisions))
	r.SetLatency(results.Latency, q)
	r.Add(results.Throughput, results.UnitPerS, tput)
	return r
}

// memory is r with the bytes per user of users keys.
func memory(r results.Row, users int, bytes float64) results.Row {
	r.Mode, r.Workload = "memory", "many-users"
	r.Add("users", results.UnitCount, float64(users))
	r.Add(results.Decisions, results.UnitCount, float64(users))
	r.Add(results.BytesPerUser, results.UnitBytes, bytes)
	return r
}

// timing is r with a timing run's rounds: the limiter's samples, and the
// floor's before and after each (none for the floor's own row), their
// medians its figures.
func timing(r results.Row, decisions int64, own, before, after []results.Sample) results.Row {
	r.Mode = "timing"
	r.SetInt(results.Goroutines, 1)
	r.Add(results.Decisions, results.UnitCount, float64(decisions))
	addSamples(&r, "", own)
	addSamples(&r, results.FloorBefore, before)
	addSamples(&r, results.FloorAfter, after)
	for _, s := range r.Series[:3] {
		r.Add(s.Name, s.Unit, median(s.Y))
	}
	return r
}

// addSamples adds samples to r as the series timing rows keep, after prefix.
func addSamples(r *results.Row, prefix string, samples []results.Sample) {
	if len(samples) == 0 {
		return
	}
	tput := results.Series{Name: prefix + results.Throughput, Unit: results.UnitPerS}
	p50 := results.Series{Name: prefix + results.Latency + ".p50", Unit: results.UnitNS}
	p90 := results.Series{Name: prefix + results.Latency + ".p90", Unit: results.UnitNS}
	for _, s := range samples {
		tput.Y, p50.Y, p90.Y = append(tput.Y, s.ThroughputPerS), append(p50.Y, s.P50NS), append(p90.Y, s.P90NS)
	}
	r.AddSeries(tput)
	r.AddSeries(p50)
	r.AddSeries(p90)
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// with is r with metric name set.
func with(r results.Row, name, unit string, v float64) results.Row {
	r.Add(name, unit, v)
	return r
}

// clone is r with nothing shared with it.
func clone(r results.Row) results.Row {
	r.Config = maps.Clone(r.Config)
	r.Metrics = slices.Clone(r.Metrics)
	r.Series = slices.Clone(r.Series)
	for i := range r.Series {
		r.Series[i].X, r.Series[i].Y = slices.Clone(r.Series[i].X), slices.Clone(r.Series[i].Y)
	}
	return r
}

// change sets r's metric name, keeping its unit, to f of its value.
func change(r *results.Row, name string, f func(float64) float64) {
	for i := range r.Metrics {
		if r.Metrics[i].Name == name {
			r.Metrics[i].Value = f(r.Metrics[i].Value)
		}
	}
}

// set sets r's metric name, keeping its unit.
func set(r *results.Row, name string, v float64) {
	change(r, name, func(float64) float64 { return v })
}

// drop removes r's metric name.
func drop(r *results.Row, name string) {
	r.Metrics = slices.DeleteFunc(slices.Clone(r.Metrics), func(m results.Metric) bool { return m.Name == name })
}

// fixture is a small results file with a row of every kind.
func fixture() *results.File {
	paced := realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 1, 200_000, 100_000,
		results.Quantiles{P50: 136, P90: 154, P99: 994, P999: 28_224, Max: 219_966}, 199_990)
	paced.Add(admittedFraction, results.UnitFraction, 0.8312)
	paced.Add(achievedFraction, results.UnitFraction, 0.99995)
	paced.Add(lateFraction, results.UnitFraction, 0.0004)
	paced.AddSeries(results.Series{Name: runP99, Unit: results.UnitNS, Y: []float64{994, 802, 2_480}})
	replayed := accuracy(measured("realtime", "boundary-attack", "go-limiter", goLimiter, "fixed-window"), 590_000,
		results.Accuracy{Admitted: 299_000, Ideal: 270_000, FalseAllow: 150_000, FalseDeny: 121_000, FalseAllowRate: 0.254, FalseDenyRate: 0.205, MaxWindowRatio: 1.78})
	replayed.Add(results.TimeScale, results.UnitRatio, 0.25)
	replayed.Add(sendLagP99, results.UnitNS, 4100)

	return &results.File{
		Schema: results.Schema,
		Meta: results.Meta{Seed: 7, GoVersion: "go1.26.8", CPU: "AMD EPYC", Cores: 2, GOMAXPROCS: 2,
			Start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Elapsed: 93.5, SimulationPerS: 1.31e7, SimulatedDecisions: 1_770_000,
			Settings: map[string]string{"quick": "false", "limit": "100/s", "users": "500", "attackers": "50", "many-users": "1000000", "simulated": "1m0s",
				"goroutines": "1,2", "realtime": "250ms", "latency-goroutines": "1", "rate": "200000", "latency-runs": "3", "realtime-accuracy-scale": "0.02"}},
		Rows: []results.Row{
			accuracy(measured("simulated", "boundary-attack", "fixed-window", ratelab, "fixed-window"), 590_000,
				results.Accuracy{Admitted: 300_000, Ideal: 295_000, FalseAllow: 295_000, FalseDeny: 290_000, FalseAllowRate: 0.5, FalseDenyRate: 0.4915, MaxWindowRatio: 2}),
			with(accuracy(measured("simulated", "boundary-attack", "gcra", ratelab, "gcra"), 590_000,
				results.Accuracy{Admitted: 295_100, Ideal: 295_000, FalseAllow: 2950, FalseDeny: 2850, FalseAllowRate: 0.005, FalseDenyRate: 0.00483, MaxWindowRatio: 1.01}),
				results.AllocsPerDecision, results.UnitAllocs, 0),
			accuracy(measured("simulated", "boundary-attack", "sliding-log", ratelab, "sliding-log"), 590_000,
				results.Accuracy{Admitted: 295_000, Ideal: 295_000, MaxWindowRatio: 1}),
			replayed,
			with(with(realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 1, 0, 5_000_000,
				results.Quantiles{P50: 40, P90: 45, P99: 61, P999: 900, Max: 85_000}, 2.3e7),
				lockWait, results.UnitNS, 0), admittedFraction, results.UnitFraction, 0.006),
			with(with(realTime(floor("", "uniform"), 1, 0, 9_000_000,
				results.Quantiles{P50: 30, P90: 31, P99: 40, P999: 700, Max: 60_000}, 3.6e7),
				lockWait, results.UnitNS, 0), admittedFraction, results.UnitFraction, 1),
			with(realTime(measured("", "uniform", "gcra", ratelab, "gcra"), 2, 0, 9_000_000,
				results.Quantiles{P50: 44, P90: 50, P99: 80, P999: 1200, Max: 1.2e6}, 4.51e7),
				lockWait, results.UnitNS, 0.04), // shown as <0.1ns
			with(realTime(measured("", "uniform", "x/time/rate", xrate, "token-bucket"), 2, 0, 2_000_000,
				results.Quantiles{P50: 210, P90: 260, P99: 900, P999: 30_000, Max: 4.1e6}, 1.05e7),
				lockWait, results.UnitNS, 278.4),
			paced,
			memory(measured("", "", "gcra", ratelab, "gcra"), 1_000_000, 21.04),
			timing(measured("", "uniform", "gcra", ratelab, "gcra"), 1_200_000,
				[]results.Sample{{ThroughputPerS: 2.0e7, P50NS: 50, P90NS: 51}, {ThroughputPerS: 1.3e7, P50NS: 76, P90NS: 80}, {ThroughputPerS: 2.1e7, P50NS: 48, P90NS: 50}},
				[]results.Sample{{ThroughputPerS: 2.5e8, P50NS: 4, P90NS: 4.1}, {ThroughputPerS: 1.5e8, P50NS: 6.6, P90NS: 6.8}, {ThroughputPerS: 2.4e8, P50NS: 4.1, P90NS: 4.2}},
				[]results.Sample{{ThroughputPerS: 2.4e8, P50NS: 4.1, P90NS: 4.2}, {ThroughputPerS: 1.5e8, P50NS: 6.6, P90NS: 6.7}, {ThroughputPerS: 2.5e8, P50NS: 4, P90NS: 4.1}}),
			timing(floor("", "uniform"), 4_200_000,
				[]results.Sample{{ThroughputPerS: 2.4e8, P50NS: 4.1, P90NS: 4.2}, {ThroughputPerS: 1.5e8, P50NS: 6.6, P90NS: 6.7}, {ThroughputPerS: 2.5e8, P50NS: 4, P90NS: 4.1}}, nil, nil),
			{Limiter: "gcra", Library: ratelab, Algorithm: "gcra", Backend: results.BackendMemory, Workload: "trace", Skipped: "the workload has no requests with these parameters"},
			memory(measured("", "", "x/time/rate", xrate, "token-bucket"), 1_000_000, 151.76),
		},
	}
}

func TestTablesGolden(t *testing.T) {
	var txt, md bytes.Buffer
	tables := report.Tables(fixture(), modes)
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Name)
		if err := tb.Text(&txt); err != nil {
			t.Fatal(err)
		}
		if err := tb.Markdown(&md); err != nil {
			t.Fatal(err)
		}
	}
	if want := "accuracy accuracy-realtime latency throughput contention memory timing"; strings.Join(names, " ") != want {
		t.Fatalf("tables %v, want %s", names, want)
	}
	golden.Check(t, "tables.txt", txt.Bytes())
	golden.Check(t, "tables.md", md.Bytes())
}

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := results.Write(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "results.json", b.Bytes())
	f, err := results.Read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := results.Write(&again, f); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), again.Bytes()) {
		t.Fatal("a file read back writes differently")
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tt := range []struct{ in, says string }{
		{`{"schema": 1, "meta": {}, "runs": []}`, "the file is version 1, written by a ratelab from before every measurement was a row (this one reads 4)"},
		{`{"schema": 5, "meta": {}, "rows": [], "new_field": 1}`, "the file is version 5, this ratelab reads 4"},
		{`{"schema": 4, "meta": {"params": {}}, "rows": []}`, `unknown field "params"`},
		{`{"schema": 3, "meta": {}, "rows": [], "extra": 1}`, "unknown field"},
		{`{"schema": 3, "meta": {}, "runs": []}`, `unknown field "runs"`},
		{`{"schema": 3, "rows": [{"limiter": 3}]}`, "cannot unmarshal"},
		{`{"meta": {}, "rows": []}`, "not a results file"},
		{`not json`, "line 1, column 2: invalid character"},
		{"{\"schema\": 3, \"rows\": [\n  {\"limiter\": }\n]}", "line 2, column 15: invalid character '}'"},
		{"{\"schema\": 3,\n \"rows\": [{\"metrics\": \"many\"}]}", "line 2, column 28: json: cannot unmarshal string"},
	} {
		_, err := results.Read(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Read(%s) = %v, want an error saying %q", tt.in, err, tt.says)
		}
	}
	if _, err := results.Read(strings.NewReader(`{"schema": 1}`)); !errors.Is(err, results.ErrSchema) {
		t.Errorf("another schema: %v, want ErrSchema", err)
	}
}

// A file the ratelab before rows wrote (schema 2, its measurements in
// "runs") is refused as a file of another version, saying what to do,
// not as one with a field this version does not know.
func TestReadRefusesSchema2(t *testing.T) {
	path := filepath.Join("testdata", "schema2.json")
	_, err := results.ReadFile(path)
	if !errors.Is(err, results.ErrSchema) {
		t.Fatalf("ReadFile(%s) = %v, want ErrSchema", path, err)
	}
	for _, want := range []string{
		path + ": results: schema version mismatch: the file is version 2, written by a ratelab from before every measurement was a row (this one reads 4)",
		"run the lab again with this ratelab, or compare it with the ratelab that wrote it",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ReadFile(%s) = %v, want it to say %q", path, err, want)
		}
	}
	if strings.Contains(err.Error(), "unknown field") {
		t.Errorf("ReadFile(%s) = %v: names a field, not the version", path, err)
	}
}

func TestSummaries(t *testing.T) {
	f := fixture()
	if got := report.SimulationSpeed(f); got != "Simulated time: 1,770,000 decisions at 13.1 million a second on one core (limiters and harness together)." {
		t.Errorf("SimulationSpeed = %q", got)
	}
	if got := report.Skipped(f); len(got) != 1 || got[0] != "gcra on trace: the workload has no requests with these parameters" {
		t.Errorf("Skipped = %q", got)
	}
	dir := t.TempDir()
	paths, err := report.WriteDir(dir, f, modes)
	if err != nil || len(paths) != 3 {
		t.Fatalf("WriteDir = %v, %v", paths, err)
	}
	back, err := results.ReadFile(paths[0])
	if err != nil || len(back.Rows) != len(f.Rows) {
		t.Fatalf("ReadFile = %v, %v", back, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.*.*")) // temporary files
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestFormats(t *testing.T) {
	share := func(v float64) results.Row { return with(results.Row{}, "share", results.UnitFraction, v) }
	for _, tt := range []struct{ got, want string }{
		{results.Count(0), "0"}, {results.Count(999), "999"}, {results.Count(1000), "1,000"}, {results.Count(1234567), "1,234,567"}, {results.Count(-1234), "-1,234"},
		{report.Nanos(0), "0"}, {report.Nanos(85), "85ns"}, {report.Nanos(1234), "1.2µs"}, {report.Nanos(3.4e6), "3.4ms"}, {report.Nanos(2.345e9), "2.35s"},
		{report.Rate(12), "12/s"}, {report.Rate(250_000), "250k/s"}, {report.Rate(1.234e7), "12.34M/s"},
		{report.CountRate(0, 0), "0"}, {report.CountRate(1234, 0.0003123), "1,234 (0.0312%)"},
		{report.Percent(results.Row{}, "share"), ""}, {report.Percent(share(0), "share"), "0%"},
		{report.Percent(share(0.0004), "share"), "<0.1%"}, {report.Percent(share(0.8312), "share"), "83.1%"},
		{report.Fixed(1.5, 2), "1.50"}, {report.Fixed(2, 1), "2.0"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// A file of version 3 is read as this version: its parameters become the
// settings the flags that set them record, as the lab writes them now.
func TestReadV3(t *testing.T) {
	f, err := results.ReadFile("baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Schema != results.Schema {
		t.Errorf("schema %d, want %d", f.Schema, results.Schema)
	}
	want := map[string]string{"quick": "true", "limit": "100/s", "users": "100", "attackers": "20", "many-users": "100000", "simulated": "20s", "realtime-accuracy-scale": "0.02"}
	for k, v := range want {
		if got := f.Meta.Setting(k); got != v {
			t.Errorf("setting %s = %q, want %q (all: %v)", k, got, v, f.Meta.Settings)
		}
	}
	if !strings.Contains(f.Meta.Setting("limiters"), "gcra") || !strings.Contains(f.Meta.Setting("workloads"), "many-users") {
		t.Errorf("limiters and workloads: %v", f.Meta.Settings)
	}
}
