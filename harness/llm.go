package harness

import (
	"cmp"
	"container/heap"
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// llmConfig is how the llm mode runs: Users users of an LLM endpoint
// limited to Limit tokens per W each, over Simulated of simulated time,
// each asking for Load times its limit in actual tokens, a request's
// actual tokens log-normal of mean Mean and shape Spread, at most Max,
// known once its response is done (at TokensPerSecond). The ways of
// charging that use the client's estimate run once per estimate in
// Estimates (by default a fifth of the mean, as a gateway that counts only
// the prompt's tokens would send, and the mean). See workloads.LLM.
type llmConfig struct {
	Users           int
	Simulated       time.Duration
	Limit           limiters.Limit
	Load            float64
	Mean, Spread    float64
	Max             int
	Estimates       []int
	TokensPerSecond float64
}

func (c llmConfig) defaults(quick bool) llmConfig {
	set(&c.Users, pick(quick, 100, 30))
	set(&c.Simulated, pick(quick, 30*time.Minute, 10*time.Minute))
	if c.Limit == (limiters.Limit{}) {
		c.Limit = limiters.Limit{N: 10_000, Per: time.Minute}
	}
	set(&c.Load, 1.5)
	set(&c.Mean, 500)
	set(&c.Spread, 1)
	set(&c.Max, 4000)
	set(&c.TokensPerSecond, 100)
	if len(c.Estimates) == 0 {
		c.Estimates = []int{max(int(c.Mean/5+0.5), 1), int(c.Mean + 0.5)}
	}
	return c
}

// flags declares the llm mode's settings on fs.
func (c *llmConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Users, "llm-users", c.Users, "users of the llm workload (default 100, quick 30)")
	fs.DurationVar(&c.Simulated, "llm-simulated", c.Simulated, "simulated time the llm workload spans (default 30m, quick 10m)")
	fs.Var(&c.Limit, "llm-limit", "each user's limit in tokens (default 10000/min)")
	fs.Float64Var(&c.Load, "llm-load", c.Load, "what the users ask for, as a multiple of their limit (default 1.5)")
	fs.Float64Var(&c.Mean, "llm-mean", c.Mean, "the mean tokens a call costs (default 500)")
	fs.Float64Var(&c.Spread, "llm-spread", c.Spread, "the spread of a call's cost, the sigma of its log-normal (default 1)")
	fs.IntVar(&c.Max, "llm-max", c.Max, "the most tokens a call costs (default 4000)")
	fs.Var((*counts)(&c.Estimates), "llm-estimates", "comma-separated estimates a call is decided at before its cost is known, in tokens (default a fifth of the mean, and the mean)")
	fs.Float64Var(&c.TokensPerSecond, "llm-tokens-per-second", c.TokensPerSecond, "how fast a call's tokens come, so how long it takes (default 100)")
}

func (c llmConfig) validate(seed uint64) error {
	for _, e := range c.Estimates {
		p := c.params(seed)
		p.Estimate = e
		if err := p.Validate(); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
		if e < 1 {
			return fmt.Errorf("harness: llm: an estimate of %d tokens: want 1 or more", e)
		}
	}
	return nil
}

// params are c as the workload's parameters.
func (c llmConfig) params(seed uint64) workloads.LLMParams {
	return workloads.LLMParams{Seed: seed, Users: c.Users, Duration: c.Simulated, Limit: c.Limit, Load: c.Load,
		Mean: c.Mean, Spread: c.Spread, Max: c.Max, TokensPerSecond: c.TokensPerSecond}
}

// The ways the llm mode charges a request whose cost is known only after:
// the estimate alone; the estimate, then settled at the actual cost once
// the response is done; the most a request may cost, settled likewise; and,
// for reference, the actual cost as if it were known up front.
const (
	chargeEstimate = "estimate only"
	chargeSettle   = "estimate then settle"
	chargeMax      = "max then settle"
	chargeKnown    = "actual up front"
)

// charges are the llm mode's ways of charging, in the order it runs them.
var charges = []string{chargeEstimate, chargeSettle, chargeMax, chargeKnown}

