package harness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// A mode is one way the lab measures (accuracy in simulated time, real
// time, timing, memory, HTTP, a fleet, costs known after, an outage),
// declared once, in a file of its own: what results reports of it (its
// name, tables, picks and gates), and how it measures, on a workload, each
// subject that can be measured so, saying why not the others in rows of
// their own.
type mode struct {
	report.Mode
	// once is whether the mode measures once, not on each workload: then
	// measure is given no workload. slow says the quick lab leaves it out.
	// attacks says it measures too the workloads made for accuracy alone
	// (workloads.Generator.AccuracyOnly).
	once, slow, attacks bool
	// steps is the weight, for the progress line, of measuring subjects
	// on one workload (or once).
	steps func(c Config, subjects []Subject) int
	// flags declares the mode's settings on fs, bound to c's fields: the
	// flags that set them, and what a results file records of them.
	flags   func(c *Config, fs *flag.FlagSet)
	measure func(ctx context.Context, l *lab, w *workloads.Workload, subjects []Subject) ([]results.Row, error)
}

// modes are the lab's modes, each declared in a file of its own, in
// their Order: in the run and the report.
var modes = []mode{simulatedMode, realtimeMode, memoryMode, timingMode, httpMode, fleetMode, llmMode, outageMode}

// Modes returns the lab's modes, in their Order, as everything that
// reports on the lab's results files is given them: the tables, the
// charts and the report, the picks, compare, merge and the gate.
func Modes() report.Modes {
	out := make(report.Modes, len(modes))
	for i, m := range modes {
		out[i] = m.Mode
	}
	return out
}

// modeNames names the lab's modes, in the order it runs them.
func modeNames() []string {
	out := make([]string, len(modes))
	for i, m := range modes {
		out[i] = m.Name
	}
	return out
}

// A source is a kind of subject that shares something the lab opens before
// running them and closes after: a server, its client, a key prefix. Each
// is a file of its own (redis.go).
type source struct {
	// names are the names of the subjects it can hold.
	names func() []string
	// open opens what c asks for of it: nil when c asks for none of its
	// subjects.
	open func(ctx context.Context, c Config) (opened, error)
}

// opened is a source the lab opened.
type opened interface {
	subjects() []Subject
	// describe records in the results' settings how its subjects ran.
	describe(settings map[string]string)
	close(ctx context.Context) error
}

var sources = []source{{redisNames, openRedis}}

// serverNames are the names of the subjects the lab's sources hold.
func serverNames() []string {
	var out []string
	for _, s := range sources {
		out = append(out, s.names()...)
	}
	return out
}

// lab is a run of the lab, as its modes see it.
type lab struct {
	c Config
	p *progress
	// simDecisions and simTime are the simulated runs' decisions and the
	// time they took, in the process.
	simDecisions int64
	simTime      time.Duration
	// httpRate is the rate the http mode runs at, once its knee is found
	// (0 until then), and httpQueued the median latency above which its
	// requests waited in a queue.
	httpRate, httpQueued float64
}

