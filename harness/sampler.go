package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// A Sampler times decisions of ratelab's limiters in memory, one sample
// at a time, on request: it is what each of the two builds the A/B
// regression gate compares runs (package gate), so that the gate can take
// their samples in turns, in the same moments of one machine.
//
// It keeps the limiters of one workload at a time: each is made, and
// filled with the workload's keys by a first sample that the gate does not
// keep, when first asked for, and they are all let go when another
// workload is asked for. Not safe for concurrent use.
type Sampler struct {
	c        Config
	subjects []Subject
	workload string
	w        *workloads.Workload
	keys     []string
	live     map[string]*timed
}

// timed is a limiter being timed, and where it is in the workload.
type timed struct {
	l    limiters.Limiter
	stop func()
	at   int
}

// NewSampler returns a sampler of c's limiters (ratelab's six by default)
// on c's workloads, as c configures them (its seed, limit and
// populations), but for the attacks on accuracy alone. The other fields
// of c are not used.
func NewSampler(c Config) (*Sampler, error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Redis.URL != "" || c.Trace != nil || len(c.Extra) > 0 {
		return nil, fmt.Errorf("harness: the sampler times ratelab's limiters in memory, on generated workloads")
	}
	all, _ := subjectsNamed(c.Limiters)
	var subjects []Subject
	for _, s := range all {
		if s.Library == results.LibraryRatelab && s.Backend == results.BackendMemory {
			subjects = append(subjects, s)
		}
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("harness: the sampler times ratelab's limiters, and none of %q is one", c.Limiters)
	}
	c.Workloads = slices.DeleteFunc(c.Workloads, func(name string) bool { return generator(name).AccuracyOnly })
	if len(c.Workloads) == 0 {
		return nil, fmt.Errorf("harness: the sampler has no workload to time: an attack on accuracy alone is not timed")
	}
	return &Sampler{c: c, subjects: subjects}, nil
}

// Limiters names the limiters s times.
func (s *Sampler) Limiters() []string {
	out := make([]string, len(s.subjects))
	for i, x := range s.subjects {
		out[i] = x.Name
	}
	return out
}

// Workloads names the workloads s times them on.
func (s *Sampler) Workloads() []string { return slices.Clone(s.c.Workloads) }

// Sample times limiter on workload for about d: one goroutine deciding
// the workload's requests in order as fast as it can, going on from where
// its last sample stopped and wrapping around at the end. The first
// sample of a limiter on a workload makes it, with the lab's limit.
func (s *Sampler) Sample(ctx context.Context, limiter, workload string, d time.Duration) (results.Sample, error) {
	if d <= 0 || d > 10*time.Second {
		return results.Sample{}, fmt.Errorf("harness: a sample lasts from 0 to 10s, not %v", d)
	}
	if workload != s.workload {
		if !slices.Contains(s.c.Workloads, workload) {
			return results.Sample{}, fmt.Errorf("harness: the sampler has no workload %q (it has %v)", workload, s.c.Workloads)
		}
		s.Close()
		w, err := s.c.Workload(workload)
		if err != nil {
			return results.Sample{}, err
		}
		if len(w.Arrivals) == 0 {
			return results.Sample{}, fmt.Errorf("harness: workload %s has no requests with these parameters", workload)
		}
		s.workload, s.w, s.keys, s.live = workload, w, keysOf(w), map[string]*timed{}
		runtime.GC() // the last workload's limiters are not this one's to collect
	}
	t, ok := s.live[limiter]
	if !ok {
		i := slices.IndexFunc(s.subjects, func(x Subject) bool { return x.Name == limiter })
		if i < 0 {
			return results.Sample{}, fmt.Errorf("harness: the sampler has no limiter %q (it has %v)", limiter, s.Limiters())
		}
		l, stop, err := s.subjects[i].New(s.c.Limit)
		if err != nil {
			return results.Sample{}, err
		}
		t = &timed{l: l, stop: stop}
		s.live[limiter] = t
	}
	sample, _ := timeSample(ctx, t.l, s.keys, s.w.Arrivals, &t.at, d)
	return sample, ctx.Err()
}

// Close lets go of the limiters s holds.
func (s *Sampler) Close() {
	for _, t := range s.live {
		t.stop()
	}
	s.workload, s.w, s.keys, s.live = "", nil, nil, nil
}
