package harness

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// LLMConfig is how the llm mode runs: Users users of an LLM endpoint
// limited to Limit tokens per W each, over Simulated of simulated time,
// each asking for Load times its limit in actual tokens, a request's
// actual tokens log-normal of mean Mean and shape Spread, at most Max,
// known once its response is done (at TokensPerSecond). The ways of
// charging that use the client's estimate run once per estimate in
// Estimates (by default a fifth of the mean, as a gateway that counts only
// the prompt's tokens would send, and the mean). See workloads.LLM.
type LLMConfig struct {
	Users           int
	Simulated       time.Duration
	Limit           limiters.Limit
	Load            float64
	Mean, Spread    float64
	Max             int
	Estimates       []int
	TokensPerSecond float64
}

func (c LLMConfig) defaults(quick bool) LLMConfig {
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

func (c LLMConfig) validate(seed uint64) error {
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
func (c LLMConfig) params(seed uint64) workloads.LLMParams {
	return workloads.LLMParams{Seed: seed, Users: c.Users, Duration: c.Simulated, Limit: c.Limit, Load: c.Load,
		Mean: c.Mean, Spread: c.Spread, Max: c.Max, TokensPerSecond: c.TokensPerSecond}
}

// The ways the llm mode charges a request whose cost is known only after:
// the estimate alone; the estimate, then settled at the actual cost once
// the response is done; the most a request may cost, settled likewise; and,
// for reference, the actual cost as if it were known up front.
const (
	ChargeEstimate = "estimate only"
	ChargeSettle   = "estimate then settle"
	ChargeMax      = "max then settle"
	ChargeKnown    = "actual up front"
)

// Charges are the llm mode's ways of charging, in the order it runs them.
var Charges = []string{ChargeEstimate, ChargeSettle, ChargeMax, ChargeKnown}

// llmMode runs each subject that can settle (Subject.NewSettler) on the
// llm workload, once per way of charging, in simulated time, and judges
// each against the ideal on the actual costs: the sliding log deciding
// each request at its actual cost, known when it is sent.
type llmMode struct{}

func (llmMode) name() string { return ModeLLM }
func (llmMode) once() bool   { return true }

func (llmMode) steps(c Config, subjects []Subject) int {
	return len(settlers(subjects)) * len(llmRuns(c.LLM))
}

// An llmRun is a way of charging, and the estimate it uses (0: none).
type llmRun struct {
	charge   string
	estimate int
}

// llmRuns are the ways of charging c asks for, each estimate of those
// that use one.
func llmRuns(c LLMConfig) []llmRun {
	var out []llmRun
	for _, charge := range Charges {
		if charge == ChargeEstimate || charge == ChargeSettle {
			for _, e := range c.Estimates {
				out = append(out, llmRun{charge, e})
			}
			continue
		}
		out = append(out, llmRun{charge, 0})
	}
	return out
}

func (llmMode) measure(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Run, error) {
	c := l.c.LLM
	w, err := workloads.LLM(c.params(l.c.Seed))
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if len(w.Arrivals) == 0 {
		var out []results.Run
		for _, s := range subjects {
			if s.NewSettler != nil {
				out = append(out, skipped(s, "llm", ModeLLM, "the llm workload has no requests with these parameters"))
			}
		}
		return out, nil
	}
	// The same requests at their actual costs: what the ideal decides,
	// and what the admitted requests are judged by.
	actual := &workloads.Workload{Name: w.Name, Params: w.Params, Arrivals: make([]workloads.Arrival, len(w.Arrivals))}
	var asked int64
	for i, a := range w.Arrivals {
		a.N = w.After[i].Actual
		actual.Arrivals[i] = a
		asked += int64(a.N)
	}
	ideal, err := Ideal(actual, c.Limit)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	var out []results.Run
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
			r := run(s, "llm", ModeLLM)
			acc := Compare(actual, allowed, ideal, c.Limit)
			r.Accuracy, r.Decisions = &acc, int64(len(allowed))
			r.LLM = &results.LLM{Charge: x.charge, Mean: c.Mean, Spread: c.Spread, Estimate: x.estimate, Max: c.Max,
				Limit: c.Limit.N, Window: results.Seconds(c.Limit.Per.Seconds()), Asked: asked,
				Tokens: tokens(actual, allowed), IdealTokens: tokens(actual, ideal)}
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
func chargeLLM(s Subject, w *workloads.Workload, c LLMConfig, x llmRun) ([]bool, error) {
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
		case ChargeEstimate:
			allowed[i] = decideAt(lim, keys[a.User], at, x.estimate).Allowed
		case ChargeKnown:
			allowed[i] = decideAt(lim, keys[a.User], at, int(after.Actual)).Allowed
		case ChargeSettle, ChargeMax:
			n := x.estimate
			if x.charge == ChargeMax {
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
