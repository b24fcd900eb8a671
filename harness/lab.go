package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// The modes a lab runs.
const (
	ModeSimulated = "simulated"
	ModeRealTime  = "realtime"
	ModeMemory    = "memory"
)

// Config is a lab run. Zero fields take the defaults of the full run, or
// of the quick one when Quick is set (see Defaults).
type Config struct {
	Seed  uint64
	Quick bool
	// Limit is what every limiter is given: N per W for the window
	// algorithms, a capacity of N refilled over W for the buckets.
	Limit limiters.Window
	// Limiters and Workloads name what to run; empty means all.
	Limiters  []string
	Workloads []string
	// Modes are which of simulated, realtime and memory to run; empty
	// means all.
	Modes []string
	// Users is the population of the uniform and bursty workloads;
	// Attackers that of the boundary attack; ManyUsers that of many-users
	// and of the memory runs.
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
	// OfferedRate requests per second, for LatencyTime.
	LatencyGoroutines int
	OfferedRate       float64
	LatencyTime       time.Duration
	// RealTimeAccuracyScale compresses time when a limiter that takes no
	// explicit time has its accuracy measured in real time.
	RealTimeAccuracyScale float64
}

// Defaults returns c with its zero fields set: the full run's values, or
// the quick run's when c.Quick.
func (c Config) Defaults() Config {
	q := c.Quick
	if c.Limit == (limiters.Window{}) {
		c.Limit = limiters.Window{Limit: 100, Length: time.Second}
	}
	set(&c.Users, pick(q, 500, 100))
	set(&c.Attackers, pick(q, 50, 20))
	set(&c.ManyUsers, pick(q, 1_000_000, 100_000))
	set(&c.ManyUsersRate, 50_000)
	set(&c.Simulated, pick(q, 60*time.Second, 20*time.Second))
	if len(c.Goroutines) == 0 {
		c.Goroutines = pick(q, []int{1, 2, 8, 64}, []int{1, 2, 8})
	}
	set(&c.RealTime, pick(q, 250*time.Millisecond, 100*time.Millisecond))
	// One paced sender: on two cores, two spinning senders leave none for
	// the runtime and the rest of the machine, and their tail latency
	// measures the scheduler (p99 went from 1µs to 1ms).
	set(&c.LatencyGoroutines, 1)
	set(&c.OfferedRate, 200_000)
	set(&c.LatencyTime, pick(q, 500*time.Millisecond, 200*time.Millisecond))
	set(&c.RealTimeAccuracyScale, 0.02)
	if len(c.Modes) == 0 {
		c.Modes = []string{ModeSimulated, ModeRealTime, ModeMemory}
	}
	if len(c.Workloads) == 0 {
		for _, g := range workloads.Generators {
			c.Workloads = append(c.Workloads, g.Name)
		}
	}
	return c
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
	if err := c.Limit.Validate(); err != nil {
		return fmt.Errorf("harness: the limit: %w", err)
	}
	for _, m := range c.Modes {
		if m != ModeSimulated && m != ModeRealTime && m != ModeMemory {
			return fmt.Errorf("harness: unknown mode %q (want simulated, realtime or memory)", m)
		}
	}
	for _, w := range c.Workloads {
		if generator(w) == nil {
			return fmt.Errorf("harness: unknown workload %q (want some of uniform, bursty, boundary-attack, many-users)", w)
		}
	}
	for _, g := range c.Goroutines {
		if g < 1 || g > 4096 {
			return fmt.Errorf("harness: goroutines must be between 1 and 4096, got %d", g)
		}
	}
	if c.Users < 1 || c.Attackers < 1 || c.ManyUsers < 2 || c.Simulated <= 0 || c.RealTime <= 0 || c.LatencyTime <= 0 || c.OfferedRate <= 0 || c.LatencyGoroutines < 1 {
		return fmt.Errorf("harness: users, attackers, many users, durations, the offered rate and latency goroutines must be positive")
	}
	if !(c.RealTimeAccuracyScale > 0 && c.RealTimeAccuracyScale <= 1) {
		return fmt.Errorf("harness: the real-time accuracy scale must be in (0, 1], got %v", c.RealTimeAccuracyScale)
	}
	_, err := SubjectsNamed(c.Limiters)
	return err
}

