package results

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func ptr[T any](v T) *T { return &v }

// fixture is a small results file with one run of every kind.
func fixture() *File {
	j := &Judged{Limit: 100, Window: 1}
	return &File{
		Schema: Schema,
		Meta: Meta{Seed: 7, GoVersion: "go1.26.8", CPU: "AMD EPYC", Cores: 2, GOMAXPROCS: 2,
			Start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Elapsed: 93.5, SimulationPerS: 1.31e7,
			Params: Params{Limit: 100, Window: 1, Users: 500, Attackers: 50, ManyUsers: 1_000_000, Simulated: 60,
				Goroutines: []int{1, 2}, RealTime: 0.25, LatencyGoroutines: 1, OfferedRate: 200_000, LatencyRuns: 3, RealTimeAccuracyScale: 0.02}},
		Runs: []Run{
			{Limiter: "fixed-window", Library: "ratelab", Algorithm: "fixed-window", Backend: "memory", Workload: "boundary-attack", Mode: "simulated", Judged: j, Decisions: 590_000,
				Accuracy: &Accuracy{Admitted: 300_000, Ideal: 295_000, FalseAllow: 295_000, FalseDeny: 290_000, FalseAllowRate: 0.5, FalseDenyRate: 0.4915, MaxWindowRatio: 2}},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "boundary-attack", Mode: "simulated", Judged: j, Decisions: 590_000,
				Accuracy:          &Accuracy{Admitted: 295_100, Ideal: 295_000, FalseAllow: 2950, FalseDeny: 2850, FalseAllowRate: 0.005, FalseDenyRate: 0.00483, MaxWindowRatio: 1.01},
				AllocsPerDecision: ptr(0.0)},
			{Limiter: "sliding-log", Library: "ratelab", Algorithm: "sliding-log", Backend: "memory", Workload: "boundary-attack", Mode: "simulated", Judged: j, Decisions: 590_000,
				Accuracy: &Accuracy{Admitted: 295_000, Ideal: 295_000, MaxWindowRatio: 1}},
			{Limiter: "go-limiter", Library: "github.com/sethvargo/go-limiter v0.7.1", Algorithm: "fixed-window", Backend: "memory", Workload: "boundary-attack", Mode: "realtime", Judged: j, Decisions: 590_000,
				Accuracy:  &Accuracy{Admitted: 299_000, Ideal: 270_000, FalseAllow: 150_000, FalseDeny: 121_000, FalseAllowRate: 0.254, FalseDenyRate: 0.205, MaxWindowRatio: 1.78},
				TimeScale: 0.25, SendLagNS: &Latency{P50: 300, P90: 900, P99: 4100, P999: 20_000, Max: 80_000}},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "uniform", Mode: "realtime", Goroutines: 1, Decisions: 5_000_000,
				LatencyNS: &Latency{P50: 40, P90: 45, P99: 61, P999: 900, Max: 85_000}, ThroughputPerS: 2.3e7, LockWaitNSPerOp: ptr(0.0), AdmittedFraction: ptr(0.006)},
			{Limiter: "(harness floor)", Library: "ratelab", Backend: "none", Workload: "uniform", Mode: "realtime", Goroutines: 1, Decisions: 9_000_000,
				LatencyNS: &Latency{P50: 30, P90: 31, P99: 40, P999: 700, Max: 60_000}, ThroughputPerS: 3.6e7, LockWaitNSPerOp: ptr(0.0), AdmittedFraction: ptr(1.0)},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "uniform", Mode: "realtime", Goroutines: 2, Decisions: 9_000_000,
				LatencyNS: &Latency{P50: 44, P90: 50, P99: 80, P999: 1200, Max: 1.2e6}, ThroughputPerS: 4.51e7, LockWaitNSPerOp: ptr(0.04)}, // shown as <0.1ns
			{Limiter: "x/time/rate", Library: "golang.org/x/time v0.16.0", Algorithm: "token-bucket", Backend: "memory", Workload: "uniform", Mode: "realtime", Goroutines: 2, Decisions: 2_000_000,
				LatencyNS: &Latency{P50: 210, P90: 260, P99: 900, P999: 30_000, Max: 4.1e6}, ThroughputPerS: 1.05e7, LockWaitNSPerOp: ptr(278.4)},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "uniform", Mode: "realtime", Goroutines: 1, OfferedRate: 200_000, Decisions: 100_000,
				LatencyNS: &Latency{P50: 136, P90: 154, P99: 994, P999: 28_224, Max: 219_966}, ThroughputPerS: 199_990, AchievedFraction: ptr(0.99995),
				LateFraction: ptr(0.0004), AdmittedFraction: ptr(0.8312),
				LatencyRunsNS: []Latency{{P50: 131, P90: 150, P99: 994, P999: 28_224, Max: 219_966}, {P50: 136, P90: 154, P99: 802, P999: 19_000, Max: 90_120},
					{P50: 140, P90: 161, P99: 2_480, P999: 31_000, Max: 1_200_000}}},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "many-users", Mode: "memory", Users: 1_000_000, Decisions: 1_000_000, BytesPerUser: 21.04},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "uniform", Mode: "timing", Goroutines: 1, Decisions: 1_200_000, ThroughputPerS: 2.0e7,
				Rounds: []Round{
					{Sample: Sample{ThroughputPerS: 2.0e7, P50NS: 50, P90NS: 51}, FloorBefore: &Sample{2.5e8, 4, 4.1}, FloorAfter: &Sample{2.4e8, 4.1, 4.2}},
					{Sample: Sample{ThroughputPerS: 1.3e7, P50NS: 76, P90NS: 80}, FloorBefore: &Sample{1.5e8, 6.6, 6.8}, FloorAfter: &Sample{1.5e8, 6.6, 6.7}},
					{Sample: Sample{ThroughputPerS: 2.1e7, P50NS: 48, P90NS: 50}, FloorBefore: &Sample{2.4e8, 4.1, 4.2}, FloorAfter: &Sample{2.5e8, 4, 4.1}},
				}},
			{Limiter: "(harness floor)", Library: "ratelab", Backend: "none", Workload: "uniform", Mode: "timing", Goroutines: 1, Decisions: 4_200_000, ThroughputPerS: 2.4e8,
				Rounds: []Round{{Sample: Sample{2.4e8, 4.1, 4.2}}, {Sample: Sample{1.5e8, 6.6, 6.7}}, {Sample: Sample{2.5e8, 4, 4.1}}}},
			{Limiter: "gcra", Library: "ratelab", Algorithm: "gcra", Backend: "memory", Workload: "trace", SkippedBecause: "the workload has no requests with these parameters"},
			{Limiter: "x/time/rate", Library: "golang.org/x/time v0.16.0", Algorithm: "token-bucket", Backend: "memory", Workload: "many-users", Mode: "memory", Users: 1_000_000, Decisions: 1_000_000, BytesPerUser: 151.76},
		},
	}
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
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestTablesGolden(t *testing.T) {
	var txt, md bytes.Buffer
	tables := Tables(fixture())
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
	golden(t, "tables.txt", txt.Bytes())
	golden(t, "tables.md", md.Bytes())
}

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "results.json", b.Bytes())
	f, err := Read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	Write(&again, f)
	if !bytes.Equal(b.Bytes(), again.Bytes()) {
		t.Fatal("a file read back writes differently")
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tt := range []struct{ in, says string }{
		{`{"schema": 1, "meta": {}, "runs": []}`, "the file is version 1, this ratelab reads 2"},
		{`{"schema": 3, "meta": {}, "runs": [], "new_field": 1}`, "the file is version 3"},
		{`{"schema": 2, "meta": {}, "runs": [], "extra": 1}`, "unknown field"},
		{`{"schema": 2, "runs": [{"limiter": 3}]}`, "cannot unmarshal"},
		{`{"meta": {}, "runs": []}`, "not a results file"},
		{`not json`, "line 1, column 2: invalid character"},
		{"{\"schema\": 2, \"runs\": [\n  {\"limiter\": }\n]}", "line 2, column 15: invalid character '}'"},
		{"{\"schema\": 2,\n \"runs\": [{\"decisions\": \"many\"}]}", "line 2, column 30: json: cannot unmarshal string"},
	} {
		_, err := Read(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Read(%s) = %v, want an error saying %q", tt.in, err, tt.says)
		}
	}
	if _, err := Read(strings.NewReader(`{"schema": 1}`)); !errors.Is(err, ErrSchema) {
		t.Errorf("another schema: %v, want ErrSchema", err)
	}
}

