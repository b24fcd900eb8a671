package workloads

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Arrival is one request of a workload: at T after the start, user User
// asks for N units.
type Arrival struct {
	T    time.Duration
	User int32
	N    int32
}

// Workload is an arrival sequence, in time order, over a population of
// users.
type Workload struct {
	// Name says which generator made it: uniform, bursty,
	// boundary-attack, anchored-attack, many-users, or trace.
	Name string
	// Params are the parameters it was made from (for a trace, only
	// Users and Duration mean anything).
	Params Params
	// Arrivals are the requests, in time order (ties by user for a
	// generated workload, in file order for a trace).
	Arrivals []Arrival
	// After is, for a workload whose costs are known only once each
	// response is done (LLM, or a trace with an actual cost), each
	// arrival's actual cost and when it is known, in Arrivals' order; an
	// arrival's N is then the estimate its client sent. Nil for the
	// others, whose N is the cost.
	After []After
	names []string
}

// After is what a request turned out to cost, and how long after it was
// sent that was known (its response done).
type After struct {
	Actual int32
	Took   time.Duration
}

// Key returns user u's key: "user-" and 11 digits (16 bytes) for a
// generated workload, the trace's key for a trace.
func (w *Workload) Key(u int32) string {
	if w.names == nil {
		w.names = make([]string, w.Params.Users)
		for i := range w.names {
			w.names[i] = UserKey(i)
		}
	}
	return w.names[u]
}

// UserKey is the key of user i of a generated workload.
func UserKey(i int) string { return fmt.Sprintf("user-%011d", i) }

// Params are what a workload is a pure function of. The zero value of each
// field is documented; Limit and Users must be set.
type Params struct {
	// Seed seeds the generator: the same Params give the same arrivals.
	Seed uint64
	// Users is the population.
	Users int
	// Duration is how long the arrivals span; zero means 10 windows of
	// the limit.
	Duration time.Duration
	// Limit is the limit under test, N per W (for a bucket, its capacity C
	// per C/R). Loads are relative to it, and the boundary attack aims at
	// its window edges.
	Limit limiters.Limit
	// Load is the offered load relative to the limit: each user asks, on
	// average, for Load times N per W. Zero means 1.2 (a little over).
	// The boundary attack ignores it.
	Load float64
	// Rate, if set, is the total arrivals per second of the uniform and
	// many-users workloads, instead of Users times Load times N per W: a
	// million users need not mean a million times the traffic.
	Rate float64
	// Costs is the mix of request costs; nil means every request costs 1.
	Costs []Cost
	// Burst is, for the bursty workload, how many times the limit's rate
	// a user asks at while on; zero means 5.
	Burst float64
	// On and Off are, for the bursty workload, how long a user's bursts
	// and silences last; zero means W and 4W.
	On, Off time.Duration
	// Zipf is, for many-users, the exponent s of the Zipf law users are
	// drawn from (user i with weight 1/(i+1)^s); zero means 1.1.
	Zipf float64
	// Edge is, for the boundary attack, how close to each window edge
	// the attack's two bursts fall, on each side; zero means W/100.
	Edge time.Duration
}

// Cost is a request cost and how often it occurs, relative to the others.
type Cost struct {
	N      int
	Weight float64
}

func (p Params) withDefaults() (Params, error) {
	if err := p.Limit.Validate(limiters.SlidingLog); err != nil {
		return p, fmt.Errorf("workloads: %w", err)
	}
	if p.Users < 1 || p.Users > math.MaxInt32 {
		return p, fmt.Errorf("workloads: users must be between 1 and %d, got %d", math.MaxInt32, p.Users)
	}
	w := p.Limit.Per
	if p.Duration == 0 {
		p.Duration = 10 * w
	}
	if p.Duration < 0 {
		return p, fmt.Errorf("workloads: duration must be positive, got %v", p.Duration)
	}
	if p.Load == 0 {
		p.Load = 1.2
	}
	if p.Burst == 0 {
		p.Burst = 5
	}
	if p.On == 0 {
		p.On = w
	}
	if p.Off == 0 {
		p.Off = 4 * w
	}
	if p.Zipf == 0 {
		p.Zipf = 1.1
	}
	if p.Edge == 0 {
		p.Edge = max(w/100, 1)
	}
	if p.Rate < 0 || math.IsInf(p.Rate, 0) || math.IsNaN(p.Rate) {
		return p, fmt.Errorf("workloads: rate must be positive and finite, got %v", p.Rate)
	}
	for _, v := range []float64{p.Load, p.Burst, p.Zipf} {
		if !(v > 0) || math.IsInf(v, 0) {
			return p, fmt.Errorf("workloads: load, burst and zipf must be positive and finite, got %v", v)
		}
	}
	if p.Zipf <= 1 {
		return p, fmt.Errorf("workloads: the zipf exponent must be above 1, got %v", p.Zipf)
	}
	if p.On < 0 || p.Off < 0 || p.Edge < 0 || 2*p.Edge > w {
		return p, fmt.Errorf("workloads: on, off and edge must be positive, and edge at most W/2")
	}
	for _, c := range p.Costs {
		if c.N < 1 || !(c.Weight > 0) {
			return p, fmt.Errorf("workloads: costs must be at least 1 with a positive weight, got %d with %v", c.N, c.Weight)
		}
	}
	return p, nil
}