func generator(name string) func(workloads.Params) (*workloads.Workload, error) {
	for _, g := range workloads.Generators {
		if g.Name == name {
			return g.New
		}
	}
	return nil
}

// Workload returns the workload name as c configures it.
func (c Config) Workload(name string) (*workloads.Workload, error) {
	p := workloads.Params{Seed: c.Seed, Users: c.Users, Limit: c.Limit, Duration: c.Simulated}
	switch name {
	case "boundary-attack":
		p.Users = c.Attackers
	case "many-users":
		p.Users, p.Rate = c.ManyUsers, c.ManyUsersRate
	}
	g := generator(name)
	if g == nil {
		return nil, fmt.Errorf("harness: unknown workload %q", name)
	}
	return g(p)
}

// memoryLimit is the limit of the memory runs: N per hour, so that no key
// is full again (and forgotten) while the population is being added.
func (c Config) memoryLimit() limiters.Window {
	return limiters.Window{Limit: c.Limit.Limit, Length: time.Hour}
}

// Lab runs c and returns its results. Progress lines go to progress, if
// not nil.
func Lab(ctx context.Context, c Config, progress io.Writer) (*results.File, error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	subjects, _ := SubjectsNamed(c.Limiters)
	begin := time.Now()
	f := &results.File{Schema: results.Schema, Meta: meta(c, subjects, begin)}
	has := func(m string) bool { return slices.Contains(c.Modes, m) }

	p := newProgress(progress, c, subjects)
	judged := &results.Judged{Limit: c.Limit.Limit, Window: results.Seconds(c.Limit.Length.Seconds())}
	for _, name := range c.Workloads {
		p.step(fmt.Sprintf("generating %s", name), 1)
		w, err := c.Workload(name)
		if err != nil {
			return nil, err
		}
		var ideal []bool
		if has(ModeSimulated) {
			p.step(fmt.Sprintf("the ideal on %s (%d requests)", name, len(w.Arrivals)), 1)
			if ideal, err = Ideal(w, c.Limit); err != nil {
				return nil, err
			}
		}
		for _, s := range subjects {
			base := results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name}
			if has(ModeSimulated) {
				p.step(fmt.Sprintf("accuracy of %s on %s", s.Name, name), 1)
				r, err := accuracyRun(ctx, c, s, w, ideal)
				if err != nil {
					return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, name, err)
				}
				r.Limiter, r.Library, r.Algorithm, r.Backend, r.Workload, r.Judged = base.Limiter, base.Library, base.Algorithm, base.Backend, base.Workload, judged
				f.Runs = append(f.Runs, r)
			}
			if has(ModeRealTime) {
				runs := append([]RealTime{}, realTimeRuns(c)...)
				for _, rt := range runs {
					p.step(fmt.Sprintf("%s on %s in real time, %s", s.Name, name, rt.describe()), 2)
					res, err := realTimeRun(ctx, s, w, c.Limit, rt)
					if err != nil {
						return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, name, err)
					}
					r := base
					r.Mode, r.Goroutines, r.OfferedRate, r.Decisions = ModeRealTime, rt.Goroutines, rt.Rate, res.Decisions
					r.LatencyNS = res.Latency.latency()
					r.ThroughputPerS = res.Throughput()
					wait := float64(res.LockWait) / float64(max(res.Decisions, 1))
					r.LockWaitNSPerOp = &wait
					if rt.Rate > 0 {
						achieved := res.Throughput() / rt.Rate
						r.AchievedFraction = &achieved
					}
					f.Runs = append(f.Runs, r)
				}
			}
		}
	}
	if has(ModeMemory) {
		for _, s := range subjects {
			p.step(fmt.Sprintf("memory of %s at %d users", s.Name, c.ManyUsers), 4)
			m, err := MeasureMemory(ctx, s, c.memoryLimit(), c.ManyUsers)
			if err != nil {
				return nil, fmt.Errorf("harness: memory of %s: %w", s.Name, err)
			}
			f.Runs = append(f.Runs, results.Run{
				Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend,
				Workload: "many-users", Mode: ModeMemory, Users: c.ManyUsers, Decisions: int64(c.ManyUsers),
				BytesPerUser: m.BytesPerUser,
			})
		}
	}
	p.finish()
	f.Meta.Elapsed = results.Seconds(time.Since(begin).Seconds())
	return f, ctx.Err()
}

