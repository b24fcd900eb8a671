package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/harness/peers"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/memory"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Subject is a limiter under test: one of ratelab's algorithms, or a peer
// library.
type Subject struct {
	// Name is how tables call it: the algorithm for ratelab's, the
	// library for a peer.
	Name      string
	Library   string
	Algorithm limiters.Algorithm
	Backend   string
	// NewAt returns the limiter for "N per W" deciding at explicit times,
	// for simulated time; nil when the limiter takes no explicit time.
	NewAt func(w limiters.Window) (AtDecider, func(), error)
	// New returns it deciding at its own clock, for real time.
	New func(w limiters.Window) (limiters.Limiter, func(), error)
	// OwnLimits, when set, says the limiter has limits of its own (a
	// configuration's tiers) and ignores the lab's N per W: it is timed,
	// weighed and run in real time like the others, but its accuracy is
	// not judged against an N per W it does not have.
	OwnLimits string
	// Weigh, when set, measures what the limiter holds per key for keys
	// keys at limit, in place of MeasureMemory's live heap: for a limiter
	// whose state is in a server.
	Weigh func(ctx context.Context, limit limiters.Window, keys int) (MemoryResult, error)
}

// TiersSubject is the limiter a configuration describes (package
// limiters/tiers), as a subject named name: every user of the workloads
// not in c's lists is in its default tier.
func TiersSubject(name string, c tiers.Config) Subject {
	newTiers := func(limiters.Window) (*tiers.Limiter, func(), error) {
		l, err := tiers.New(c, limiters.WithSweepInterval(-1))
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close() }, nil
	}
	return Subject{
		Name: name, Library: "ratelab", Algorithm: c.Algorithm, Backend: "memory",
		OwnLimits: fmt.Sprintf("%s, the default tier %s", name, c.Default),
		NewAt: func(w limiters.Window) (AtDecider, func(), error) {
			l, stop, err := newTiers(w)
			if err != nil {
				return nil, nil, err
			}
			return l, stop, nil
		},
		New: func(w limiters.Window) (limiters.Limiter, func(), error) {
			l, stop, err := newTiers(w)
			if err != nil {
				return nil, nil, err
			}
			return l, stop, nil
		},
	}
}

// AtDecider decides at explicit times.
type AtDecider interface {
	AllowAt(key string, t time.Time, n int) limiters.Decision
}

// Spec is how ratelab reads "N per W" for algorithm a: N per W for a
// window algorithm, a capacity of N refilled over W for a bucket.
func Spec(a limiters.Algorithm, w limiters.Window) limiters.Spec {
	r := limiters.Rate{N: w.Limit, Per: w.Length}
	return limiters.Spec{Algorithm: a, Window: r.Window(), Bucket: r.Bucket()}
}

// Subjects returns ratelab's six algorithms, then the peers.
func Subjects() []Subject {
	var out []Subject
	for _, a := range limiters.Algorithms() {
		newMemory := func(w limiters.Window) (memory.Limiter, func(), error) {
			l, err := memory.New(Spec(a, w), limiters.WithSweepInterval(-1))
			if err != nil {
				return nil, nil, err
			}
			return l, func() { l.Close() }, nil
		}
		out = append(out, Subject{
			Name: string(a), Library: "ratelab", Algorithm: a, Backend: "memory",
			NewAt: func(w limiters.Window) (AtDecider, func(), error) { return decider(newMemory(w)) },
			New: func(w limiters.Window) (limiters.Limiter, func(), error) {
				l, stop, err := newMemory(w)
				if err != nil {
					return nil, nil, err
				}
				return l, stop, nil
			},
		})
	}
	for _, p := range peers.All() {
		s := Subject{
			Name: p.Name, Library: p.Module, Algorithm: p.Algorithm, Backend: "memory",
			New: func(w limiters.Window) (limiters.Limiter, func(), error) {
				l, err := p.New(w)
				if err != nil {
					return nil, nil, err
				}
				return l, func() { l.Close() }, nil
			},
		}
		if p.NewAt != nil {
			s.NewAt = func(w limiters.Window) (AtDecider, func(), error) {
				l, err := p.NewAt(w)
				if err != nil {
					return nil, nil, err
				}
				return l, func() {}, nil
			}
		}
		out = append(out, s)
	}
	return out
}

// Floor is the harness floor: a limiter that decides nothing and admits
// everything. Its rows in the real-time tables are what the harness itself
// costs, and what the runtime alone adds to lock wait.
func Floor() Subject {
	return Subject{
		Name: "(harness floor)", Library: "ratelab", Backend: "none",
		New: func(limiters.Window) (limiters.Limiter, func(), error) { return nop{}, func() {}, nil },
	}
}

type nop struct{}

func (nop) AllowN(context.Context, string, int) (limiters.Decision, error) {
	return limiters.Decision{Allowed: true}, nil
}

func decider(l memory.Limiter, stop func(), err error) (AtDecider, func(), error) {
	if err != nil {
		return nil, nil, err
	}
	return l, stop, nil
}

// SubjectsNamed returns the subjects in memory with the given names, in
// the order Subjects lists them; all of them when names is empty. The
// names of the subjects kept in Redis (RedisNames) are known, and left to
// the lab.
func SubjectsNamed(names []string) ([]Subject, error) {
	all := Subjects()
	if len(names) == 0 {
		return all, nil
	}
	var out []Subject
	for _, s := range all {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	known := RedisNames()
	for _, s := range all {
		known = append(known, s.Name)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("harness: unknown limiter %q (want some of %s)", n, strings.Join(known[len(RedisNames()):], ", ")+", "+strings.Join(RedisNames(), ", "))
		}
	}
	return out, nil
}

// redisNamed reports whether names asks for the subject kept in Redis
// named name: it does when it names no subject at all.
func redisNamed(names []string, name string) bool {
	return len(names) == 0 || slices.Contains(names, name)
}