// rng returns the generator's random source for workload name: the seed
// and the name together, so that two workloads with one seed differ.
func (p Params) rng(name string) *rand.Rand {
	h := uint64(14695981039346656037)
	for i := range len(name) {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(p.Seed, h))
}

// cost draws a request cost from the mix.
type coster struct {
	costs []Cost
	total float64
}

func newCoster(costs []Cost) coster {
	c := coster{costs: costs}
	for _, x := range costs {
		c.total += x.Weight
	}
	return c
}

func (c coster) draw(rng *rand.Rand) int32 {
	if len(c.costs) == 0 {
		return 1
	}
	x := rng.Float64() * c.total
	for _, k := range c.costs {
		if x < k.Weight {
			return int32(k.N)
		}
		x -= k.Weight
	}
	return int32(c.costs[len(c.costs)-1].N)
}

// perUser is the mean rate of one user asking for load times the limit,
// in requests per nanosecond, allowing for the mean cost.
func (p Params) perUser(load float64) float64 {
	mean := 1.0
	if c := newCoster(p.Costs); len(c.costs) > 0 {
		mean = 0
		for _, k := range c.costs {
			mean += float64(k.N) * k.Weight / c.total
		}
	}
	return load * float64(p.Limit.N) / float64(p.Limit.Per) / mean
}

// total is the total arrival rate, per nanosecond.
func (p Params) total() float64 {
	if p.Rate > 0 {
		return p.Rate / 1e9
	}
	return p.perUser(p.Load) * float64(p.Users)
}

func sortArrivals(a []Arrival) {
	slices.SortFunc(a, func(x, y Arrival) int {
		return cmp.Or(cmp.Compare(x.T, y.T), cmp.Compare(x.User, y.User))
	})
}

// Uniform is steady traffic: a Poisson process at Users times the per-user
// rate, each arrival from a user drawn uniformly.
func Uniform(p Params) (*Workload, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	rng, costs := p.rng("uniform"), newCoster(p.Costs)
	rate := p.total()
	var out []Arrival
	for t := rng.ExpFloat64() / rate; t < float64(p.Duration); t += rng.ExpFloat64() / rate {
		out = append(out, Arrival{T: time.Duration(t), User: int32(rng.IntN(p.Users)), N: costs.draw(rng)})
	}
	sortArrivals(out) // ties of equal times, by user
	return &Workload{Name: "uniform", Params: p, Arrivals: out}, nil
}

// Bursty is on/off traffic: each user, from a random phase, alternates
// bursts of length On, asking at Burst times the limit's rate, and
// silences of length Off.
func Bursty(p Params) (*Workload, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	rng, costs := p.rng("bursty"), newCoster(p.Costs)
	rate := p.perUser(p.Burst)
	cycle := p.On + p.Off
	var out []Arrival
	for u := range p.Users {
		start := -time.Duration(rng.Int64N(int64(cycle)))
		for on := start; on < p.Duration; on += cycle {
			for t := float64(max(on, 0)) + rng.ExpFloat64()/rate; t < float64(min(on+p.On, p.Duration)); t += rng.ExpFloat64() / rate {
				out = append(out, Arrival{T: time.Duration(t), User: int32(u), N: costs.draw(rng)})
			}
		}
	}
	sortArrivals(out)
	return &Workload{Name: "bursty", Params: p, Arrivals: out}, nil
}

