package results

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// gateFiles are two real quick runs of the lab on one unchanged tree, a
// few minutes apart on this machine, cut down to the runs the gate reads:
// what they differ by is the noise the gate must pass.
func gateFiles(t *testing.T) (old, new *File) {
	t.Helper()
	var err error
	if old, err = ReadFile(filepath.Join("testdata", "gate-old.json")); err != nil {
		t.Fatal(err)
	}
	if new, err = ReadFile(filepath.Join("testdata", "gate-new.json")); err != nil {
		t.Fatal(err)
	}
	return old, new
}

// edit changes the runs of f that keep says.
func edit(f *File, keep func(Run) bool, change func(*Run)) int {
	n := 0
	for i := range f.Runs {
		if keep(f.Runs[i]) {
			change(&f.Runs[i])
			n++
		}
	}
	return n
}

func regressed(c *Comparison) []string {
	var out []string
	for _, ch := range c.Changes {
		if ch.Verdict == Regressed {
			out = append(out, ch.Limiter+" "+ch.Workload+" "+ch.Metric)
		}
	}
	return out
}

// TestGate is the proof the committed half of the gate works: it fails a
// run with an extra allocation a decision, one with an accuracy count
// changed, one with a fatter limiter, and passes the same tree run again.
func TestGate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*testing.T, *File)
		want   []string // what regressed: limiter workload metric, each a prefix
	}{
		{"noise only", func(*testing.T, *File) {}, nil},
		{"an extra allocation", func(t *testing.T, f *File) {
			edit(f, func(r Run) bool { return gcra("simulated")(r) && r.Workload == "bursty" }, func(r *Run) {
				*r.AllocsPerDecision++
			})
		}, []string{"gcra bursty allocs/decision"}},
		{"one more false allow", func(t *testing.T, f *File) {
			edit(f, func(r Run) bool { return gcra("simulated")(r) && r.Workload == "uniform" }, func(r *Run) {
				r.Accuracy.FalseAllow++
				r.Accuracy.Admitted++
			})
		}, []string{"gcra uniform admitted", "gcra uniform false allows"}},
		{"allocations not measured", func(t *testing.T, f *File) {
			edit(f, func(r Run) bool { return gcra("simulated")(r) && r.Workload == "many-users" }, func(r *Run) { r.AllocsPerDecision = nil })
		}, []string{"gcra many-users allocs/decision"}},
		{"twice the allocations of made keys", func(t *testing.T, f *File) {
			edit(f, func(r Run) bool {
				return r.Limiter == "fixed-window" && r.Mode == "simulated" && r.Workload == "many-users"
			}, func(r *Run) {
				*r.AllocsPerDecision *= 2
			})
		}, []string{"fixed-window many-users allocs/decision"}},
		{"memory not measured", func(t *testing.T, f *File) {
			edit(f, gcra("memory"), func(r *Run) { r.BytesPerUser = 0 })
		}, []string{"gcra many-users bytes/user"}},
		{"a fatter limiter", func(t *testing.T, f *File) {
			edit(f, gcra("memory"), func(r *Run) { r.BytesPerUser += 8 })
		}, []string{"gcra many-users bytes/user"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, new := gateFiles(t)
			tt.change(t, new)
			c, err := Compare(old, new, DefaultTolerance)
			if err != nil {
				t.Fatal(err)
			}
			got := regressed(c)
			if len(got) != len(tt.want) {
				t.Errorf("regressed %q, want %q", got, tt.want)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("%q did not regress (regressed: %q)", w, got)
				}
			}
			var out bytes.Buffer
			if err := c.Write(&out, false); err != nil {
				t.Fatal(err)
			}
			verdict := "No regression."
			if len(tt.want) > 0 {
				verdict = "REGRESSED:"
			}
			if !strings.Contains(out.String(), verdict) {
				t.Errorf("output lacks %q:\n%s", verdict, out.String())
			}
		})
	}
}

