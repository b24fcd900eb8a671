package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/harness/peers"
	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// Subject is a limiter under test, and what it can do. Each ability is a
// function, nil when the subject lacks it: the lab's modes each measure
// the subjects that have what they need, and say why not the others.
type Subject struct {
	// Name is how tables call it: the algorithm for ratelab's, the
	// library for a peer.
	Name string
	// Library is the Go module (and version) measured; Backend where the
	// limiter keeps its state ("memory", "redis").
	Library   string
	Algorithm limiters.Algorithm
	Backend   string
	// NewAt makes the limiter for "N per W" deciding at the explicit
	// times of its requests: its accuracy is measured in simulated time,
	// exactly.
	NewAt func(l limiters.Limit) (limiters.Limiter, func(), error)
	// New makes it deciding at its own clock: for real time, timing,
	// memory, and accuracy replayed in real time when it has no NewAt.
	New func(l limiters.Limit) (limiters.Limiter, func(), error)
	// Serve says the server of ratelab serve decides it (its Algorithm at
	// the lab's limit): the http mode puts the subject behind that server.
	Serve bool
	// Weigh, when set, measures what the limiter holds per key itself
	// (its state is in a server), in place of the live heap of the
	// process after a decision for each of the memory run's keys.
	Weigh func(ctx context.Context, limit limiters.Limit) (memoryResult, error)
	// OwnLimits, when set, says the limiter has limits of its own (a
	// configuration's tiers) and ignores the lab's N per W: it is timed,
	// weighed and run in real time like the others, but its accuracy is
	// not judged against an N per W it does not have.
	OwnLimits string
	// Fleet, when set, makes the subject as processes sharing one server:
	// the fleet mode runs it so.
	Fleet *fleetMaker
	// NewSettler, when set, makes the limiter for "N per W" able to
	// reserve and settle at explicit times: the llm mode runs it.
	NewSettler func(l limiters.Limit) (limiters.Settler, func(), error)
	// Outage, when set, is the server of ratelab serve deciding the
	// subject for a limit, on a Redis server (Config.Redis) the outage
	// mode can take away, and what removes its keys when done.
	Outage func(w limiters.Limit) (server.Config, func(), error)
	// Floor says the subject decides nothing and admits everything: what
	// the harness, or a round trip, costs alone. It runs in real time
	// only, and the picks leave it out.
	Floor bool
	// Remote, when set, says each decision is a round trip to a server,
	// and how the lab allows for that.
	Remote *remote
}

// remote is how a subject whose every decision is a round trip to a
// server takes part in the lab: it makes thousands of decisions a second
// where a limiter in the process makes millions, so it decides a sample
// of each workload, runs shorter and slower in real time, is not timed
// against the harness floor, and stops when its server fails.
type remote struct {
	// Server names the server, for what the results say: "Redis".
	Server string
	// Unavailable says why the subject cannot run at all (its server
	// did not answer), "" when it can; Failed says why it stopped (its
	// server failed during the lab), "" while it runs.
	Unavailable string
	Failed      func() string
	// Sample returns the part of w it decides in simulated time and a
	// note for its rows, or why it decides none of w.
	Sample func(w *workloads.Workload) (sample *workloads.Workload, note, skip string)
	// Senders share out the sample's keys, so that round trips overlap.
	Senders int
	// RealTime are its real-time runs, in place of the lab's, and the
	// note each one's row carries.
	RealTime []realTimeRun
	Note     func(realTimeRun) string
}

// failed says why s no longer runs, "" while it does.
func (s Subject) failed() string {
	if s.Remote == nil || s.Remote.Failed == nil {
		return ""
	}
	return s.Remote.Failed()
}

// inProcess reports whether s decides in the process, without a round
// trip: what timing it against the harness floor, and weighing it by the
// live heap, take.
func (s Subject) inProcess() bool { return s.Remote == nil && s.New != nil }

// NewSubject makes a subject of a limiter of your own, named name, for the
// lab to measure beside ratelab's and the peers: newLimiter makes one for
// the lab's limit, N per W. When what it makes decides at the explicit
// times of its requests (limiters.Request.At), its accuracy is measured in
// simulated time, exactly; when it refuses them with an error, by a
// replay in real time, time compressed. (NewSubject asks one at 100 per
// second to find out.) The lab closes each limiter when done with it.
func NewSubject(name string, newLimiter func(limiters.Limit) (limiters.Limiter, error)) (Subject, error) {
	if strings.TrimSpace(name) == "" {
		return Subject{}, fmt.Errorf("harness: a subject needs a name")
	}
	probe, err := newLimiter(limiters.PerSecond(100))
	if err != nil {
		return Subject{}, fmt.Errorf("harness: subject %s: %w", name, err)
	}
	_, err = probe.Decide(context.Background(), limiters.Request{Key: "probe", N: 1, At: time.Unix(1, 0)})
	at := err == nil
	probe.Close()
	s := Subject{Name: name, Library: name, Backend: results.BackendMemory,
		New: func(w limiters.Limit) (limiters.Limiter, func(), error) {
			l, err := newLimiter(w)
			if err != nil {
				return nil, nil, err
			}
			return l, func() { l.Close() }, nil
		},
	}
	if at {
		s.NewAt = s.New
	}
	return s, nil
}

