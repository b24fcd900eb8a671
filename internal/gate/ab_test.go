package gate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

func TestSignedRankCDF(t *testing.T) {
	// n = 9, by counting all 512 sign patterns.
	want := []float64{1, 2, 3, 5, 7, 10, 14, 19}
	cdf := signedRankCDF(9)
	for i, w := range want {
		if got := cdf[i] * 512; math.Abs(got-w) > 1e-9 {
			t.Errorf("P(T <= %d) = %v/512, want %v/512", i, got, w)
		}
	}
	if last := cdf[len(cdf)-1]; math.Abs(last-1) > 1e-12 {
		t.Errorf("P(T <= 45) = %v, want 1", last)
	}
	// Symmetric about n(n+1)/4: P(T <= t) = P(T >= 45-t).
	for tt := range 45 {
		if lo, hi := cdf[tt], 1-cdf[44-tt]; math.Abs(lo-hi) > 1e-12 {
			t.Errorf("P(T <= %d) = %v, P(T >= %d) = %v: want them equal", tt, lo, 45-tt, hi)
		}
	}
}

func TestHodgesLehmann(t *testing.T) {
	// Hollander and Wolfe's depression scores, as R's wilcox.test(x, y,
	// paired = TRUE, conf.int = TRUE) gives them: a pseudomedian of 0.46
	// and a 95% interval of 0.010 to 0.786.
	x := []float64{1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30}
	y := []float64{0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29}
	d := make([]float64, len(x))
	for i := range x {
		d[i] = x[i] - y[i]
	}
	est, lo, hi := hodgesLehmann(d, 0.95)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"estimate", est, 0.46}, {"low", lo, 0.010}, {"high", hi, 0.786}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Too few values for 95%: the interval is all of them.
	if _, lo, hi := hodgesLehmann([]float64{1, 2, 3}, 0.95); lo != 1 || hi != 3 {
		t.Errorf("three values: interval %v to %v, want 1 to 3", lo, hi)
	}
}

// abOf returns an A/B run of one cell whose new build is slow times the
// base, every sample off by a factor of about 1 ± noise at random, and
// each round in a spell of the machine up to twice as slow as the others.
func abOf(rounds int, slow, noise float64, seed uint64) *AB {
	rng := rand.New(rand.NewPCG(seed, 1))
	sample := func(ns float64) results.Sample {
		ns *= math.Exp(noise * rng.NormFloat64())
		return results.Sample{ThroughputPerS: 1e9 / ns, P50NS: ns, P90NS: 1.3 * ns}
	}
	c := Cell{Limiter: "gcra", Workload: "uniform"}
	for range rounds {
		spell := 1 + rng.Float64() // the machine's speed this round, shared
		c.Rounds = append(c.Rounds, ABRound{Order: "AB", Base: sample(50 * spell), New: sample(50 * slow * spell)})
	}
	return &AB{Kind: "ab", Schema: ABSchema, Cells: []Cell{c}}
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name  string
		slow  float64
		want  string
		noise float64
	}{
		{"same build", 1, Same, 0.05},
		{"1.5 times slower", 1.5, results.Regressed, 0.05},
		{"1.5 times faster", 1 / 1.5, results.Improved, 0.05},
		{"5% slower, within the threshold", 1.05, Slower, 0.01},
		{"5% faster, within the threshold", 1 / 1.05, Faster, 0.01},
	} {
		t.Run(tt.name, func(t *testing.T) {
			changes, err := Judge(abOf(30, tt.slow, tt.noise, 7), DefaultRule)
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != len(abMetrics) {
				t.Fatalf("%d changes, want one a metric (%d)", len(changes), len(abMetrics))
			}
			for _, c := range changes {
				if c.Verdict != tt.want {
					t.Errorf("%s: %s (%.3f×, %.3f–%.3f), want %s", c.Metric, c.Verdict, c.Ratio, c.Lo, c.Hi, tt.want)
				}
				if !(c.Lo <= c.Ratio && c.Ratio <= c.Hi) {
					t.Errorf("%s: estimate %.3f outside its interval %.3f–%.3f", c.Metric, c.Ratio, c.Lo, c.Hi)
				}
				if c.Rounds != 30 {
					t.Errorf("%s: over %d rounds, want 30", c.Metric, c.Rounds)
				}
			}
		})
	}
}

