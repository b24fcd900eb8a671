package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// The modes a lab runs.
const (
	ModeSimulated = "simulated"
	ModeRealTime  = "realtime"
	ModeTiming    = "timing"
	ModeMemory    = "memory"
	ModeHTTP      = "http"
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
	// Modes are which of simulated, realtime, timing and memory to run; empty
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
	// TimingRounds is how many rounds the timing runs take, each limiter
	// and the harness floor deciding for TimingSample in turn in each.
	TimingRounds int
	TimingSample time.Duration
	// RealTimeAccuracyScale compresses time when a limiter that takes no
	// explicit time has its accuracy measured in real time: the most it
	// compresses; a workload too dense for one sender to keep up with at
	// that pace is compressed less.
	RealTimeAccuracyScale float64
	// Trace, if not nil, is a recorded workload run beside the generated
	// ones, as workload "trace".
	Trace *workloads.Workload
	// Extra are subjects run after the named ones: a configuration's
	// tiers (TiersSubject).
	Extra []Subject
	// RedisURL is the Redis server (redis://host:port/db) of the subjects
	// kept in Redis, ratelab's six algorithms and go-redis/redis_rate; empty
	// leaves them out. A server that does not answer a PING within a second
	// is no error: their runs are skipped, saying why. Their keys are under
	// a prefix of the run's own, removed when done; nothing is flushed.
	RedisURL string
	// Each decision of theirs is a round trip to the server, thousands a
	// second where a limiter in memory makes millions, so they run on less
	// (Defaults): their simulated runs decide the first RedisUsers users
	// (attackers, on the boundary attack) of each workload over its first
	// RedisSimulated; their unpaced real-time runs last RedisRealTime, their
	// paced ones RedisLatencyTime at RedisOfferedRate; their memory runs
	// give the server RedisKeys keys.
	RedisUsers       int
	RedisSimulated   time.Duration
	RedisRealTime    time.Duration
	RedisLatencyTime time.Duration
	RedisOfferedRate float64
	RedisKeys        int
	// The HTTP runs: ratelab's algorithms in memory behind the server of
	// ratelab serve, on loopback, attacked by vegeta at HTTPRate requests
	// a second for HTTPTime each.
	HTTPRate float64
	HTTPTime time.Duration
}

