package results

import (
	"bytes"
	"errors"
	"path/filepath"
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

// TestGate is the proof the gate works: it fails a run with one limiter
// made twice as slow, one with an extra allocation a decision, one with an
// accuracy count changed, and passes the same tree run again.
func TestGate(t *testing.T) {
	gcra := func(mode string) func(Run) bool {
		return func(r Run) bool { return r.Limiter == "gcra" && r.Mode == mode }
	}
	for _, tt := range []struct {
		name   string
		change func(*testing.T, *File)
		want   []string // what regressed: limiter workload metric, each a prefix
	}{
		{"noise only", func(*testing.T, *File) {}, nil},
		{"gcra twice as slow", func(t *testing.T, f *File) {
			if edit(f, gcra("timing"), func(r *Run) {
				for i := range r.Rounds {
					r.Rounds[i].ThroughputPerS /= 2
					r.Rounds[i].P50NS *= 2
					r.Rounds[i].P90NS *= 2
				}
			}) != 4 {
				t.Fatal("want gcra's four timing runs")
			}
		}, []string{
			"gcra uniform time/decision", "gcra uniform p50", "gcra uniform p90",
			"gcra bursty time/decision", "gcra bursty p50", "gcra bursty p90",
			"gcra boundary-attack time/decision", "gcra boundary-attack p50", "gcra boundary-attack p90",
			"gcra many-users time/decision", "gcra many-users p50", "gcra many-users p90",
		}},
		{"a peer twice as slow: shown, not gated", func(t *testing.T, f *File) {
			edit(f, func(r Run) bool { return r.Limiter == "go-limiter" && r.Mode == "timing" }, func(r *Run) {
				for i := range r.Rounds {
					r.Rounds[i].ThroughputPerS /= 2
				}
			})
		}, nil},
		{"the machine 1.6x slower", func(t *testing.T, f *File) {
			// Every sample, limiters' and floor's alike: the yardstick
			// slows with the machine, and the gate does not notice.
			slow := func(s *Sample) { s.ThroughputPerS /= 1.6; s.P50NS *= 1.6; s.P90NS *= 1.6 }
			edit(f, func(r Run) bool { return r.Mode == "timing" }, func(r *Run) {
				for i := range r.Rounds {
					x := &r.Rounds[i]
					slow(&x.Sample)
					if x.FloorBefore != nil {
						b, a := *x.FloorBefore, *x.FloorAfter
						slow(&b)
						slow(&a)
						x.FloorBefore, x.FloorAfter = &b, &a
					}
				}
			})
		}, nil},
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