// TestJudgeFalseAlarms judges many runs of two identical builds on a noisy
// machine: none may regress.
func TestJudgeFalseAlarms(t *testing.T) {
	for seed := range uint64(200) {
		changes, err := Judge(abOf(30, 1, 0.10, seed), DefaultRule)
		if err != nil {
			t.Fatal(err)
		}
		if n := ABRegressions(changes); n > 0 {
			t.Fatalf("seed %d: %d regressions of a build against itself: %+v", seed, n, changes[0])
		}
	}
}

func TestJudgeMissing(t *testing.T) {
	f := abOf(10, 1, 0.01, 1)
	for i := range f.Cells[0].Rounds {
		f.Cells[0].Rounds[i].New = results.Sample{} // nothing measured
	}
	changes, err := Judge(f, DefaultRule)
	if err != nil {
		t.Fatal(err)
	}
	if n := ABRegressions(changes); n != len(abMetrics) {
		t.Errorf("%d regressions, want every metric (%d): a cell not measured cannot pass", n, len(abMetrics))
	}
	var b bytes.Buffer
	if err := WriteJudged(&b, f, DefaultRule, changes, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "missing") || !strings.Contains(b.String(), "REGRESSED: 3 timings") {
		t.Errorf("the table does not say what is missing:\n%s", b.String())
	}
}

func TestRuleValidate(t *testing.T) {
	for _, r := range []Rule{{-0.1, 0.95}, {math.NaN(), 0.95}, {0.1, 1}, {0.1, 0.4}, {0.1, math.NaN()}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v: no error", r)
		}
		if _, err := Judge(abOf(10, 1, 0.01, 1), r); err == nil {
			t.Errorf("Judge with %+v: no error", r)
		}
	}
}

func TestReadAB(t *testing.T) {
	f := abOf(6, 1.2, 0.01, 3)
	var b bytes.Buffer
	if err := WriteAB(&b, f); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAB(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != 1 || len(got.Cells[0].Rounds) != 6 || got.Cells[0].Rounds[5] != f.Cells[0].Rounds[5] {
		t.Errorf("read back %+v, want what was written", got.Cells)
	}
	for _, tt := range []struct {
		name, text string
		is         error
		says       string
	}{
		{"a lab's results", `{"schema": 3, "meta": {}, "rows": []}`, ErrNotAB, "not an A/B file"},
		{"another version", `{"kind": "ab", "schema": 99}`, results.ErrSchema, "version 99"},
		{"an unknown field", fmt.Sprintf(`{"kind": "ab", "schema": %d, "colour": "red"}`, ABSchema), nil, "colour"},
		{"not JSON", `{"kind": "ab",`, nil, "line 1"},
	} {
		_, err := ReadAB(strings.NewReader(tt.text))
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: error %v, want one that says %q", tt.name, err, tt.says)
		}
	}
}

// The mean time of a decision is judged by the samplers' CPU time where
// both samples of a round have it: the new build's wall time made 1.3x
// by waits for a core (a busy host) is no regression when its CPU time
// is the base's; where a base predates CPU time, the wall time is judged.
func TestJudgeCPUTime(t *testing.T) {
	ab := abOf(30, 1, 0.02, 3)
	waited := ab.Cells[0].Rounds
	for i := range waited {
		waited[i].Base.CPUNS = waited[i].Base.P50NS
		waited[i].New.CPUNS = waited[i].New.P50NS
		waited[i].New.ThroughputPerS /= 1.3
	}
	verdict := func() ABChange {
		changes, err := Judge(ab, DefaultRule)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Metric == "time/decision" {
				return c
			}
		}
		t.Fatal("no time/decision")
		return ABChange{}
	}
	if c := verdict(); c.Verdict != Same {
		t.Errorf("CPU time the same, wall time 1.3x: %s (%.3f×), want %s", c.Verdict, c.Ratio, Same)
	}
	for i := range waited {
		waited[i].Base.CPUNS = 0 // a base from before CPU time
	}
	if c := verdict(); c.Verdict != results.Regressed {
		t.Errorf("no CPU time in the base, wall time 1.3x: %s (%.3f×), want %s", c.Verdict, c.Ratio, results.Regressed)
	}
}
