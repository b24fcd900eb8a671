package harness

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// Config is a lab run. Zero fields take the defaults of the full run, or
// of the quick one when Quick is set (see Defaults).
type Config struct {
	Seed  uint64
	Quick bool
	// Limit is what every limiter is given: N per W for the window
	// algorithms, a capacity of N refilled over W for the buckets.
	Limit limiters.Limit
	// Limiters and Workloads name what to run; empty means all.
	Limiters  []string
	Workloads []string
	// Modes are which of simulated, realtime, http, fleet, timing,
	// memory, llm and outage to run; empty means all, but for the quick lab,
	// which leaves out the outage runs (seconds of real time each).
	Modes []string
	// Users is the population of the uniform and bursty workloads;
	// Attackers that of the boundary and anchored attacks; ManyUsers that
	// of many-users and of the memory runs.
	Users, Attackers, ManyUsers int
	// ManyUsersRate is the total arrivals per second of many-users.
	ManyUsersRate float64
	// Simulated is how much time each workload spans in simulated time.
	Simulated time.Duration
	// Goroutines are the sender counts the unpaced real-time runs sweep;
	// RealTime is how long each lasts.
	Goroutines []int
	RealTime   time.Duration
	// LatencyGoroutines senders send the paced real-time runs at
	// OfferedRate requests per second, for LatencyTime, LatencyRuns times
	// over: the latency reported is the median of the runs' percentiles.
	LatencyGoroutines int
	OfferedRate       float64
	LatencyTime       time.Duration
	LatencyRuns       int
	// TimingRounds is how many rounds the timing runs take, each limiter
	// and the harness floor deciding for TimingSample in turn in each.
	TimingRounds int
	TimingSample time.Duration
	// RealTimeAccuracyScale compresses time when a limiter that takes no
	// explicit time has its accuracy measured in real time: the most it
	// compresses; a workload too dense for one sender to keep up with at
	// that pace is compressed less.
	RealTimeAccuracyScale float64
	// RealTimeAccuracySpan is how much of each workload such a replay
	// sends: its arrivals in the first RealTimeAccuracySpan of simulated
	// time; zero sends all of it. The quick lab replays 8s: a boundary
	// attack is too dense to compress much, and its replay was the quick
	// lab's longest step.
	RealTimeAccuracySpan time.Duration
	// Trace, if not nil, is a recorded workload run beside the generated
	// ones, as workload "trace".
	Trace *workloads.Workload
	// Extra are subjects run after the named ones: a configuration's
	// tiers (TiersSubject), or a limiter of your own (NewSubject).
	Extra []Subject
	// Redis is the server of the subjects kept in Redis, and how the lab
	// runs them (redis.go).
	Redis redisConfig
	// HTTP is how the http mode attacks ratelab serve (http.go).
	HTTP httpConfig
	// Fleet is how the fleet mode runs its fleets (fleet.go).
	Fleet fleetConfig
	// Outage is how the outage mode takes Redis away (outage.go).
	Outage outageConfig
	// LLM is the llm mode's workload (llm.go).
	LLM llmConfig
}

// maxRequests is the most requests a workload may have: a guard against
// parameters that would take the lab hours and gigabytes.
const maxRequests = 50_000_000

// Defaults returns c with its zero fields set: the full run's values, or
// the quick run's when c.Quick.
func (c Config) Defaults() Config {
	q := c.Quick
	if c.Limit == (limiters.Limit{}) {
		c.Limit = limiters.Limit{N: 100, Per: time.Second}
	}
	set(&c.Users, pick(q, 500, 100))
	set(&c.Attackers, pick(q, 50, 20))
	set(&c.ManyUsers, pick(q, 1_000_000, 100_000))
	set(&c.ManyUsersRate, 50_000)
	set(&c.Simulated, pick(q, 60*time.Second, 20*time.Second))
	if len(c.Goroutines) == 0 {
		c.Goroutines = pick(q, []int{1, 2, 8, 64}, []int{1, 2, 8})
	}
	set(&c.RealTime, pick(q, 250*time.Millisecond, 25*time.Millisecond))
	// One paced sender: on two cores, two spinning senders leave none for
	// the runtime and the rest of the machine, and their tail latency
	// measures the scheduler (p99 went from 1µs to 1ms).
	set(&c.LatencyGoroutines, 1)
	set(&c.OfferedRate, 200_000)
	set(&c.LatencyTime, pick(q, 150*time.Millisecond, 25*time.Millisecond))
	set(&c.LatencyRuns, 3)
	set(&c.RealTimeAccuracyScale, 0.02)
	set(&c.RealTimeAccuracySpan, pick(q, 0, 8*time.Second))
	set(&c.TimingRounds, pick(q, 20, 5))
	set(&c.TimingSample, 10*time.Millisecond)
	c.Redis = c.Redis.defaults(c)
	c.HTTP = c.HTTP.defaults(q)
	c.Fleet = c.Fleet.defaults(q)
	c.Outage = c.Outage.defaults(q)
	c.LLM = c.LLM.defaults(q)
	if len(c.Modes) == 0 {
		c.Modes = modeNames()
		if q {
			c.Modes = nil
			for _, m := range modes {
				if !m.slow {
					c.Modes = append(c.Modes, m.Name)
				}
			}
		}
	}
	if len(c.Workloads) == 0 {
		for _, g := range workloads.Generators {
			c.Workloads = append(c.Workloads, g.Name)
		}
	}
	return c
}

