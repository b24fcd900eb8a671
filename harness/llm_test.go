package harness

import (
	"context"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
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
	c.Modes = []string{ModeLLM}
	c.Limiters = []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"}
	c.LLM = LLMConfig{Users: 20, Simulated: 20 * time.Minute}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		limiter, charge string
		estimate        int
	}
	runs := map[key]results.Run{}
	for _, r := range f.Runs {
		if r.Mode != ModeLLM || r.LLM == nil || r.Accuracy == nil {
			t.Fatalf("%+v: want only llm runs", r)
		}
		if r.Limiter == "token-bucket" || r.Limiter == "leaky-bucket" {
			t.Errorf("%s ran: it decides as GCRA does", r.Limiter)
		}
		runs[key{r.Limiter, r.LLM.Charge, r.LLM.Estimate}] = r
	}
	if len(runs) != 4*6 {
		t.Fatalf("%d runs, want 4 limiters × 6 ways of charging", len(runs))
	}
	ideal := runs[key{"sliding-log", ChargeKnown, 0}]
	if a := ideal.Accuracy; a.FalseAllow != 0 || a.FalseDeny != 0 || a.MaxWindowRatio > 1 || ideal.LLM.Tokens != ideal.LLM.IdealTokens {
		t.Errorf("the sliding log knowing the costs: %+v, %+v; want the ideal", *a, *ideal.LLM)
	}
	if m := runs[key{"sliding-log", ChargeMax, 0}].Accuracy.MaxWindowRatio; m > 1 {
		t.Errorf("the sliding log reserving the max: %.2f×N in a window", m)
	}
	for _, l := range []string{"fixed-window", "sliding-log", "sliding-counter", "gcra"} {
		low, settled := runs[key{l, ChargeEstimate, 100}].LLM, runs[key{l, ChargeSettle, 100}].LLM
		if !(float64(low.Tokens) > 1.4*float64(low.IdealTokens) && float64(settled.Tokens) < 0.85*float64(low.Tokens)) {
			t.Errorf("%s: a low estimate admitted %d tokens, settled %d, the ideal %d", l, low.Tokens, settled.Tokens, low.IdealTokens)
		}
	}
	known := runs[key{"gcra", ChargeKnown, 0}].LLM.Tokens
	for _, e := range []int{100, 500} {
		if got := runs[key{"gcra", ChargeSettle, e}].LLM.Tokens; float64(got) < 0.97*float64(known) || float64(got) > 1.03*float64(known) {
			t.Errorf("gcra settled from an estimate of %d: %d tokens, knowing the costs %d", e, got, known)
		}
	}
	if tabs := results.Tables(f); len(tabs) != 1 || tabs[0].Name != "llm" || len(tabs[0].Rows) != 24 {
		t.Errorf("tables: %d", len(tabs))
	}
	picks, _ := results.Picks(f)
	if len(picks) == 0 || picks[0].Need != "Costs known only after the response (LLM tokens), as if known up front" {
		t.Errorf("picks: %+v", picks)
	}
}

// The llm mode refuses an estimate it cannot use.
func TestLLMConfigRefused(t *testing.T) {
	c := smallLab()
	c.LLM = LLMConfig{Estimates: []int{-1}}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("an estimate of -1 was taken")
	}
	c.LLM = LLMConfig{Mean: 5000, Max: 4000}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("a mean above the max was taken")
	}
	c.LLM = LLMConfig{Limit: limiters.Limit{N: 10, Per: -time.Second}}
	if err := c.Defaults().Validate(); err == nil {
		t.Error("a window of -1s was taken")
	}
}