// llmMode runs each subject that can settle (Subject.NewSettler) on the
// llm workload, once per way of charging, in simulated time, and judges
// each against the ideal on the actual costs: the sliding log deciding
// each request at its actual cost, known when it is sent.
const llmModeName = "llm"

var llmMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:  llmModeName,
			About: "costs known only after the response (LLM tokens): each way of charging judged on the actual tokens, in simulated time",
			Order: 70,
			Gates: accuracyGates(results.CheckExact),
		},
		Heading: "Costs known only after the response",
		Tables: []report.TableSpec{{
			Name:  "llm",
			Title: "Costs known after the response: an LLM endpoint limited in tokens, per way of charging, in simulated time",
			Note: "Each request's actual tokens are known only once its response is done; its client sends an estimate. Estimate only: charged the estimate, never corrected; " +
				"estimate then settle: the estimate reserved, then settled at the actual tokens when the response is done (refund or debt); max then settle: the most a request may cost reserved, then settled; " +
				"actual up front: the algorithm charged the actual tokens when the request is sent, for reference. " +
				"Judged on the actual tokens against the ideal, the sliding log charged each request its actual tokens when sent: false allows and denies, " +
				"tokens: the actual tokens admitted against the ideal's, and most in any W: the most actual tokens one key had admitted in any interval of the window's length, over the limit. " +
				"The token and leaky buckets decide as GCRA does, settles included, and are left out.",
			Header: []string{"limiter", "charged", "estimate", "requests", "admitted", "ideal", "false allows", "false denies", "tokens (of ideal)", "most in any W"},
			Left:   3,
			Keep:   func(r results.Row) bool { return r.Has(results.MostInWindow) },
			Cells:  llmCells,
			More: func(rows []results.Row) string {
				r := rows[0]
				return fmt.Sprintf(" Each user limited to %s tokens per %s and asking for more; actual tokens log-normal, mean %s, spread %s (of their logarithm), at most %s; "+
					"the estimate is what the client sent: the mean, or less (a gateway that counts only the prompt's tokens).",
					results.Count(int64(r.SettingInt(tokenLimit))), r.Setting(tokenWindow), r.Setting(tokenMean), r.Setting(tokenSpread), results.Count(int64(r.SettingInt(tokenMax))))
			},
		}},
		Picks:  llmPicks,
		Charts: func(_ *results.File, rows []results.Row) []report.Figure { return []report.Figure{llmFigure(rows)} },
	},
	once: true,
	steps: func(c Config, subjects []Subject) int {
		return len(settlers(subjects)) * len(llmRuns(c.LLM))
	},
	measure: measureLLM,
	flags:   func(c *Config, fs *flag.FlagSet) { c.LLM.flags(fs) },
}

// The settings and metrics of an llm row: how it charged and with what
// estimate, the workload's parameters, and the actual tokens of every
// request (asked), of those admitted, and of those the ideal admitted.
const (
	charge      = "charge"
	estimate    = "estimate"
	tokenLimit  = "limit"
	tokenWindow = "per"
	tokenMean   = "mean"
	tokenSpread = "spread"
	tokenMax    = "max"
	asked       = "asked_tokens"
	admittedTok = "tokens"
	idealTok    = "ideal_tokens"
)

func llmCells(r results.Row) []string {
	a, _ := r.AccuracyOf()
	share := ""
	if ideal := r.Get(idealTok); ideal > 0 {
		share = fmt.Sprintf("%s (%s%%)", results.Count(r.Count(admittedTok)), report.Fixed(100*r.Get(admittedTok)/ideal, 0))
	}
	e := ""
	if n := r.SettingInt(estimate); n > 0 {
		e = results.Count(int64(n))
	}
	return []string{r.Limiter, r.Setting(charge), e, results.Count(r.Count(results.Decisions)), results.Count(a.Admitted), results.Count(a.Ideal),
		report.CountRate(a.FalseAllow, a.FalseAllowRate), report.CountRate(a.FalseDeny, a.FalseDenyRate), share, report.Fixed(a.MaxWindowRatio, 2)}
}