// flags declares the lab's own settings on fs: what runs, the limit, and
// the workloads' populations and span.
func (c *Config) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Quick, "quick", c.Quick, "all but the outage runs, each shorter (100,000 users on many-users, not a million): a first look, and the gate's")
	fs.Var(&c.Limit, "limit", "the limit every limiter is given, N/PERIOD (default 100/s): N per window for the window algorithms, a burst of N refilled over the period for the buckets")
	fs.Var((*names)(&c.Limiters), "limiters", "comma-separated limiters to run (default all): fixed-window, sliding-log, sliding-counter, token-bucket, leaky-bucket, gcra, x/time/rate, go-limiter, throttled, and on Redis \"gcra (redis)\" and so on, and redis_rate")
	fs.Var((*names)(&c.Workloads), "workloads", "comma-separated workloads (default all): uniform, bursty, boundary-attack, anchored-attack, many-users")
	fs.Var((*names)(&c.Modes), "modes", "comma-separated modes (default all; quick leaves out outage): "+strings.Join(modeNames(), ", "))
	fs.IntVar(&c.Users, "users", c.Users, "users of the uniform and bursty workloads (default 500, quick 100)")
	fs.IntVar(&c.Attackers, "attackers", c.Attackers, "users of the boundary and anchored attacks (default 50, quick 20)")
	fs.IntVar(&c.ManyUsers, "many-users", c.ManyUsers, "users of many-users and of the memory runs (default 1,000,000, quick 100,000)")
	fs.Float64Var(&c.ManyUsersRate, "many-users-rate", c.ManyUsersRate, "arrivals per second of many-users, all users together (default 50000)")
	fs.DurationVar(&c.Simulated, "simulated", c.Simulated, "simulated time each workload spans (default 1m, quick 20s)")
}

// pick returns full, or quick when q.
func pick[T any](q bool, full, quick T) T {
	if q {
		return quick
	}
	return full
}