// Lab runs c and returns its results: every workload, through every mode,
// for every subject the mode can measure. Progress lines go to progress,
// if not nil.
func Lab(ctx context.Context, c Config, progress io.Writer) (_ *results.File, err error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	subjects, open, err := c.subjects(ctx)
	defer func() {
		for _, o := range open {
			if cerr := o.close(ctx); err == nil {
				err = cerr
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	var ms []mode
	for _, m := range modes {
		if slices.Contains(c.Modes, m.Name) {
			ms = append(ms, m)
		}
	}
	names := c.Workloads
	if c.Trace != nil {
		names = append(slices.Clone(names), "trace")
	}

	begin := time.Now()
	f := &results.File{Schema: results.Schema, Meta: meta(c, available(subjects), begin)}
	for _, o := range open {
		o.describe(f.Meta.Settings)
	}
	l := &lab{c: c, p: newProgress(progress, c, ms, subjects, names)}
	for _, name := range names {
		l.p.step(fmt.Sprintf("generating %s", name), 1)
		w, err := c.Workload(name)
		if err != nil {
			return nil, err
		}
		rows, err := l.workload(ctx, w, ms, subjects)
		if err != nil {
			return nil, err
		}
		f.Rows = append(f.Rows, rows...)
	}
	for _, m := range ms {
		if m.once {
			rows, err := m.measure(ctx, l, nil, available(subjects))
			if err != nil {
				return nil, err
			}
			f.Rows = append(f.Rows, rows...)
		}
	}
	l.p.finish()
	for i, r := range f.Rows {
		if s := subjectNamed(subjects, r.Limiter); s != nil && s.OwnLimits != "" {
			f.Rows[i].Set(results.OwnLimits, s.OwnLimits)
		}
	}
	if l.simTime > 0 {
		f.Meta.SimulationPerS = float64(l.simDecisions) / l.simTime.Seconds()
		f.Meta.SimulatedDecisions = l.simDecisions
	}
	f.Meta.Elapsed = results.Seconds(time.Since(begin).Seconds())
	return f, ctx.Err()
}

// subjects are the subjects c names, then its extra ones, then those of
// the sources it opens, which the lab closes when done.
func (c Config) subjects(ctx context.Context) ([]Subject, []opened, error) {
	subjects, _ := subjectsNamed(c.Limiters)
	subjects = append(subjects, c.Extra...)
	var open []opened
	for _, src := range sources {
		o, err := src.open(ctx, c)
		if err != nil {
			return nil, open, err
		}
		if o != nil {
			open = append(open, o)
			subjects = append(subjects, o.subjects()...)
		}
	}
	return subjects, open, nil
}

// workload runs the modes that measure on each workload on w: the
// subjects that cannot run at all are said to be skipped once, and an
// attack on accuracy alone is measured for accuracy alone.
func (l *lab) workload(ctx context.Context, w *workloads.Workload, ms []mode, subjects []Subject) ([]results.Row, error) {
	var out []results.Row
	for _, s := range subjects {
		if s.Remote != nil && s.Remote.Unavailable != "" {
			out = append(out, skipped(s, w.Name, "", s.Remote.Unavailable))
		}
	}
	if len(w.Arrivals) == 0 {
		for _, s := range available(subjects) {
			out = append(out, skipped(s, w.Name, "", "the workload has no requests with these parameters"))
		}
		return out, nil
	}
	g := generator(w.Name)
	for _, m := range ms {
		if m.once || g != nil && g.AccuracyOnly && !m.attacks {
			continue
		}
		rows, err := m.measure(ctx, l, w, available(subjects))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// available are the subjects that can run.
func available(subjects []Subject) []Subject {
	return slices.DeleteFunc(slices.Clone(subjects), func(s Subject) bool { return s.Remote != nil && s.Remote.Unavailable != "" })
}

func subjectNamed(subjects []Subject, name string) *Subject {
	for i := range subjects {
		if subjects[i].Name == name {
			return &subjects[i]
		}
	}
	return nil
}

// row is the row of s on workload (in mode, if known) before it is
// measured: who, what, where.
func row(s Subject, workload, mode string) results.Row {
	r := results.Row{Limiter: s.Name, Library: s.Library, Algorithm: string(s.Algorithm), Backend: s.Backend, Workload: workload, Mode: mode}
	if s.Floor {
		r.Set(results.Floor, "true")
	}
	return r
}

// skipped is the row of s on workload that was not measured, and why.
func skipped(s Subject, workload, mode, why string) results.Row {
	r := row(s, workload, mode)
	r.Skipped = why
	return r
}

func meta(c Config, subjects []Subject, begin time.Time) results.Meta {
	return results.Meta{
		Seed:       c.Seed,
		GoVersion:  runtime.Version(),
		CPU:        results.CPUModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start:      begin.UTC().Truncate(time.Second),
		Settings:   c.settings(subjects),
	}
}