// llmFigure is, per limiter (group) and way of charging (series), of
// the llm rows: the most actual tokens one key had in any window, over the
// limit; the actual tokens admitted, in % of the ideal's; and the share of
// decisions unlike the ideal's, in %.
func llmFigure(rows []results.Row) report.Figure {
	fig := report.Figure{Name: "llm", Title: "Costs known after the response: an LLM endpoint limited in tokens",
		Caption: "Each bar is a limiter charging requests whose tokens are known only once the response is done, one way or another: the estimate only; the estimate, then settled at the actual tokens; " +
			"the most a request may cost, then settled; or the actual tokens as if known up front (for reference); an estimate is what the client sent, in brackets. " +
			"Left: the most actual tokens one key had admitted in any window, over the limit (the dashed line); middle: the actual tokens admitted, against the ideal's (the dashed line); " +
			"right: the share of decisions unlike the ideal's. The ideal is the sliding log charging each request its actual tokens when sent.",
		Cols: 3, Width: 12, LegendWidth: 2}
	rows = where(rows, func(r results.Row) bool { return r.Has(results.MostInWindow) })
	series := func(r results.Row) string {
		if e := r.SettingInt(estimate); e > 0 {
			return fmt.Sprintf("%s (%d)", r.Setting(charge), e)
		}
		return r.Setting(charge)
	}
	var groups, ways []string
	for _, r := range rows {
		if !slices.Contains(groups, r.Limiter) {
			groups = append(groups, r.Limiter)
		}
		if !slices.Contains(ways, series(r)) {
			ways = append(ways, series(r))
		}
	}
	if len(groups) == 0 {
		return fig
	}
	var bars [3]report.Bars // most, tokens, wrong
	for i := range bars {
		bars[i] = report.Bars{Groups: groups, Series: ways, Values: make([][]float64, len(groups))}
		for g := range groups {
			bars[i].Values[g] = make([]float64, len(ways))
		}
	}
	for _, r := range rows {
		g, s := slices.Index(groups, r.Limiter), slices.Index(ways, series(r))
		bars[0].Values[g][s] = r.Get(results.MostInWindow)
		if ideal := r.Get(idealTok); ideal > 0 {
			bars[1].Values[g][s] = 100 * r.Get(admittedTok) / ideal
		}
		bars[2].Values[g][s] = 100 * r.Wrong()
	}
	y := report.Axis{Min: -0.5, Max: float64(len(groups)) - 0.5} // one height for every panel's rows
	fig.Panels = []report.Panel{
		{Title: "most actual tokens in any W", Bars: &bars[0], Y: y, Marks: []report.Mark{{OnX: true, At: 1}},
			X: report.Axis{Label: "× the limit", Min: 0, Max: 1.1 * max(maxOf(bars[0].Values), 1)}},
		{Title: "tokens admitted", Bars: &bars[1], Y: y, Marks: []report.Mark{{OnX: true, At: 100}},
			X: report.Axis{Label: "% of the ideal's", Ticks: report.TicksPercent, Min: 0, Max: 1.1 * max(maxOf(bars[1].Values), 100)}},
		{Title: "decisions unlike the ideal's", Bars: &bars[2], Y: y,
			X: report.Axis{Label: "% of requests", Ticks: report.TicksPercent, Min: 0, Max: 1.1 * max(maxOf(bars[2].Values), 1)}},
	}
	return fig
}

// An llmRun is a way of charging, and the estimate it uses (0: none).
type llmRun struct {
	charge   string
	estimate int
}

// llmRuns are the ways of charging c asks for, each estimate of those
// that use one.
func llmRuns(c llmConfig) []llmRun {
	var out []llmRun
	for _, charge := range charges {
		if charge == chargeEstimate || charge == chargeSettle {
			for _, e := range c.Estimates {
				out = append(out, llmRun{charge, e})
			}
			continue
		}
		out = append(out, llmRun{charge, 0})
	}
	return out
}