// set sets *v to def if it is zero.
func set[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports whether c can run.
func (c Config) Validate() error {
	if err := c.Limit.Validate(limiters.SlidingLog); err != nil { // N per W: a window's limit
		return fmt.Errorf("harness: the limit: %w", err)
	}
	for _, m := range c.Modes {
		if !slices.ContainsFunc(modes, func(x mode) bool { return x.Name == m }) {
			return fmt.Errorf("harness: unknown mode %q (want some of %s)", m, listed(modeNames()))
		}
	}
	var names []string
	for _, g := range workloads.Generators {
		names = append(names, g.Name)
	}
	for _, w := range c.Workloads {
		if generator(w) == nil {
			return fmt.Errorf("harness: unknown workload %q (want some of %s)", w, listed(names))
		}
	}
	for _, g := range c.Goroutines {
		if g < 1 || g > 4096 {
			return fmt.Errorf("harness: goroutines must be between 1 and 4096, got %d", g)
		}
	}
	if c.Users < 1 || c.Attackers < 1 || c.ManyUsers < 2 || c.Simulated <= 0 || c.RealTime <= 0 || c.LatencyTime <= 0 {
		return fmt.Errorf("harness: users, attackers, many users and durations must be positive")
	}
	if c.Simulated < 2*c.Limit.Per {
		return fmt.Errorf("harness: the simulated span (%v) must cover at least two windows of the limit (%v)", c.Simulated, c.Limit.Per)
	}
	if err := (realTimeRun{Goroutines: c.LatencyGoroutines, Rate: c.OfferedRate, Duration: c.LatencyTime}).Validate(); err != nil {
		return err
	}
	if c.OfferedRate == 0 {
		return fmt.Errorf("harness: the offered rate must be positive")
	}
	if c.LatencyRuns < 1 || c.LatencyRuns > 100 {
		return fmt.Errorf("harness: the paced runs are repeated 1 to 100 times, got %d", c.LatencyRuns)
	}
	for _, name := range c.Workloads {
		if n := c.expected(name); n > maxRequests {
			return fmt.Errorf("harness: workload %s would have about %.2g requests, more than the %d the lab takes; lower the users or the simulated span, or widen the window", name, n, maxRequests)
		}
	}
	if c.TimingRounds < 1 || c.TimingRounds > 1000 || c.TimingSample <= 0 || c.TimingSample > 10*time.Second {
		return fmt.Errorf("harness: timing takes 1 to 1000 rounds of samples up to 10s long, got %d of %v", c.TimingRounds, c.TimingSample)
	}
	if c.RealTimeAccuracySpan < 0 || c.RealTimeAccuracySpan > 0 && c.RealTimeAccuracySpan < 2*c.Limit.Per {
		return fmt.Errorf("harness: the real-time accuracy span must be zero (all of it) or at least two windows, got %v", c.RealTimeAccuracySpan)
	}
	if !(c.RealTimeAccuracyScale > 0 && c.RealTimeAccuracyScale <= 1) {
		return fmt.Errorf("harness: the real-time accuracy scale must be in (0, 1], got %v", c.RealTimeAccuracyScale)
	}
	if err := c.validateSubjects(); err != nil {
		return err
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	if err := c.Fleet.validate(); err != nil {
		return err
	}
	if err := c.Outage.validate(); err != nil {
		return err
	}
	if err := c.LLM.validate(c.Seed); err != nil {
		return err
	}
	return c.Redis.validate(c)
}

// validateSubjects checks the limiters named and the extra subjects: each
// known, named once (the servers' names too), and making a limiter.
func (c Config) validateSubjects() error {
	named, err := subjectsNamed(c.Limiters)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, n := range serverNames() {
		seen[n] = true
	}
	for _, s := range append(named, c.Extra...) {
		switch {
		case seen[s.Name]:
			return fmt.Errorf("harness: two subjects are named %q", s.Name)
		case s.New == nil && s.NewAt == nil:
			return fmt.Errorf("harness: subject %q makes no limiter (New and NewAt are both nil)", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// generator returns the generator of workload name, nil for none.
func generator(name string) *workloads.Generator {
	for i, g := range workloads.Generators {
		if g.Name == name {
			return &workloads.Generators[i]
		}
	}
	return nil
}

// expected estimates how many requests workload name will have.
func (c Config) expected(name string) float64 {
	perUser := float64(c.Limit.N) / c.Limit.Per.Seconds() * c.Simulated.Seconds()
	switch name {
	case "uniform":
		return float64(c.Users) * 1.2 * perUser
	case "bursty": // five times the limit, one window in five
		return float64(c.Users) * perUser
	case "boundary-attack": // two quotas a window
		return float64(c.Attackers) * 2 * perUser
	case "anchored-attack": // two quotas every other window
		return float64(c.Attackers) * perUser
	case "many-users":
		return c.ManyUsersRate * c.Simulated.Seconds()
	}
	return 0
}

// Workload returns the workload name as c configures it.
func (c Config) Workload(name string) (*workloads.Workload, error) {
	if name == "trace" && c.Trace != nil {
		return c.Trace, nil
	}
	p := workloads.Params{Seed: c.Seed, Users: c.Users, Limit: c.Limit, Duration: c.Simulated}
	switch name {
	case "boundary-attack", "anchored-attack":
		p.Users = c.Attackers
	case "many-users":
		p.Users, p.Rate = c.ManyUsers, c.ManyUsersRate
	}
	g := generator(name)
	if g == nil {
		return nil, fmt.Errorf("harness: unknown workload %q", name)
	}
	return g.New(p)
}

// memoryLimit is the limit of the memory runs: N per hour, so that no key
// is full again (and forgotten) while the population is being added.
func (c Config) memoryLimit() limiters.Limit {
	return limiters.Limit{N: c.Limit.N, Per: time.Hour}
}

// listed lists names for a message: "a, b or c".
func listed(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := names[0]
	for _, n := range names[1 : len(names)-1] {
		out += ", " + n
	}
	return out + " or " + names[len(names)-1]
}
