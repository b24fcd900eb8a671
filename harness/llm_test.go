package harness

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// The llm mode, every algorithm: the sliding log knowing each cost up
// front is the ideal itself; reserving the most a request may cost keeps
// the sliding log within the limit; charging a low estimate alone admits
// far more tokens than the ideal, and settling it at the actual tokens
// takes that back; GCRA settled admits about what GCRA admits knowing the
// costs; the token and leaky buckets, which would repeat GCRA's rows, are
// left out; and a table and the picks come of it.
func TestLabLLM(t *testing.T) {
	c := smallLab()
	c.Modes = []string{llmModeName}
	c.Limiters = []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"}
	c.LLM = llmConfig{Users: 20, Simulated: 20 * time.Minute}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		limiter, charge string
		estimate        int
	}
	runs := map[key]results.Row{}
	for _, r := range f.Rows {
		if r.Mode != llmModeName || r.Setting(charge) == "" || !r.Has(results.MostInWindow) {
			t.Fatalf("%+v: want only llm rows", r)
		}
		if r.Limiter == "token-bucket" || r.Limiter == "leaky-bucket" {
			t.Errorf("%s ran: it decides as GCRA does", r.Limiter)
		}
		runs[key{r.Limiter, r.Setting(charge), r.SettingInt(estimate)}] = r
	}
	if len(runs) != 4*6 {
		t.Fatalf("%d rows, want 4 limiters × 6 ways of charging", len(runs))
	}
	ideal := runs[key{"sliding-log", chargeKnown, 0}]
	if a := accuracyOf(ideal); a.FalseAllow != 0 || a.FalseDeny != 0 || a.MaxWindowRatio > 1 || ideal.Get(admittedTok) != ideal.Get(idealTok) {
		t.Errorf("the sliding log knowing the costs: %+v, %+v; want the ideal", a, ideal)
	}
	if m := runs[key{"sliding-log", chargeMax, 0}].Get(results.MostInWindow); m > 1 {
		t.Errorf("the sliding log reserving the max: %.2f×N in a window", m)
	}
	for _, l := range []string{"fixed-window", "sliding-log", "sliding-counter", "gcra"} {
		low, settled := runs[key{l, chargeEstimate, 100}], runs[key{l, chargeSettle, 100}]
		if !(low.Get(admittedTok) > 1.4*low.Get(idealTok) && settled.Get(admittedTok) < 0.85*low.Get(admittedTok)) {
			t.Errorf("%s: a low estimate admitted %v tokens, settled %v, the ideal %v", l, low.Get(admittedTok), settled.Get(admittedTok), low.Get(idealTok))
		}
	}
	known := runs[key{"gcra", chargeKnown, 0}].Get(admittedTok)
	for _, e := range []int{100, 500} {
		if got := runs[key{"gcra", chargeSettle, e}].Get(admittedTok); got < 0.97*known || got > 1.03*known {
			t.Errorf("gcra settled from an estimate of %d: %v tokens, knowing the costs %v", e, got, known)
		}
	}
	if tabs := report.Tables(f, Modes()); len(tabs) != 1 || tabs[0].Name != "llm" || len(tabs[0].Rows) != 24 {
		t.Errorf("tables: %d", len(tabs))
	}
	picks, _ := report.Picks(f, Modes())
	if len(picks) == 0 || picks[0].Need != "Costs known only after the response (LLM tokens), as if known up front" {
		t.Errorf("picks: %+v", picks)
	}
}

// The llm mode refuses an estimate it cannot use.
func TestLLMConfigRefused(t *testing.T) {
	c := smallLab()
	c.LLM = llmConfig{Estimates: []int{-1}}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("an estimate of -1 was taken")
	}
	c.LLM = llmConfig{Mean: 5000, Max: 4000}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("a mean above the max was taken")
	}
	c.LLM = llmConfig{Limit: limiters.Limit{N: 10, Per: -time.Second}}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("a window of -1s was taken")
	}
}

// The llm chart: a group a limiter, a series a way of charging (with the
// estimate it used), and the three measures of each row; the accuracy
// chart leaves the llm rows out.
func TestLLMFigure(t *testing.T) {
	row := func(limiter, how string, e int, most, wrong float64, admitted int64) results.Row {
		r := results.Row{Limiter: limiter, Mode: llmModeName}
		r.Set(charge, how)
		if e > 0 {
			r.SetInt(estimate, e)
		}
		r.SetAccuracy(results.Accuracy{MaxWindowRatio: most, FalseAllowRate: wrong})
		r.Add(admittedTok, results.UnitTokens, float64(admitted))
		r.Add(idealTok, results.UnitTokens, 200)
		return r
	}
	simulated := results.Row{Limiter: "gcra", Mode: simulatedModeName, Workload: "uniform"}
	simulated.SetAccuracy(results.Accuracy{MaxWindowRatio: 1})
	f := &results.File{Rows: []results.Row{
		row("gcra", chargeEstimate, 100, 3.5, 0.2, 340),
		row("gcra", chargeMax, 0, 1.7, 0.4, 190),
		row("sliding-log", chargeEstimate, 100, 3.4, 0.1, 330),
		simulated,
	}}
	var llm, accuracy report.Figure
	for _, fig := range report.Figures(f, Modes()) {
		switch fig.Name {
		case "llm":
			llm = fig
		case "accuracy":
			accuracy = fig
		}
	}
	if len(llm.Panels) != 3 {
		t.Fatalf("llm chart: %d panels, want 3", len(llm.Panels))
	}
	most, tokens, wrong := llm.Panels[0].Bars, llm.Panels[1].Bars, llm.Panels[2].Bars
	if !slices.Equal(most.Groups, []string{"gcra", "sliding-log"}) || !slices.Equal(most.Series, []string{"estimate only (100)", "max then settle"}) {
		t.Fatalf("groups %v, series %v", most.Groups, most.Series)
	}
	if most.Values[0][1] != 1.7 || most.Values[1][1] != 0 || tokens.Values[0][0] != 170 || math.Abs(wrong.Values[1][0]-10) > 1e-9 {
		t.Errorf("most %v, tokens %v, wrong %v", most.Values, tokens.Values, wrong.Values)
	}
	if len(accuracy.Panels) != 2 || !slices.Equal(accuracy.Panels[0].Bars.Groups, []string{"gcra"}) || !slices.Equal(accuracy.Panels[0].Bars.Series, []string{"uniform"}) {
		t.Errorf("the accuracy chart took the llm rows: %+v", accuracy.Panels)
	}
}