func measureLLM(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	c := l.c.LLM
	w, err := workloads.LLM(c.params(l.c.Seed))
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if len(w.Arrivals) == 0 {
		var out []results.Row
		for _, s := range subjects {
			if s.NewSettler != nil {
				out = append(out, skipped(s, "llm", llmModeName, "the llm workload has no requests with these parameters"))
			}
		}
		return out, nil
	}
	// The same requests at their actual costs: what the ideal decides,
	// and what the admitted requests are judged by.
	actual := &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: make([]workloads.Arrival, len(w.Arrivals))}
	var sum int64
	for i, a := range w.Arrivals {
		a.N = w.After[i].Actual
		actual.Arrivals[i] = a
		sum += int64(a.N)
	}
	ideal, err := idealOf(actual, c.Limit)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	var out []results.Row
	for _, s := range settlers(subjects) {
		for _, x := range llmRuns(c) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			l.p.step(fmt.Sprintf("%s on llm, charged %q", s.Name, x.charge), 1)
			allowed, err := chargeLLM(s, w, c, x)
			if err != nil {
				return nil, fmt.Errorf("harness: %s on llm: %w", s.Name, err)
			}
			r := row(s, "llm", llmModeName)
			r.Set(charge, x.charge)
			if x.estimate > 0 {
				r.SetInt(estimate, x.estimate)
			}
			r.SetInt(tokenLimit, c.Limit.N)
			r.Set(tokenWindow, c.Limit.Per.String())
			r.SetFloat(tokenMean, c.Mean)
			r.SetFloat(tokenSpread, c.Spread)
			r.SetInt(tokenMax, c.Max)
			r.Add(results.Decisions, results.UnitCount, float64(len(allowed)))
			r.SetAccuracy(judge(actual, allowed, ideal, c.Limit))
			r.Add(asked, results.UnitTokens, float64(sum))
			r.Add(admittedTok, results.UnitTokens, float64(tokens(actual, allowed)))
			r.Add(idealTok, results.UnitTokens, float64(tokens(actual, ideal)))
			out = append(out, r)
		}
	}
	return out, nil
}

// settlers are the subjects that can settle, less the token and leaky
// buckets when GCRA is among them: with the same C and R the three decide
// alike, settles included (the limiters' tests check it), so their rows
// would repeat GCRA's.
func settlers(subjects []Subject) []Subject {
	gcra := slices.ContainsFunc(subjects, func(s Subject) bool { return s.NewSettler != nil && s.Algorithm == limiters.GCRA })
	return slices.DeleteFunc(slices.Clone(subjects), func(s Subject) bool {
		return s.NewSettler == nil || gcra && (s.Algorithm == limiters.TokenBucket || s.Algorithm == limiters.LeakyBucket)
	})
}

// tokens sums the actual costs of the requests allowed.
func tokens(actual *workloads.Workload, allowed []bool) int64 {
	var n int64
	for i, ok := range allowed {
		if ok {
			n += int64(actual.Arrivals[i].N)
		}
	}
	return n
}

// chargeLLM decides w's requests with a limiter of s charging as charge
// says, settling each admitted request when its response is done, in time
// order with the requests, and returns which were admitted.
func chargeLLM(s Subject, w *workloads.Workload, c llmConfig, x llmRun) ([]bool, error) {
	lim, stop, err := s.NewSettler(c.Limit)
	if err != nil {
		return nil, err
	}
	defer stop()
	keys := keysOf(w)
	allowed := make([]bool, len(w.Arrivals))
	var due settles
	for i, a := range w.Arrivals {
		for len(due) > 0 && due[0].at <= a.T {
			p := heap.Pop(&due).(settle)
			if _, err := lim.Settle(context.Background(), limiters.Settlement{Reservation: p.r, Actual: p.actual, At: time.Unix(0, int64(p.at))}); err != nil {
				return nil, err
			}
		}
		at, after := time.Unix(0, int64(a.T)), w.After[i]
		switch x.charge {
		case chargeEstimate:
			allowed[i] = decideAt(lim, keys[a.User], at, x.estimate).Allowed
		case chargeKnown:
			allowed[i] = decideAt(lim, keys[a.User], at, int(after.Actual)).Allowed
		case chargeSettle, chargeMax:
			n := x.estimate
			if x.charge == chargeMax {
				n = c.Max
			}
			r, err := lim.Reserve(context.Background(), limiters.Request{Key: keys[a.User], N: n, At: at})
			if err != nil {
				return nil, err
			}
			if allowed[i] = r.Allowed(); r.Allowed() {
				heap.Push(&due, settle{at: a.T + after.Took, r: r, actual: int(after.Actual)})
			}
		default:
			return nil, fmt.Errorf("no way of charging called %q", x.charge)
		}
	}
	return allowed, nil
}