// MaxRequests is the most requests a workload may have: a guard against
// parameters that would take the lab hours and gigabytes.
const MaxRequests = 50_000_000

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
	set(&c.TimingRounds, pick(q, 30, 20))
	set(&c.TimingSample, 10*time.Millisecond)
	// Redis makes about 15-25k decisions a second over loopback with many
	// senders (its scripts take 10-20µs each of its one thread), 5-10k
	// with one, and fills about 20k keys a second in pipelines: these keep
	// the Redis rows to about a minute of the full lab and 20s of the
	// quick one.
	set(&c.RedisUsers, pick(q, 10, 6))
	set(&c.RedisSimulated, pick(q, 10*time.Second, 4*time.Second))
	c.RedisSimulated = min(max(c.RedisSimulated, 2*c.Limit.Length), c.Simulated)
	set(&c.RedisRealTime, pick(q, 100*time.Millisecond, 50*time.Millisecond))
	set(&c.RedisLatencyTime, pick(q, 400*time.Millisecond, 150*time.Millisecond))
	set(&c.RedisOfferedRate, 1000)
	set(&c.RedisKeys, pick(q, 50_000, 10_000))
	set(&c.HTTPRate, 10_000)
	set(&c.HTTPTime, pick(q, time.Second, 300*time.Millisecond))
	if len(c.Modes) == 0 {
		c.Modes = []string{ModeSimulated, ModeRealTime, ModeTiming, ModeMemory, ModeHTTP}
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
		if m != ModeSimulated && m != ModeRealTime && m != ModeTiming && m != ModeMemory && m != ModeHTTP {
			return fmt.Errorf("harness: unknown mode %q (want simulated, realtime, timing, memory or http)", m)
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
	if c.Users < 1 || c.Attackers < 1 || c.ManyUsers < 2 || c.Simulated <= 0 || c.RealTime <= 0 || c.LatencyTime <= 0 {
		return fmt.Errorf("harness: users, attackers, many users and durations must be positive")
	}
	if c.Simulated < 2*c.Limit.Length {
		return fmt.Errorf("harness: the simulated span (%v) must cover at least two windows of the limit (%v)", c.Simulated, c.Limit.Length)
	}
	if err := (RealTime{Goroutines: c.LatencyGoroutines, Rate: c.OfferedRate, Duration: c.LatencyTime}).Validate(); err != nil {
		return err
	}
	if c.OfferedRate == 0 {
		return fmt.Errorf("harness: the offered rate must be positive")
	}
	for _, name := range c.Workloads {
		if n := c.expected(name); n > MaxRequests {
			return fmt.Errorf("harness: workload %s would have about %.2g requests, more than the %d the lab takes; lower the users or the simulated span, or widen the window", name, n, MaxRequests)
		}
	}
	if c.TimingRounds < 1 || c.TimingRounds > 1000 || c.TimingSample <= 0 || c.TimingSample > 10*time.Second {
		return fmt.Errorf("harness: timing takes 1 to 1000 rounds of samples up to 10s long, got %d of %v", c.TimingRounds, c.TimingSample)
	}
	if !(c.RealTimeAccuracyScale > 0 && c.RealTimeAccuracyScale <= 1) {
		return fmt.Errorf("harness: the real-time accuracy scale must be in (0, 1], got %v", c.RealTimeAccuracyScale)
	}
	if _, err := SubjectsNamed(c.Limiters); err != nil {
		return err
	}
	if c.RedisURL == "" {
		for _, n := range c.Limiters {
			if slices.Contains(RedisNames(), n) {
				return fmt.Errorf("harness: %s is kept in Redis, and the lab has no Redis server to run it on", n)
			}
		}
		return nil
	}
	if _, err := redis.ParseURL(c.RedisURL); err != nil {
		return fmt.Errorf("harness: the Redis URL: %w", err)
	}
	if c.RedisUsers < 1 || c.RedisKeys < 1 || c.RedisSimulated < 2*c.Limit.Length || c.RedisRealTime <= 0 {
		return fmt.Errorf("harness: Redis: users and keys must be positive, and the simulated span (%v) at least two windows", c.RedisSimulated)
	}
	return (RealTime{Goroutines: c.LatencyGoroutines, Rate: c.RedisOfferedRate, Duration: c.RedisLatencyTime}).Validate()
}

func generator(name string) func(workloads.Params) (*workloads.Workload, error) {
	for _, g := range workloads.Generators {
		if g.Name == name {
			return g.New
		}
	}
	return nil
}

// expected estimates how many requests workload name will have.
func (c Config) expected(name string) float64 {
	perUser := float64(c.Limit.Limit) / c.Limit.Length.Seconds() * c.Simulated.Seconds()
	switch name {
	case "uniform":
		return float64(c.Users) * 1.2 * perUser
	case "bursty": // five times the limit, one window in five
		return float64(c.Users) * perUser
	case "boundary-attack":
		return float64(c.Attackers) * 2 * float64(c.Limit.Limit) * c.Simulated.Seconds() / c.Limit.Length.Seconds()
	case "many-users":
		return c.ManyUsersRate * c.Simulated.Seconds()
	}
	return 0
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
	if name == "trace" && c.Trace != nil {
		return c.Trace, nil
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
func Lab(ctx context.Context, c Config, progress io.Writer) (_ *results.File, err error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	subjects, _ := SubjectsNamed(c.Limiters)
	subjects = append(subjects, c.Extra...)
	local := len(subjects) // subjects[:local] decide in the process
	rl, redisSkip, err := c.openRedis(ctx)
	if err != nil {
		return nil, err
	}
	f := &results.File{Schema: results.Schema}
	var unreached []Subject // kept in Redis, which did not answer: redisSkip says so
	if rl != nil {
		defer func() {
			if cerr := rl.close(ctx); err == nil {
				err = cerr
			}
		}()
		subjects = append(subjects, rl.subjects()...)
	} else if redisSkip != "" {
		unreached = (&redisLab{}).subjects() // for their names only
	}
	for _, ss := range []*[]Subject{&subjects, &unreached} {
		*ss = slices.DeleteFunc(*ss, func(s Subject) bool { return s.Backend == BackendRedis && !redisNamed(c.Limiters, s.Name) })
	}
	names := c.Workloads
	if c.Trace != nil {
		names = append(slices.Clone(names), "trace")
	}
	begin := time.Now()
	f.Meta = meta(c, subjects, begin)
	if rl != nil {
		f.Meta.Params.Redis = &results.RedisParams{Addr: rl.addr, Prefix: rl.prefix, Users: c.RedisUsers, Simulated: results.Seconds(c.RedisSimulated.Seconds()),
			RealTime: results.Seconds(c.RedisRealTime.Seconds()), LatencyTime: results.Seconds(c.RedisLatencyTime.Seconds()),
			OfferedRate: c.RedisOfferedRate, Keys: c.RedisKeys}
	}
	has := func(m string) bool { return slices.Contains(c.Modes, m) }
	var simDecisions int64
	var simTime time.Duration
	// redisSkipped is the run of s skipped when Redis failed earlier, if
	// it did.
	redisSkipped := func(s Subject, base results.Run) (results.Run, bool) {
		if s.Backend != BackendRedis || rl == nil {
			return base, false
		}
		base.SkippedBecause = rl.failed()
		return base, base.SkippedBecause != ""
	}

	p := newProgress(progress, c, subjects, len(names))
	for _, name := range names {
		p.step(fmt.Sprintf("generating %s", name), 1)
		w, err := c.Workload(name)
		if err != nil {
			return nil, err
		}
		limit := c.Limit
		judged := &results.Judged{Limit: limit.Limit, Window: results.Seconds(limit.Length.Seconds())}
		for _, s := range unreached {
			f.Runs = append(f.Runs, results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name, SkippedBecause: redisSkip})
		}
		if len(w.Arrivals) == 0 {
			for _, s := range subjects {
				f.Runs = append(f.Runs, results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend,
					Workload: name, SkippedBecause: "the workload has no requests with these parameters"})
			}
			continue
		}
		var ideal []bool
		if has(ModeSimulated) {
			p.step(fmt.Sprintf("the ideal on %s (%d requests)", name, len(w.Arrivals)), 1)
			if ideal, err = Ideal(w, limit); err != nil {
				return nil, err
			}
		}
		for _, s := range subjects {
			base := results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name}
			if !has(ModeSimulated) {
				break
			}
			if r, skip := redisSkipped(s, base); skip {
				f.Runs = append(f.Runs, r)
				continue
			}
			p.step(fmt.Sprintf("accuracy of %s on %s", s.Name, name), 1)
			var r results.Run
			var elapsed time.Duration
			switch {
			case s.OwnLimits != "":
				r.SkippedBecause = "its limits are its own (" + s.OwnLimits + "), not the lab's N per W: replay a trace through it (ratelab replay --config) to see its decisions"
			case s.Backend == BackendRedis:
				r, err = rl.accuracy(c, s, w)
			default:
				r, elapsed, err = accuracyRun(ctx, c, s, w, ideal)
			}
			if err != nil {
				return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, name, err)
			}
			if r.Accuracy != nil {
				r.Judged = judged
			}
			r.Limiter, r.Library, r.Algorithm, r.Backend, r.Workload = base.Limiter, base.Library, base.Algorithm, base.Backend, base.Workload
			if r.Mode == ModeSimulated && s.Backend != BackendRedis {
				simDecisions += r.Decisions
				simTime += elapsed
			}
			f.Runs = append(f.Runs, r)
		}
		if has(ModeRealTime) {
			for _, s := range append(slices.Clone(subjects), Floor()) {
				base := results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name}
				runs := realTimeRuns(c)
				if s.Backend == BackendRedis {
					runs = c.redisRealTimeRuns()
				}
				for _, rt := range runs {
					if r, skip := redisSkipped(s, base); skip {
						f.Runs = append(f.Runs, r)
						break
					}
					p.step(fmt.Sprintf("%s on %s in real time, %s", s.Name, name, rt.describe()), 2)
					runLimit := limit
					if rt.Rate > 0 {
						runLimit = pacedLimit(limit, w, rt.Rate)
					}
					res, err := realTimeRun(ctx, s, w, runLimit, rt)
					if err != nil {
						return nil, fmt.Errorf("harness: %s on %s: %w", s.Name, name, err)
					}
					r := realTimeResult(base, rt, res)
					if s.Backend == BackendRedis {
						r.Note = c.redisRealTimeNote(rt)
					}
					if skipped, skip := redisSkipped(s, base); skip {
						r = skipped // Redis failed during the run: its numbers are not Redis's
					}
					f.Runs = append(f.Runs, r)
				}
			}
		}
		if has(ModeHTTP) {
			for _, s := range subjects {
				if s.Library != "ratelab" || s.Backend != "memory" || s.OwnLimits != "" {
					continue // the server runs ratelab's algorithms, in memory
				}
				p.step(fmt.Sprintf("%s on %s over HTTP, %s/s", s.Name, name, strconv.FormatFloat(c.HTTPRate, 'f', -1, 64)), 2)
				h := HTTPAttack{Algorithm: s.Algorithm, Limit: pacedLimit(limit, w, c.HTTPRate), Workload: w, Rate: c.HTTPRate, Duration: c.HTTPTime}
				res, err := h.Run(ctx)
				if err != nil {
					return nil, fmt.Errorf("harness: %s on %s over HTTP: %w", s.Name, name, err)
				}
				f.Runs = append(f.Runs, httpResult(results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name}, h, res))
			}
		}
		if has(ModeTiming) {
			if local > 0 {
				p.step(fmt.Sprintf("timing on %s, %d rounds", name, c.TimingRounds), 3)
				runs, err := timingRuns(ctx, subjects[:local], w, limit, c.TimingRounds, c.TimingSample)
				if err != nil {
					return nil, fmt.Errorf("harness: timing on %s: %w", name, err)
				}
				f.Runs = append(f.Runs, runs...)
			}
			for _, s := range subjects[local:] {
				f.Runs = append(f.Runs, results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: name,
					SkippedBecause: "not timed: the timing runs measure a decision in the process against the harness floor, for the regression gate; " +
						"a decision on Redis is a round trip, measured by the real-time runs"})
			}
		}
	}
	if has(ModeMemory) {
		for _, s := range subjects {
			base := results.Run{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: "many-users"}
			if r, skip := redisSkipped(s, base); skip {
				f.Runs = append(f.Runs, r)
				continue
			}
			users, weigh := c.ManyUsers, func() (MemoryResult, error) { return MeasureMemory(ctx, s, c.memoryLimit(), c.ManyUsers) }
			if s.Weigh != nil {
				users, weigh = c.RedisKeys, func() (MemoryResult, error) { return s.Weigh(ctx, c.memoryLimit(), c.RedisKeys) }
			}
			p.step(fmt.Sprintf("memory of %s at %d users", s.Name, users), 4)
			m, err := weigh()
			if err != nil {
				return nil, fmt.Errorf("harness: memory of %s: %w", s.Name, err)
			}
			r := base
			r.Mode, r.Users, r.Decisions, r.BytesPerUser = ModeMemory, users, int64(users), m.BytesPerUser
			if s.Weigh != nil {
				r.Note = fmt.Sprintf("Rows kept in Redis: the growth of the server's used_memory (INFO memory) per key it gained, after one decision for each of %d keys (sent in pipelines), "+
					"each key's name (the run's prefix, the user, and for ratelab the algorithm and limit: 50 to 80 bytes) included; the server's memory, not the process's. "+
					"Packed, each user is a field (its name and state) of one of %d hashes, and the growth is per field.", users, redisPackedHashes)
			}
			f.Runs = append(f.Runs, r)
		}
	}
	p.finish()
	for _, s := range subjects {
		if s.OwnLimits == "" {
			continue
		}
		for i := range f.Runs {
			if f.Runs[i].Limiter == s.Name {
				f.Runs[i].OwnLimits = s.OwnLimits
			}
		}
	}
	if simTime > 0 {
		f.Meta.SimulationPerS = float64(simDecisions) / simTime.Seconds()
	}
	f.Meta.Elapsed = results.Seconds(time.Since(begin).Seconds())
	return f, ctx.Err()
}