// TiersSubject is the limiter a configuration describes (package
// limiters/tiers), as a subject named name: every user of the workloads
// not in c's lists is in its default tier.
func TiersSubject(name string, c tiers.Config) Subject {
	newTiers := func(limiters.Limit) (limiters.Limiter, func(), error) {
		l, err := tiers.New(c, limiters.WithSweepInterval(-1))
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close() }, nil
	}
	return Subject{
		Name: name, Library: results.LibraryRatelab, Algorithm: c.Algorithm, Backend: results.BackendMemory,
		OwnLimits: fmt.Sprintf("%s, the default tier %s", name, c.Default),
		NewAt:     newTiers,
		New:       newTiers,
	}
}

// inMemory is what each of ratelab's in-memory algorithms is.
type inMemory interface {
	limiters.Settler
	limiters.Peeker
	Stats() limiters.Stats
}

// newInMemory returns algorithm a's own limiter for l, as a user who
// imports its package has it: what the lab measures is the algorithm, not
// a wrapper that picks it.
func newInMemory(a limiters.Algorithm, l limiters.Limit) (inMemory, func(), error) {
	m, err := composite.NewAlgorithm(a, l, limiters.WithSweepInterval(-1))
	if err != nil {
		return nil, nil, err
	}
	return m, func() { m.Close() }, nil
}

// allSubjects returns ratelab's six algorithms in memory, then the peers.
func allSubjects() []Subject {
	var out []Subject
	for _, a := range limiters.Algorithms() {
		newLimiter := func(l limiters.Limit) (limiters.Limiter, func(), error) { return nonNil(newInMemory(a, l)) }
		out = append(out, Subject{
			Name: string(a), Library: results.LibraryRatelab, Algorithm: a, Backend: results.BackendMemory,
			NewAt: newLimiter,
			New:   newLimiter,
			NewSettler: func(l limiters.Limit) (limiters.Settler, func(), error) {
				m, stop, err := newInMemory(a, l)
				if err != nil {
					return nil, nil, err
				}
				return m, stop, nil
			},
			Serve: true,
		})
	}
	for _, p := range peers.All() {
		s := Subject{
			Name: p.Name, Library: p.Module, Algorithm: p.Algorithm, Backend: results.BackendMemory,
			New: func(w limiters.Limit) (limiters.Limiter, func(), error) {
				l, err := p.New(w)
				if err != nil {
					return nil, nil, err
				}
				return l, func() { l.Close() }, nil
			},
		}
		if p.NewAt != nil {
			s.NewAt = func(w limiters.Limit) (limiters.Limiter, func(), error) {
				l, err := p.NewAt(w)
				if err != nil {
					return nil, nil, err
				}
				return l, func() { l.Close() }, nil
			}
		}
		out = append(out, s)
	}
	return out
}

// floorSubject is the harness floor: a limiter that decides nothing and admits
// everything. Its rows in the real-time tables are what the harness itself
// costs, and what the runtime alone adds to lock wait.
func floorSubject() Subject {
	return Subject{
		Name: "(harness floor)", Library: results.LibraryRatelab, Backend: "none", Floor: true,
		New: func(limiters.Limit) (limiters.Limiter, func(), error) { return nop{}, func() {}, nil },
	}
}

type nop struct{}

func (nop) AllowN(context.Context, string, int) (limiters.Decision, error) {
	return limiters.Decision{Allowed: true}, nil
}

func (nop) Decide(context.Context, limiters.Request) (limiters.Decision, error) {
	return limiters.Decision{Allowed: true}, nil
}

func (nop) Close() error { return nil }

// nonNil returns a nil Limiter, not a typed nil, on error.
func nonNil[L limiters.Limiter](l L, stop func(), err error) (limiters.Limiter, func(), error) {
	if err != nil {
		return nil, nil, err
	}
	return l, stop, nil
}

// subjectsNamed returns the subjects in the process with the given names,
// in the order Subjects lists them; all of them when names is empty. The
// names of the subjects the lab's servers hold (ServerNames) are known,
// and left to the lab.
func subjectsNamed(names []string) ([]Subject, error) {
	all := allSubjects()
	if len(names) == 0 {
		return all, nil
	}
	var out, known []string
	for _, s := range all {
		known = append(known, s.Name)
	}
	known = append(known, serverNames()...)
	var subjects []Subject
	for _, s := range all {
		if slices.Contains(names, s.Name) {
			subjects = append(subjects, s)
		}
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return nil, fmt.Errorf("harness: unknown limiter %q (want some of %s)", out[0], strings.Join(known, ", "))
	}
	return subjects, nil
}

// named reports whether names asks for the subject named name: it does
// when it names no subject at all.
func named(names []string, name string) bool {
	return len(names) == 0 || slices.Contains(names, name)
}
