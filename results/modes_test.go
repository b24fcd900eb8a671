package results_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// table returns f's table of that name, failing if there is none.
func table(t *testing.T, f *results.File, name string) report.Table {
	t.Helper()
	tables := report.Tables(f, modes)
	i := slices.IndexFunc(tables, func(tb report.Table) bool { return tb.Name == name })
	if i < 0 {
		t.Fatalf("no table %q in %d tables", name, len(tables))
	}
	return tables[i]
}

// answers are the counts of an outage row's span, by the names its row
// gives them (harness/outage.go).
type answers struct{ ok, limited, unavailable, other, errors int64 }

// outageRow is an outage run's row as the harness records it: its
// settings, its spans (answers, and the latency of those answered) as
// metrics, its bins as series.
func outageRow(kind, failure string, fleet int, before, during, after answers, latency [3]*results.Quantiles, recovery float64, bins int) results.Row {
	r := results.Row{Limiter: "gcra (redis)", Mode: "outage", Workload: "outage"}
	r.Set("fault", kind)
	r.Set("failure", failure)
	if fleet > 0 {
		r.SetInt("fleet", fleet)
	}
	r.SetFloat("rate", 2000)
	r.SetInt("users", 25)
	r.SetInt("limit", 4)
	r.Set("per", "100ms")
	r.Add("away", results.UnitSeconds, 1)
	r.Add("back", results.UnitSeconds, 3.5)
	r.Add("bin", results.UnitSeconds, 0.1)
	if recovery > 0 {
		r.Add("recovery", results.UnitSeconds, recovery)
	}
	for i, span := range []string{"before", "during", "after"} {
		a := []answers{before, during, after}[i]
		for _, c := range []struct {
			name string
			n    int64
		}{{"ok", a.ok}, {"limited", a.limited}, {"unavailable", a.unavailable}, {"other", a.other}, {"errors", a.errors}} {
			r.Add(span+"."+c.name, results.UnitCount, float64(c.n))
		}
		if q := latency[i]; q != nil {
			r.SetLatency(span+"."+results.Latency, *q)
		}
	}
	for _, name := range []string{"ok", "limited", "unavailable", "other", "errors"} {
		r.AddSeries(results.Series{Name: "bins." + name, Unit: results.UnitCount, Y: make([]float64, bins)})
	}
	return r
}

// The outage table: a row a run, the answers as shares before, during and
// after, and a recovery, or that there was none within the run.
func TestOutageTable(t *testing.T) {
	q := &results.Quantiles{P50: 90e3, P99: 250e6, Max: 270e6}
	f := &results.File{Rows: []results.Row{
		outageRow("refused", "closed", 0, answers{ok: 54, limited: 46}, answers{unavailable: 100}, answers{ok: 39, limited: 36, unavailable: 25},
			[3]*results.Quantiles{q, q, q}, 0.51, 55),
		outageRow("unanswered", "fallback", 2, answers{ok: 1, limited: 1}, answers{ok: 1, limited: 2, errors: 1}, answers{ok: 1, unavailable: 1},
			[3]*results.Quantiles{q, nil, q}, 0, 55),
	}}
	tab := table(t, f, "outage")
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
}

// llmRow is an llm run's row as the harness records it (harness/llm.go):
// how it charged, the workload's parameters, its accuracy on the actual
// tokens, and the tokens it admitted.
func llmRow(limiter, charge string, estimate int, tokens int64, most, wrong float64) results.Row {
	r := results.Row{Limiter: limiter, Mode: "llm", Workload: "llm"}
	r.Set("charge", charge)
	if estimate > 0 {
		r.SetInt("estimate", estimate)
	}
	r.SetInt("limit", 10_000)
	r.Set("per", "1m0s")
	r.SetFloat("mean", 500)
	r.SetFloat("spread", 1)
	r.SetInt("max", 4000)
	r.Add(results.Decisions, results.UnitCount, 1000)
	r.SetAccuracy(results.Accuracy{Admitted: 800, Ideal: 700, FalseAllow: 100, FalseAllowRate: wrong, MaxWindowRatio: most})
	r.Add("asked_tokens", results.UnitTokens, 2000)
	r.Add("tokens", results.UnitTokens, float64(tokens))
	r.Add("ideal_tokens", results.UnitTokens, 1000)
	return r
}

// The llm table: a row a run, its estimate blank for a way of charging
// that uses none; and the picks: the way of charging that stays closest to
// its algorithm knowing the costs, whatever the estimate, and the closest
// to the ideal of those within the limit.
func TestLLMTableAndPicks(t *testing.T) {
	f := &results.File{Rows: []results.Row{
		llmRow("gcra", "estimate only", 100, 1700, 3.5, 0.2),
		llmRow("gcra", "estimate then settle", 100, 1210, 2.9, 0.36),
		llmRow("gcra", "estimate then settle", 500, 1190, 2.7, 0.33),
		llmRow("gcra", "max then settle", 0, 950, 1.7, 0.42),
		llmRow("gcra", "actual up front", 0, 1200, 2.0, 0.17),
		llmRow("sliding-log", "max then settle", 0, 520, 0.99, 0.57),
		llmRow("sliding-log", "actual up front", 0, 1000, 1.0, 0),
	}}
	tab := table(t, f, "llm")
	if len(tab.Rows) != 7 || tab.Rows[0][2] != "100" || tab.Rows[3][2] != "" || tab.Rows[0][9] != "3.50" || tab.Rows[0][8] != "1,700 (170%)" {
		t.Errorf("rows: %q", tab.Rows)
	}
	all, _ := report.Picks(f, modes)
	picks := slices.DeleteFunc(all, func(p report.Pick) bool { return !strings.HasPrefix(p.Need, "Costs known") })
	if len(picks) != 2 || picks[0].Limiter != "gcra (estimate then settle)" || picks[1].Limiter != "sliding-log (max then settle)" {
		t.Fatalf("picks: %+v", picks)
	}
	if !strings.Contains(picks[0].Why, "within 0.833% of the tokens gcra admits knowing every cost") {
		t.Errorf("why: %s", picks[0].Why)
	}
}