func TestCompareMismatch(t *testing.T) {
	old, new := gateFiles(t)
	new.Meta.Seed++
	new.Meta.Params.Limit = 50
	_, err := Compare(old, new, DefaultTolerance)
	var mis *MismatchError
	if !errors.As(err, &mis) || !strings.Contains(err.Error(), "seed 1 in OLD, 2 in NEW") || !strings.Contains(err.Error(), "limit 100 in OLD, 50 in NEW") {
		t.Errorf("other parameters: %v", err)
	}

	old, new = gateFiles(t)
	new.Runs = slices.DeleteFunc(new.Runs, func(r Run) bool { return r.Limiter == "throttled" })
	new.Runs = append(new.Runs, Run{Limiter: "gcra2", Workload: "uniform", Mode: "memory", BytesPerUser: 1})
	_, err = Compare(old, new, DefaultTolerance)
	for _, want := range []string{"only OLD has throttled on uniform (simulated)", "and ", "more", "only NEW has gcra2 on uniform (memory)", "refresh the baseline"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("runs that do not match: %v, want it to say %q", err, want)
		}
	}
}

// Changes compare shows but does not fail on: timings, of a peer, of the
// whole machine, of one of ratelab's limiters.
func TestGateLetsPass(t *testing.T) {
	slowBy := func(s *Sample, k float64) { s.ThroughputPerS /= k; s.P50NS *= k; s.P90NS *= k }
	t.Run("a peer twice as slow", func(t *testing.T) {
		old, new := gateFiles(t)
		edit(new, func(r Run) bool { return r.Limiter == "go-limiter" && r.Mode == "timing" }, func(r *Run) {
			for i := range r.Rounds {
				slowBy(&r.Rounds[i].Sample, 2)
			}
		})
		c, err := Compare(old, new, DefaultTolerance)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range c.Changes {
			if ch.Limiter == "go-limiter" && strings.HasSuffix(ch.Metric, "× floor") {
				n++
				if ch.Verdict != NotGated || !strings.HasPrefix(ch.Delta, "+") {
					t.Errorf("go-limiter %s %s: %s %s, want a rise, not gated", ch.Workload, ch.Metric, ch.Delta, ch.Verdict)
				}
			}
		}
		if n != 12 || c.Regressions() != 0 {
			t.Errorf("%d go-limiter timing rows (want 12), %d regressions (want 0)", n, c.Regressions())
		}
	})
	t.Run("the machine 1.6x slower", func(t *testing.T) {
		// Every sample, the limiters' and the floor's alike: the
		// yardstick slows with the machine, and the costs do not move.
		old, new := gateFiles(t)
		edit(new, func(r Run) bool { return r.Mode == "timing" }, func(r *Run) {
			r.Rounds = slices.Clone(r.Rounds)
			for i := range r.Rounds {
				x := &r.Rounds[i]
				slowBy(&x.Sample, 1.6)
				if x.FloorBefore != nil {
					b, a := *x.FloorBefore, *x.FloorAfter
					slowBy(&b, 1.6)
					slowBy(&a, 1.6)
					x.FloorBefore, x.FloorAfter = &b, &a
				}
			}
		})
		slowed, err := Compare(old, new, DefaultTolerance)
		if err != nil {
			t.Fatal(err)
		}
		_, same := gateFiles(t)
		asIs, err := Compare(old, same, DefaultTolerance)
		if err != nil {
			t.Fatal(err)
		}
		if slowed.Regressions() != 0 {
			t.Errorf("regressed: %q", regressed(slowed))
		}
		for w, v := range slowed.Floor {
			if want := asIs.Floor[w] / 1.6; math.Abs(v-want) > 1e-9 {
				t.Errorf("the floor on %s ran at %v of OLD's, want %v", w, v, want)
			}
		}
		if len(slowed.Floor) != 4 || !reflect.DeepEqual(deltas(slowed), deltas(asIs)) {
			t.Errorf("the machine's speed moved the costs:\n%v\nwant\n%v", deltas(slowed), deltas(asIs))
		}
	})
	t.Run("gcra twice as slow, or as fast, or not timed", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			change func(*Run)
			delta  string
		}{
			{"slower", func(r *Run) {
				for i := range r.Rounds {
					slowBy(&r.Rounds[i].Sample, 2)
				}
			}, "+"},
			{"faster", func(r *Run) {
				for i := range r.Rounds {
					slowBy(&r.Rounds[i].Sample, 0.5)
				}
			}, "-"},
			{"not timed", func(r *Run) { r.Rounds = nil }, ""},
		} {
			old, new := gateFiles(t)
			if edit(new, gcra("timing"), tt.change) != 4 {
				t.Fatal("want gcra's four timing runs")
			}
			c, err := Compare(old, new, DefaultTolerance)
			if err != nil {
				t.Fatal(err)
			}
			shown := 0
			for _, ch := range c.Changes {
				if ch.Verdict == Regressed || ch.Verdict == Improved {
					t.Errorf("%s: %s %s %s: %s, want timings shown, not gated", tt.name, ch.Limiter, ch.Workload, ch.Metric, ch.Verdict)
				}
				if ch.Limiter == "gcra" && strings.HasSuffix(ch.Metric, "× floor") {
					shown++
					if !strings.HasPrefix(ch.Delta, tt.delta) || (tt.delta == "" && ch.New != "missing") {
						t.Errorf("%s: gcra %s %s moved %q to %s, want %q", tt.name, ch.Workload, ch.Metric, ch.Delta, ch.New, tt.delta)
					}
				}
			}
			if shown != 12 {
				t.Errorf("%s: %d gcra timing rows shown, want 12", tt.name, shown)
			}
		}
	})
}

