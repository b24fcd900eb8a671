package results

import (
	"errors"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	a, b := gateFiles(t)
	edit(a, func(r Run) bool { return r.Workload == "boundary-attack" && r.Mode == "simulated" }, func(r *Run) {
		r.Edge = &Series{Key: "attacker-0", T: []float64{0.99, 1.01}, InWindow: []float64{100, 200}}
	})
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta.Merged != 2 || len(m.Runs) != len(a.Runs) {
		t.Fatalf("merged %d files into %d runs, want 2 into %d", m.Meta.Merged, len(m.Runs), len(a.Runs))
	}
	am, _, _, _ := gated(a)
	bm, _, _, _ := gated(b)
	mm, order, _, _ := gated(m)
	for _, k := range order {
		x, y, got := am[k], bm[k], mm[k]
		switch {
		case k.mode == "timing":
			if len(got.Rounds) != len(x.Rounds)+len(y.Rounds) || got.Rounds[0] != x.Rounds[0] || got.Rounds[len(x.Rounds)] != y.Rounds[0] || got.Decisions != x.Decisions+y.Decisions {
				t.Errorf("%s: %d rounds and %d decisions, want both files' rounds in order (%d+%d) and decisions", k, len(got.Rounds), got.Decisions, len(x.Rounds), len(y.Rounds))
			}
		case k.mode == "memory":
			if want := (x.BytesPerUser + y.BytesPerUser) / 2; got.BytesPerUser != want {
				t.Errorf("%s: %v bytes a user, want the median %v", k, got.BytesPerUser, want)
			}
		case got.AllocsPerDecision != nil:
			if want := (*x.AllocsPerDecision + *y.AllocsPerDecision) / 2; *got.AllocsPerDecision != want {
				t.Errorf("%s: %v allocations, want the median %v", k, *got.AllocsPerDecision, want)
			}
		}
	}
	edges := 0
	for i, r := range m.Runs {
		if r.Edge != nil {
			t.Errorf("%s on %s (%s): the edge picture is kept", r.Limiter, r.Workload, r.Mode)
		}
		if a.Runs[i].Edge != nil {
			edges++
		}
	}
	if edges == 0 {
		t.Error("the first file has no edge pictures to leave out")
	}
	// Merging leaves its inputs as they were.
	if a2, _ := gateFiles(t); len(a.Runs[0].Rounds) != len(a2.Runs[0].Rounds) || a.Meta.Merged != 0 {
		t.Error("Merge changed its first input")
	}
	// A merged baseline compares like any other.
	if _, err := Compare(m, b, DefaultTolerance); err != nil {
		t.Errorf("compare with a merged baseline: %v", err)
	}
}

func TestMergeRefuses(t *testing.T) {
	a, b := gateFiles(t)
	edit(b, func(r Run) bool { return r.Limiter == "gcra" && r.Workload == "uniform" && r.Mode == "simulated" }, func(r *Run) {
		acc := *r.Accuracy
		acc.Admitted++
		r.Accuracy = &acc
	})
	if _, err := Merge(a, b); err == nil || !strings.Contains(err.Error(), "file 2 of 2 decided gcra on uniform (simulated) otherwise than the first") {
		t.Errorf("other decisions: %v", err)
	}
	a, b = gateFiles(t)
	b.Meta.Seed = 9
	var mis *MismatchError
	if _, err := Merge(a, b); !errors.As(err, &mis) || !strings.Contains(err.Error(), "seed 1 in OLD, 9 in NEW") {
		t.Errorf("another seed: %v", err)
	}
	a, b = gateFiles(t)
	b.Runs = b.Runs[1:]
	if _, err := Merge(a, b); !errors.As(err, &mis) {
		t.Errorf("a run missing: %v", err)
	}
	if _, err := Merge(); err == nil {
		t.Error("merged nothing")
	}
}