// realTimeRuns are the real-time runs of one limiter on one workload: the
// unpaced sweep, then the paced run for latency.
func realTimeRuns(c Config) []RealTime {
	var out []RealTime
	for _, g := range c.Goroutines {
		out = append(out, RealTime{Goroutines: g, Duration: c.RealTime})
	}
	return append(out, RealTime{Goroutines: c.LatencyGoroutines, Rate: c.OfferedRate, Duration: c.LatencyTime})
}

func realTimeRun(ctx context.Context, s Subject, w *workloads.Workload, limit limiters.Window, rt RealTime) (RealTimeResult, error) {
	l, stop, err := s.New(limit)
	if err != nil {
		return RealTimeResult{}, err
	}
	defer stop()
	return RunRealTime(ctx, w, l, rt)
}

// accuracyRun measures s against the ideal on w: in simulated time if s
// takes explicit times, else by a time-scaled replay in real time.
func accuracyRun(ctx context.Context, c Config, s Subject, w *workloads.Workload, ideal []bool) (results.Run, error) {
	if s.NewAt != nil {
		d, stop, err := s.NewAt(c.Limit)
		if err != nil {
			return results.Run{}, err
		}
		defer stop()
		start := time.Now()
		allowed := Simulate(w, d)
		elapsed := time.Since(start)
		acc := Compare(w, allowed, ideal, c.Limit)
		return results.Run{Mode: ModeSimulated, Decisions: int64(len(allowed)), Accuracy: &acc,
			ThroughputPerS: float64(len(allowed)) / elapsed.Seconds()}, nil
	}
	scaled := limiters.Window{Limit: c.Limit.Limit, Length: time.Duration(float64(c.Limit.Length) * c.RealTimeAccuracyScale)}
	l, stop, err := s.New(scaled)
	if err != nil {
		return results.Run{}, err
	}
	defer stop()
	allowed, sent, err := RealTimeAccuracy(ctx, w, l, c.RealTimeAccuracyScale)
	if err != nil {
		return results.Run{}, err
	}
	sentIdeal, err := Ideal(sent, scaled)
	if err != nil {
		return results.Run{}, err
	}
	acc := Compare(sent, allowed, sentIdeal, scaled)
	return results.Run{Mode: ModeRealTime, Decisions: int64(len(allowed)), Accuracy: &acc}, nil
}

func meta(c Config, subjects []Subject, begin time.Time) results.Meta {
	names := make([]string, len(subjects))
	for i, s := range subjects {
		names[i] = s.Name
	}
	return results.Meta{
		Seed:       c.Seed,
		GoVersion:  runtime.Version(),
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start:      begin.UTC().Truncate(time.Second),
		Params: results.Params{
			Quick: c.Quick, Limit: c.Limit.Limit, Window: results.Seconds(c.Limit.Length.Seconds()),
			Limiters: names, Workloads: c.Workloads, Modes: c.Modes,
			Users: c.Users, Attackers: c.Attackers, ManyUsers: c.ManyUsers, Simulated: results.Seconds(c.Simulated.Seconds()),
			Goroutines: c.Goroutines, RealTime: results.Seconds(c.RealTime.Seconds()),
			LatencyGoroutines: c.LatencyGoroutines, OfferedRate: c.OfferedRate,
			RealTimeAccuracyScale: c.RealTimeAccuracyScale,
		},
	}
}

// cpuModel is the CPU's model name, from /proc/cpuinfo where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