func gcra(mode string) func(Run) bool {
	return func(r Run) bool { return r.Limiter == "gcra" && r.Mode == mode }
}

// deltas are a comparison's timing changes, by limiter, workload and
// metric, leaving out those that round to nothing.
func deltas(c *Comparison) map[string]string {
	m := map[string]string{}
	for _, ch := range c.Changes {
		if strings.HasSuffix(ch.Metric, "× floor") && ch.Delta != "0.0%" {
			m[ch.Limiter+" "+ch.Workload+" "+ch.Metric] = ch.Delta
		}
	}
	return m
}

func TestCompareRefusesDuplicatesAndSkips(t *testing.T) {
	old, new := gateFiles(t)
	for _, r := range new.Runs {
		if r.Limiter == "gcra" && r.Workload == "uniform" && r.Mode == "simulated" {
			new.Runs = append(new.Runs, r)
			break
		}
	}
	_, err := Compare(old, new, DefaultTolerance)
	if !strings.Contains(fmt.Sprint(err), "twice: NEW has gcra on uniform (simulated)") {
		t.Errorf("a run twice: %v", err)
	}
	old, new = gateFiles(t)
	new.Runs = slices.DeleteFunc(new.Runs, func(r Run) bool { return r.Limiter == "gcra" && r.Workload == "bursty" })
	new.Runs = append(new.Runs, Run{Limiter: "gcra", Workload: "bursty", SkippedBecause: "the workload has no requests with these parameters"})
	_, err = Compare(old, new, DefaultTolerance)
	if !strings.Contains(fmt.Sprint(err), "skipped: NEW skipped gcra on bursty (simulated): the workload has no requests with these parameters") {
		t.Errorf("a run skipped: %v", err)
	}
}

func TestCompareWarnsOfAnotherMachine(t *testing.T) {
	old, new := gateFiles(t)
	new.Meta.CPU, new.Meta.GoVersion = "Some Other CPU", "go1.27"
	c, err := Compare(old, new, DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Write(&out, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Warning: the machines differ (OLD: AMD EPYC", "NEW: Some Other CPU", "Warning: the Go versions differ (OLD go1.26.8, NEW go1.27)", "No regression."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