func TestSummaries(t *testing.T) {
	f := fixture()
	if got := SimulationSpeed(f); got != "Simulated time: 1,770,000 decisions at 13.1 million a second on one core (limiters and harness together)." {
		t.Errorf("SimulationSpeed = %q", got)
	}
	if got := Skipped(f); len(got) != 1 || got[0] != "gcra on trace: the workload has no requests with these parameters" {
		t.Errorf("Skipped = %q", got)
	}
	dir := t.TempDir()
	paths, err := WriteDir(dir, f)
	if err != nil || len(paths) != 3 {
		t.Fatalf("WriteDir = %v, %v", paths, err)
	}
	back, err := ReadFile(paths[0])
	if err != nil || len(back.Runs) != len(f.Runs) {
		t.Fatalf("ReadFile = %v, %v", back, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.*.*")) // temporary files
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestFormats(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{count(0), "0"}, {count(999), "999"}, {count(1000), "1,000"}, {count(1234567), "1,234,567"}, {count(-1234), "-1,234"},
		{nanos(0), "0"}, {nanos(85), "85ns"}, {nanos(1234), "1.2µs"}, {nanos(3.4e6), "3.4ms"}, {nanos(2.345e9), "2.35s"},
		{rate(12), "12/s"}, {rate(250_000), "250k/s"}, {rate(1.234e7), "12.34M/s"},
		{countRate(0, 0), "0"}, {countRate(1234, 0.0003123), "1,234 (0.0312%)"},
		{percent(nil), ""}, {percent(ptr(0.0)), "0%"}, {percent(ptr(0.0004)), "<0.1%"}, {percent(ptr(0.8312)), "83.1%"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// The outage table: a row a run, the answers as shares before, during and
// after, and a recovery, or that there was none within the run.
func TestOutageTable(t *testing.T) {
	rec := Seconds(0.51)
	span := func(ok, limited, unavailable int64) Span {
		return Span{Answers: Answers{OK: ok, Limited: limited, Unavailable: unavailable}, LatencyNS: Latency{P50: 90e3, P99: 250e6, Max: 270e6}}
	}
	runs := []Run{
		{Limiter: "gcra (redis)", Mode: "outage", Workload: "outage", Outage: &Outage{Kind: "refused", Failure: "closed", Rate: 2000, Users: 25, Limit: 4, Window: 0.1,
			Away: 1, Back: 3.5, Bin: 0.1, Bins: make([]Answers, 55), Before: span(54, 46, 0), During: span(0, 0, 100), After: span(39, 36, 25), Recovery: &rec}},
		{Limiter: "gcra (redis)", Mode: "outage", Workload: "outage", Outage: &Outage{Kind: "unanswered", Failure: "fallback", Fleet: 2, Rate: 2000, Users: 25, Limit: 4, Window: 0.1,
			Away: 1, Back: 3.5, Bin: 0.1, Bins: make([]Answers, 55), Before: span(1, 1, 0), During: Span{Answers: Answers{OK: 1, Limited: 2, Errors: 1}}, After: span(1, 0, 1)}},
	}
	tab := outageTable(&File{Runs: runs})
	want := [][]string{
		{"refused for 2.5s", "closed", "54 · 46 · 0", "0 · 0 · 100", "39 · 36 · 25", "90.0µs", "250.0ms", "270.0ms", "510.0ms"},
		{"unanswered for 2.5s", "fallback, fleet 2", "50 · 50 · 0", "25 · 50 · 0 (+25 other)", "50 · 0 · 50", "0", "0", "0", "not in 5.5s"},
	}
	if !slices.EqualFunc(tab.Rows, want, slices.Equal) {
		t.Errorf("rows:\n%q\nwant\n%q", tab.Rows, want)
	}
	if !strings.Contains(tab.Note, "2k/s from 25 users, each limited to 4 per 100ms (gcra (redis))") {
		t.Errorf("note: %s", tab.Note)
	}
	var a Answers
	for _, c := range []struct {
		code uint16
		err  string
	}{{200, ""}, {429, "429 Too Many Requests"}, {503, "503 Service Unavailable"}, {404, "404 Not Found"}, {0, "connection refused"}, {200, ""}} {
		a.Count(c.code, c.err)
	}
	if a != (Answers{OK: 2, Limited: 1, Unavailable: 1, Other: 1, Errors: 1}) || a.Total() != 6 {
		t.Errorf("counted %+v", a)
	}
}

// The llm table: a row a run, its estimate blank for a way of charging
// that uses none; and the picks: the way of charging that stays closest to
// its algorithm knowing the costs, whatever the estimate, and the closest
// to the ideal of those within the limit.
func TestLLMTableAndPicks(t *testing.T) {
	llm := func(limiter, charge string, estimate int, tokens int64, most, wrong float64) Run {
		return Run{Limiter: limiter, Mode: "llm", Workload: "llm", Decisions: 1000,
			Accuracy: &Accuracy{Admitted: 800, Ideal: 700, FalseAllow: 100, FalseAllowRate: wrong, MaxWindowRatio: most},
			LLM:      &LLM{Charge: charge, Estimate: estimate, Mean: 500, Spread: 1, Max: 4000, Limit: 10000, Window: 60, Asked: 2000, Tokens: tokens, IdealTokens: 1000}}
	}
	f := &File{Runs: []Run{
		llm("gcra", "estimate only", 100, 1700, 3.5, 0.2),
		llm("gcra", "estimate then settle", 100, 1210, 2.9, 0.36),
		llm("gcra", "estimate then settle", 500, 1190, 2.7, 0.33),
		llm("gcra", "max then settle", 0, 950, 1.7, 0.42),
		llm("gcra", "actual up front", 0, 1200, 2.0, 0.17),
		llm("sliding-log", "max then settle", 0, 520, 0.99, 0.57),
		llm("sliding-log", "actual up front", 0, 1000, 1.0, 0),
	}}
	tab := llmTable(f)
	if len(tab.Rows) != 7 || tab.Rows[0][2] != "100" || tab.Rows[3][2] != "" || tab.Rows[0][9] != "3.50" || tab.Rows[0][8] != "1,700 (170%)" {
		t.Errorf("rows: %q", tab.Rows)
	}
	picks := llmPicks(f)
	if len(picks) != 2 || picks[0].Limiter != "gcra (estimate then settle)" || picks[1].Limiter != "sliding-log (max then settle)" {
		t.Fatalf("picks: %+v", picks)
	}
	if !strings.Contains(picks[0].Why, "within 0.833% of the tokens gcra admits knowing every cost") {
		t.Errorf("why: %s", picks[0].Why)
	}
}