// A settle is a reservation to settle at a time, at an actual cost.
type settle struct {
	at     time.Duration
	r      limiters.Reservation
	actual int
}

// settles are the settles due, earliest first (container/heap).
type settles []settle

func (s settles) Len() int           { return len(s) }
func (s settles) Less(i, j int) bool { return s[i].at < s[j].at }
func (s settles) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *settles) Push(x any)        { *s = append(*s, x.(settle)) }
func (s *settles) Pop() any {
	old := *s
	x := old[len(old)-1]
	*s = old[:len(old)-1]
	return x
}

// llmPicks are the picks for requests whose cost is known only after the
// response (an LLM's tokens), of the ways of charging that can be
// shipped: the one that admits closest to the tokens its own algorithm
// admits knowing every cost up front, whatever the client's estimate (the
// worst over the estimates run); and the one that kept every key within
// 1.05 times the limit in any window with its decisions closest to the
// ideal's.
func llmPicks(_ *results.File, rows []results.Row) []report.Pick {
	type way struct{ limiter, charge string }
	var runs []results.Row
	reference := map[string]results.Row{} // by limiter
	for _, r := range rows {
		if !r.Has(results.MostInWindow) {
			continue
		}
		if r.Setting(charge) == chargeKnown {
			reference[r.Limiter] = r
		} else {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	says := func(r results.Row) string {
		how := fmt.Sprintf("%q", r.Setting(charge))
		if e := r.SettingInt(estimate); e > 0 {
			how = fmt.Sprintf("%s with an estimate of %d", how, e)
		}
		return fmt.Sprintf("charged %s, %s of its decisions differed from the ideal's, it admitted %s of the ideal's tokens, and the most a key had in one window was %.2f×N",
			how, report.Percentage(r.Wrong()), report.Percentage(r.Get(admittedTok)/max(r.Get(idealTok), 1)), r.Get(results.MostInWindow))
	}
	var picks []report.Pick
	// The worst, over the estimates, of how far each way of charging
	// strays from its algorithm knowing the costs, in tokens admitted.
	worst := map[way]results.Row{}
	off := func(r results.Row) float64 {
		return math.Abs(r.Get(admittedTok)/max(reference[r.Limiter].Get(admittedTok), 1) - 1)
	}
	var ways []way
	for _, r := range runs {
		if _, ok := reference[r.Limiter]; !ok {
			continue
		}
		k := way{r.Limiter, r.Setting(charge)}
		if w, seen := worst[k]; !seen || off(r) > off(w) {
			if !seen {
				ways = append(ways, k)
			}
			worst[k] = r
		}
	}
	if len(ways) > 0 {
		b := worst[slices.MinFunc(ways, func(x, y way) int { return cmp.Compare(off(worst[x]), off(worst[y])) })]
		ref := reference[b.Limiter]
		picks = append(picks, report.Pick{Need: "Costs known only after the response (LLM tokens), as if known up front", Limiter: b.Limiter + " (" + b.Setting(charge) + ")",
			Why: fmt.Sprintf("Whatever the client's estimate, it admitted within %s of the tokens %s admits knowing every cost when the request is sent (%.2f×N at most in one window, against %.2f×N); at its worst, %s.",
				report.Percentage(off(b)), b.Limiter, b.Get(results.MostInWindow), ref.Get(results.MostInWindow), says(b))})
	}
	within := slices.DeleteFunc(slices.Clone(runs), func(r results.Row) bool { return r.Get(results.MostInWindow) > 1.05 })
	if len(within) > 0 {
		b := slices.MinFunc(within, func(x, y results.Row) int { return cmp.Compare(x.Wrong(), y.Wrong()) })
		w := says(b)
		picks = append(picks, report.Pick{Need: "Costs known only after the response, never past the limit", Limiter: b.Limiter + " (" + b.Setting(charge) + ")",
			Why: strings.ToUpper(w[:1]) + w[1:] + "."})
	}
	return picks
}