// BoundaryAttack is every user spending a full quota just before and just
// after every window edge kW of the limit: N unit requests evenly spread
// over [kW - Edge, kW), and N more over [kW, kW + Edge). A fixed window
// admits all 2N; an exact limit admits N.
func BoundaryAttack(p Params) (*Workload, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	n, w := p.Limit.N, p.Limit.Per
	step := p.Edge / time.Duration(n)
	var out []Arrival
	for edge := w; edge+p.Edge <= p.Duration; edge += w {
		for i := range n {
			for u := range p.Users {
				out = append(out,
					Arrival{T: edge - p.Edge + time.Duration(i)*step, User: int32(u), N: 1},
					Arrival{T: edge + time.Duration(i)*step, User: int32(u), N: 1})
			}
		}
	}
	sortArrivals(out)
	return &Workload{Name: "boundary-attack", Params: p, Arrivals: out}, nil
}

// AnchoredAttack is the boundary attack aimed at each key's own windows
// rather than the epoch's, for limiters whose windows start at a key's
// first request (go-limiter's, ulule/limiter's): each user sends one
// request at an anchor a of its own, drawn at random in [0, W), then
// spends a full quota just before and just after every other edge a + kW
// from there (k = 2, 4, ...): N unit requests evenly spread over
// [a + kW - Edge, a + kW - Edge/2), and N more over [a + kW, a + kW + Edge).
// Every other edge, so that each side of an attacked edge is a window with
// its quota whole: a window anchored at a admits all 2N; one anchored at
// the epoch sees both bursts in one window unless a falls within Edge of
// it. The first burst ends half an Edge short of the edge, so that a
// sender running a little late (a replay in real time) does not carry it
// across.
func AnchoredAttack(p Params) (*Workload, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	rng := p.rng("anchored-attack")
	n, w := p.Limit.N, p.Limit.Per
	step := p.Edge / time.Duration(n)
	var out []Arrival
	for u := range p.Users {
		a := time.Duration(rng.Int64N(int64(w)))
		out = append(out, Arrival{T: a, User: int32(u), N: 1})
		for edge := a + 2*w; edge+p.Edge <= p.Duration; edge += 2 * w {
			for i := range n {
				out = append(out,
					Arrival{T: edge - p.Edge + time.Duration(i)*step/2, User: int32(u), N: 1},
					Arrival{T: edge + time.Duration(i)*step, User: int32(u), N: 1})
			}
		}
	}
	sortArrivals(out)
	return &Workload{Name: "anchored-attack", Params: p, Arrivals: out}, nil
}

// ManyUsers is a large population whose activity follows a Zipf law: a
// Poisson process at Users times the per-user rate, each arrival from user
// i with probability proportional to 1/(i+1)^Zipf. A few users are far over
// the limit; most are seen once or never.
func ManyUsers(p Params) (*Workload, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	rng, costs := p.rng("many-users"), newCoster(p.Costs)
	z := rand.NewZipf(rng, p.Zipf, 1, uint64(p.Users-1))
	rate := p.total()
	var out []Arrival
	for t := rng.ExpFloat64() / rate; t < float64(p.Duration); t += rng.ExpFloat64() / rate {
		out = append(out, Arrival{T: time.Duration(t), User: int32(z.Uint64()), N: costs.draw(rng)})
	}
	sortArrivals(out)
	return &Workload{Name: "many-users", Params: p, Arrivals: out}, nil
}

// Generators are the generated workloads by name, in the order the lab
// runs them.
var Generators = []Generator{
	{Name: "uniform", New: Uniform},
	{Name: "bursty", New: Bursty},
	{Name: "boundary-attack", New: BoundaryAttack},
	{Name: "anchored-attack", New: AnchoredAttack, AccuracyOnly: true},
	{Name: "many-users", New: ManyUsers},
}

// Generator makes a workload from its parameters.
type Generator struct {
	Name string
	New  func(Params) (*Workload, error)
	// AccuracyOnly says the workload is an attack on accuracy: what it
	// costs to decide is another workload's (the anchored attack's
	// requests are the boundary attack's, moved), so the lab measures
	// only its accuracy.
	AccuracyOnly bool
}

