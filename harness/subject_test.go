package harness

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/results"
)

// clockOnly decides at its own clock only: the lab replays its accuracy in
// real time. It counts its closes.
type clockOnly struct {
	l      *gcra.Limiter
	closed *atomic.Int32
}

func (c clockOnly) AllowN(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return c.l.AllowN(ctx, key, n)
}

func (c clockOnly) Decide(ctx context.Context, r limiters.Request) (limiters.Decision, error) {
	if !r.At.IsZero() {
		return limiters.Decision{}, errors.New("clockOnly: no explicit times")
	}
	return c.l.Decide(ctx, r)
}

func (c clockOnly) Close() error {
	c.closed.Add(1)
	return c.l.Close()
}

func TestNewSubject(t *testing.T) {
	var made, closed atomic.Int32
	s, err := NewSubject("mine", func(w limiters.Limit) (limiters.Limiter, error) {
		made.Add(1)
		l, err := gcra.New(w)
		return clockOnly{l, &closed}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.NewAt != nil || s.New == nil || s.Name != "mine" || s.Backend != "memory" {
		t.Fatalf("subject %+v: want one that decides at its own clock only", s)
	}
	c := smallLab()
	c.Limiters, c.Extra = []string{"gcra"}, []Subject{s}
	c.Workloads, c.Modes = []string{"uniform"}, []string{simulatedModeName, memoryModeName}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, r := range f.Rows {
		if r.Limiter == "mine" {
			modes[r.Mode] = true
			if a, ok := r.AccuracyOf(); r.Mode == realTimeModeName && (!ok || a.Admitted == 0 || r.Get(results.TimeScale) == 0) {
				t.Errorf("its accuracy, replayed: %+v", r)
			}
		}
	}
	if !modes[realTimeModeName] || !modes[memoryModeName] || modes[simulatedModeName] {
		t.Errorf("measured in modes %v: want accuracy replayed in real time, and memory", modes)
	}
	if made.Load() < 3 || made.Load() != closed.Load() {
		t.Errorf("%d limiters made, %d closed: want each closed when the lab is done with it", made.Load(), closed.Load())
	}
}

func TestNewSubjectRefuses(t *testing.T) {
	ok := func(w limiters.Limit) (limiters.Limiter, error) {
		return gcra.New(limiters.Limit{N: 1, Per: time.Second, Burst: w.N})
	}
	if _, err := NewSubject(" ", ok); err == nil || !strings.Contains(err.Error(), "needs a name") {
		t.Errorf("no name: %v", err)
	}
	broken := errors.New("no limiter today")
	if _, err := NewSubject("broken", func(limiters.Limit) (limiters.Limiter, error) { return nil, broken }); !errors.Is(err, broken) || !strings.Contains(err.Error(), "subject broken") {
		t.Errorf("a constructor that fails: %v", err)
	}
	mine, err := NewSubject("gcra", ok)
	if err != nil {
		t.Fatal(err)
	}
	c := smallLab()
	c.Extra = []Subject{mine}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), `two subjects are named "gcra"`) {
		t.Errorf("a subject named as one of ratelab's: %v", err)
	}
	c.Extra = []Subject{{Name: "nothing"}}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "makes no limiter") {
		t.Errorf("a subject that makes nothing: %v", err)
	}
}

// A subject deciding at explicit times is measured in simulated time, and
// the same seed gives it the same decisions.
func TestNewSubjectAt(t *testing.T) {
	s, err := NewSubject("mine", func(w limiters.Limit) (limiters.Limiter, error) {
		return gcra.New(w)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.NewAt == nil {
		t.Fatal("a limiter deciding at explicit times: want NewAt")
	}
	c := smallLab()
	c.Limiters, c.Extra = []string{"gcra"}, []Subject{s}
	c.Workloads, c.Modes = []string{"boundary-attack"}, []string{simulatedModeName}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) != 2 || f.Rows[1].Limiter != "mine" || f.Rows[1].Mode != simulatedModeName || !f.Rows[1].Has(results.MostInWindow) || accuracyOf(f.Rows[1]) != accuracyOf(f.Rows[0]) {
		t.Errorf("rows %+v: want mine decided as ratelab's gcra, which it is", f.Rows)
	}
}