// pacedLimit is the limit a paced run gives its limiter: the window scaled
// by the workload's own rate over the offered rate, so that each key is
// asked for the same multiple of its limit as in the workload.
func pacedLimit(limit limiters.Window, w *workloads.Workload, offered float64) limiters.Window {
	native := float64(len(w.Arrivals)) / w.Params.Duration.Seconds()
	length := time.Duration(float64(limit.Length) * native / offered)
	return limiters.Window{Limit: limit.Limit, Length: max(length, time.Microsecond)}
}

func realTimeResult(base results.Run, rt RealTime, res RealTimeResult) results.Run {
	r := base
	r.Mode, r.Goroutines, r.OfferedRate, r.Decisions = ModeRealTime, rt.Goroutines, rt.Rate, res.Decisions
	r.LatencyNS = res.Latency.latency()
	r.LatencyCurveNS = res.Latency.curve()
	r.ThroughputPerS = res.Throughput()
	wait := float64(res.LockWait) / float64(max(res.Decisions, 1))
	r.LockWaitNSPerOp = &wait
	admitted := float64(res.Admitted) / float64(max(res.Decisions, 1))
	r.AdmittedFraction = &admitted
	if rt.Rate > 0 {
		achieved, late := res.Throughput()/rt.Rate, res.Late
		r.AchievedFraction, r.LateFraction = &achieved, &late
	}
	return r
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
// takes explicit times (returning how long the simulation took), else by a
// time-compressed replay in real time.
func accuracyRun(ctx context.Context, c Config, s Subject, w *workloads.Workload, ideal []bool) (results.Run, time.Duration, error) {
	if s.NewAt != nil {
		d, stop, err := s.NewAt(c.Limit)
		if err != nil {
			return results.Run{}, 0, err
		}
		defer stop()
		start := time.Now()
		allowed := Simulate(w, d)
		elapsed := time.Since(start)
		acc := Compare(w, allowed, ideal, c.Limit)
		allocs := steadyAllocsAt(w, d, c.Limit.Length)
		r := results.Run{Mode: ModeSimulated, Decisions: int64(len(allowed)), Accuracy: &acc, AllocsPerDecision: &allocs}
		if w.Name == "boundary-attack" {
			r.Edge = EdgeSeries(w, allowed, c.Limit.Length, edgeWindows)
		}
		return r, elapsed, nil
	}
	scale := replayScale(w, c.RealTimeAccuracyScale)
	scaled := limiters.Window{Limit: c.Limit.Limit, Length: max(time.Duration(float64(c.Limit.Length)*scale), 1)}
	l, stop, err := s.New(scaled)
	if err != nil {
		return results.Run{}, 0, err
	}
	defer stop()
	allowed, sent, lag, err := RealTimeAccuracy(ctx, w, l, scale)
	if err != nil {
		return results.Run{}, 0, err
	}
	sentIdeal, err := Ideal(sent, c.Limit)
	if err != nil {
		return results.Run{}, 0, err
	}
	acc := Compare(sent, allowed, sentIdeal, c.Limit)
	allocs, err := steadyAllocs(ctx, w, l)
	if err != nil {
		return results.Run{}, 0, err
	}
	r := results.Run{Mode: ModeRealTime, Decisions: int64(len(allowed)), Accuracy: &acc,
		TimeScale: scale, SendLagNS: lag.latency(), AllocsPerDecision: &allocs}
	if w.Name == "boundary-attack" {
		r.Edge = EdgeSeries(sent, allowed, c.Limit.Length, edgeWindows)
	}
	return r, 0, nil
}

// replayRate is the most requests a second one sender keeps pace with in a
// real-time replay, with room to spare.
const replayRate = 1_000_000

// replayScale is how much a real-time replay of w compresses time: as much
// as most allows, but not so much that the workload's densest millisecond
// comes faster than one sender can send it, and never slower than real
// time.
func replayScale(w *workloads.Workload, most float64) float64 {
	peak, lo := 0, 0
	for hi, a := range w.Arrivals {
		for w.Arrivals[lo].T <= a.T-time.Millisecond {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	need := float64(peak) * 1000 / replayRate // the scale at which the peak is replayRate
	return min(max(most, need), 1)
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
			TimingRounds:          c.TimingRounds, TimingSample: results.Seconds(c.TimingSample.Seconds()),
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

// httpResult is base with what an HTTP attack measured.
func httpResult(base results.Run, h HTTPAttack, res HTTPResult) results.Run {
	r := base
	r.Mode, r.OfferedRate, r.ThroughputPerS, r.Decisions = ModeHTTP, h.Rate, res.Achieved, int64(res.Requests)
	lat := res.LatencyNS
	r.LatencyNS = &lat
	achieved := res.Achieved / h.Rate
	r.AchievedFraction = &achieved
	if res.Requests > 0 {
		admitted := float64(res.OK) / float64(res.Requests)
		r.AdmittedFraction = &admitted
	}
	r.HTTP = &results.HTTP{OK: int64(res.OK), Limited: int64(res.Limited), Other: int64(res.Other), Errors: int64(res.Errors), Ideal: int64(res.Ideal),
		FirstError: res.FirstError, Window: results.Seconds(h.Limit.Length.Seconds())}
	return r // the table's "sent" beside "offered" says when vegeta fell behind
}