// FromTrace reads a whole trace into a workload: each distinct key is a
// user, numbered in order of first appearance. If every request says what
// it really cost, the workload's After holds it; else After is nil and the
// cost is N. It returns the reader's
// *TraceError for a malformed line.
func FromTrace(tr *TraceReader) (*Workload, error) {
	w := &Workload{Name: "trace"}
	users := map[string]int32{}
	for {
		r, err := tr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		u, ok := users[r.Key]
		if !ok {
			u = int32(len(w.names))
			users[r.Key] = u
			w.names = append(w.names, r.Key)
		}
		w.Arrivals = append(w.Arrivals, Arrival{T: r.T, User: u, N: int32(r.N)})
		if r.After != nil && len(w.After) == len(w.Arrivals)-1 {
			w.After = append(w.After, *r.After)
		}
	}
	if len(w.After) != len(w.Arrivals) {
		w.After = nil // some request did not say
	}
	w.Params.Users = len(w.names)
	if n := len(w.Arrivals); n > 0 {
		w.Params.Duration = w.Arrivals[n-1].T + 1
	}
	return w, nil
}

// LLMParams shape an LLM workload: Users users each asking, over
// Duration, for Load times their limit of Limit tokens per W in actual
// tokens, a request's actual tokens drawn from a log-normal law of mean
// Mean and shape Spread (the standard deviation of their logarithm), at
// most Max; each request's client sends the estimate Estimate (the mean
// by default), and its response takes its tokens at TokensPerSecond.
type LLMParams struct {
	Seed            uint64
	Users           int
	Duration        time.Duration
	Limit           limiters.Limit
	Load            float64
	Mean, Spread    float64
	Max, Estimate   int
	TokensPerSecond float64
}

// Validate reports whether LLM can make a workload of p.
func (p LLMParams) Validate() error {
	switch {
	case p.Limit.Validate(limiters.SlidingLog) != nil:
		return fmt.Errorf("workloads: llm: %w", p.Limit.Validate(limiters.SlidingLog))
	case p.Users < 1 || p.Users > math.MaxInt32:
		return fmt.Errorf("workloads: llm: users must be between 1 and %d, got %d", math.MaxInt32, p.Users)
	case !(p.Mean >= 1) || !(p.Spread >= 0 && p.Spread <= 5) || p.Max < int(p.Mean) || p.Max > math.MaxInt32 || p.Estimate < 0 || p.Estimate > p.Max:
		return fmt.Errorf("workloads: llm: want a mean of at least 1 token, a spread from 0 to 5, a max of at least the mean, and an estimate from 0 (the mean) to the max; got %v, %v, %d, %d",
			p.Mean, p.Spread, p.Max, p.Estimate)
	case !(p.Load > 0) || !(p.TokensPerSecond > 0) || p.Duration <= 0:
		return fmt.Errorf("workloads: llm: want a positive load, speed and duration, got %v, %v tokens/s, %v", p.Load, p.TokensPerSecond, p.Duration)
	}
	return nil
}

// LLM is the traffic of an LLM endpoint limited in tokens: each user a
// Poisson process of requests whose costs are heavy-tailed and known only
// once the response is done (After), the estimate the client sent being
// the arrival's N.
func LLM(p LLMParams) (*Workload, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Estimate == 0 {
		p.Estimate = int(math.Round(p.Mean))
	}
	rng := Params{Seed: p.Seed}.rng("llm")
	// E[exp(mu + spread*Z)] = exp(mu + spread^2/2) = Mean.
	mu := math.Log(p.Mean) - p.Spread*p.Spread/2
	rate := p.Load * float64(p.Limit.N) / float64(p.Limit.Per) / p.Mean * float64(p.Users) // requests a nanosecond
	w := &Workload{Name: "llm", Params: Params{Seed: p.Seed, Users: p.Users, Duration: p.Duration, Limit: p.Limit, Load: p.Load}}
	for t := rng.ExpFloat64() / rate; t < float64(p.Duration); t += rng.ExpFloat64() / rate {
		actual := min(max(int32(math.Round(math.Exp(mu+p.Spread*rng.NormFloat64()))), 1), int32(p.Max))
		w.Arrivals = append(w.Arrivals, Arrival{T: time.Duration(t), User: int32(rng.IntN(p.Users)), N: int32(p.Estimate)})
		w.After = append(w.After, After{Actual: actual, Took: time.Duration(float64(actual) / p.TokensPerSecond * 1e9)})
	}
	return w, nil
}
