package results_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// gateFiles are two real quick runs of the lab on one unchanged tree, a
// couple of minutes apart on one machine (ratelab bench --quick --modes
// simulated,realtime,timing,memory --redis=false --timing-rounds 20
// --realtime 100ms), cut down to the rows the gate reads and without
// their curves: what they differ by is the noise the gate must pass.
func gateFiles(t *testing.T) (old, new *results.File) {
	t.Helper()
	var err error
	if old, err = results.ReadFile(filepath.Join("testdata", "gate-old.json")); err != nil {
		t.Fatal(err)
	}
	if new, err = results.ReadFile(filepath.Join("testdata", "gate-new.json")); err != nil {
		t.Fatal(err)
	}
	return old, new
}

// edit changes the rows of f that keep says.
func edit(f *results.File, keep func(results.Row) bool, change func(*results.Row)) int {
	n := 0
	for i := range f.Rows {
		if keep(f.Rows[i]) {
			change(&f.Rows[i])
			n++
		}
	}
	return n
}

func regressed(c *results.Comparison) []string {
	var out []string
	for _, ch := range c.Changes {
		if ch.Verdict == results.Regressed {
			out = append(out, ch.Limiter+" "+ch.Workload+" "+ch.Metric)
		}
	}
	return out
}

func plus(d float64) func(float64) float64  { return func(v float64) float64 { return v + d } }
func times(k float64) func(float64) float64 { return func(v float64) float64 { return v * k } }

// TestGate is the proof the committed half of the gate works: it fails a
// run with an extra allocation a decision, one with an accuracy count
// changed, one with a fatter limiter, and passes the same tree run again.
func TestGate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*results.File) int
		want   []string // what regressed: limiter workload metric
	}{
		{"noise only", func(*results.File) int { return 0 }, nil},
		{"an extra allocation", func(f *results.File) int {
			return edit(f, func(r results.Row) bool { return gcra("simulated")(r) && r.Workload == "bursty" }, func(r *results.Row) {
				change(r, results.AllocsPerDecision, plus(1))
			})
		}, []string{"gcra bursty allocs/decision"}},
		{"one more false allow", func(f *results.File) int {
			return edit(f, func(r results.Row) bool { return gcra("simulated")(r) && r.Workload == "uniform" }, func(r *results.Row) {
				change(r, results.FalseAllows, plus(1))
				change(r, results.Admitted, plus(1))
			})
		}, []string{"gcra uniform admitted", "gcra uniform false allows"}},
		{"allocations not measured", func(f *results.File) int {
			return edit(f, func(r results.Row) bool { return gcra("simulated")(r) && r.Workload == "many-users" }, func(r *results.Row) {
				drop(r, results.AllocsPerDecision)
			})
		}, []string{"gcra many-users allocs/decision"}},
		{"twice the allocations of made keys", func(f *results.File) int {
			return edit(f, func(r results.Row) bool {
				return r.Limiter == "fixed-window" && r.Mode == "simulated" && r.Workload == "many-users"
			}, func(r *results.Row) {
				change(r, results.AllocsPerDecision, times(2))
			})
		}, []string{"fixed-window many-users allocs/decision"}},
		{"memory not measured", func(f *results.File) int {
			return edit(f, gcra("memory"), func(r *results.Row) { set(r, results.BytesPerUser, 0) })
		}, []string{"gcra many-users bytes/user"}},
		{"a fatter limiter", func(f *results.File) int {
			return edit(f, gcra("memory"), func(r *results.Row) { change(r, results.BytesPerUser, plus(8)) })
		}, []string{"gcra many-users bytes/user"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, new := gateFiles(t)
			if n := tt.change(new); tt.want != nil && n != 1 {
				t.Fatalf("%d rows changed, want 1", n)
			}
			c, err := results.Compare(old, new, results.DefaultTolerance, gated)
			if err != nil {
				t.Fatal(err)
			}
			if got := regressed(c); !slices.Equal(got, tt.want) {
				t.Errorf("regressed %q, want %q", got, tt.want)
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

// A row whose gated metric is gone altogether is no longer a row the gate
// reads: compare fails, as for a row missing.
func TestGateFailsARowNotMeasured(t *testing.T) {
	old, new := gateFiles(t)
	edit(new, gcra("memory"), func(r *results.Row) { drop(r, results.BytesPerUser) })
	_, err := results.Compare(old, new, results.DefaultTolerance, gated)
	if err == nil || !strings.Contains(err.Error(), "only OLD has gcra on many-users (memory)") {
		t.Errorf("a memory row without its bytes: %v, want OLD's row named as missing from NEW", err)
	}
}

func TestCompareMismatch(t *testing.T) {
	old, new := gateFiles(t)
	new.Meta.Seed++
	new.Meta.Settings = maps.Clone(new.Meta.Settings)
	new.Meta.Settings["limit"] = "50/s"
	_, err := results.Compare(old, new, results.DefaultTolerance, gated)
	var mis *results.MismatchError
	if !errors.As(err, &mis) || !strings.Contains(err.Error(), "seed 1 in OLD, 2 in NEW") || !strings.Contains(err.Error(), "limit 100/s in OLD, 50/s in NEW") {
		t.Errorf("other parameters: %v", err)
	}

	old, new = gateFiles(t)
	new.Rows = slices.DeleteFunc(new.Rows, func(r results.Row) bool { return r.Limiter == "throttled" })
	new.Rows = append(new.Rows, with(results.Row{Limiter: "gcra2", Workload: "uniform", Mode: "memory"}, results.BytesPerUser, results.UnitBytes, 1))
	_, err = results.Compare(old, new, results.DefaultTolerance, gated)
	for _, want := range []string{"only OLD has throttled on uniform (simulated, judged_n=100, judged_per=1s)", "and ", "more", "only NEW has gcra2 on uniform (memory)", "refresh the baseline"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rows that do not match: %v, want it to say %q", err, want)
		}
	}
}

// slowBy makes r's samples k times slower, and its figures with them: the
// limiter's own, or with floor the harness floor's around them.
func slowBy(r *results.Row, k float64, floor bool) {
	for i := range r.Series {
		s := &r.Series[i]
		name, around := strings.CutPrefix(s.Name, results.FloorBefore)
		if !around {
			name, around = strings.CutPrefix(s.Name, results.FloorAfter)
		}
		if around != floor {
			continue
		}
		f := k
		if name == results.Throughput {
			f = 1 / k
		}
		s.Y = slices.Clone(s.Y)
		for j := range s.Y {
			s.Y[j] *= f
		}
	}
	if !floor {
		change(r, results.Throughput, times(1/k))
		change(r, results.Latency+".p50", times(k))
		change(r, results.Latency+".p90", times(k))
	}
}

// Changes compare shows but does not fail on: timings, of a peer, of the
// whole machine, of one of ratelab's limiters.
func TestGateLetsPass(t *testing.T) {
	t.Run("a peer twice as slow", func(t *testing.T) {
		old, new := gateFiles(t)
		edit(new, func(r results.Row) bool { return r.Limiter == "go-limiter" && r.Mode == "timing" }, func(r *results.Row) { slowBy(r, 2, false) })
		c, err := results.Compare(old, new, results.DefaultTolerance, gated)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range c.Changes {
			if ch.Limiter == "go-limiter" && strings.HasSuffix(ch.Metric, "× floor") {
				n++
				if ch.Verdict != results.NotGated || !strings.HasPrefix(ch.Delta, "+") {
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
		edit(new, func(r results.Row) bool { return r.Mode == "timing" }, func(r *results.Row) {
			slowBy(r, 1.6, false)
			slowBy(r, 1.6, true)
		})
		slowed, err := results.Compare(old, new, results.DefaultTolerance, gated)
		if err != nil {
			t.Fatal(err)
		}
		_, same := gateFiles(t)
		asIs, err := results.Compare(old, same, results.DefaultTolerance, gated)
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
			change func(*results.Row)
			delta  string
		}{
			{"slower", func(r *results.Row) { slowBy(r, 2, false) }, "+"},
			{"faster", func(r *results.Row) { slowBy(r, 0.5, false) }, "-"},
			{"not timed", func(r *results.Row) { r.Series = nil }, ""},
		} {
			old, new := gateFiles(t)
			if edit(new, gcra("timing"), tt.change) != 4 {
				t.Fatal("want gcra's four timing rows")
			}
			c, err := results.Compare(old, new, results.DefaultTolerance, gated)
			if err != nil {
				t.Fatal(err)
			}
			shown := 0
			for _, ch := range c.Changes {
				if ch.Verdict == results.Regressed || ch.Verdict == results.Improved {
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

func gcra(mode string) func(results.Row) bool {
	return func(r results.Row) bool { return r.Limiter == "gcra" && r.Mode == mode }
}

// deltas are a comparison's timing changes, by limiter, workload and
// metric, leaving out those that round to nothing.
func deltas(c *results.Comparison) map[string]string {
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
	for _, r := range new.Rows {
		if gcra("simulated")(r) && r.Workload == "uniform" {
			new.Rows = append(new.Rows, clone(r))
			break
		}
	}
	_, err := results.Compare(old, new, results.DefaultTolerance, gated)
	if !strings.Contains(fmt.Sprint(err), "twice: NEW has gcra on uniform (simulated, judged_n=100, judged_per=1s)") {
		t.Errorf("a row twice: %v", err)
	}
	// The lab skips a limiter on a workload in every mode at once: its
	// row names no mode.
	old, new = gateFiles(t)
	new.Rows = slices.DeleteFunc(new.Rows, func(r results.Row) bool { return r.Limiter == "gcra" && r.Workload == "bursty" })
	new.Rows = append(new.Rows, results.Row{Limiter: "gcra", Workload: "bursty", Skipped: "the workload has no requests with these parameters"})
	_, err = results.Compare(old, new, results.DefaultTolerance, gated)
	if !strings.Contains(fmt.Sprint(err), "skipped: NEW skipped gcra on bursty (simulated, judged_n=100, judged_per=1s): the workload has no requests with these parameters") {
		t.Errorf("a row skipped: %v", err)
	}
}

func TestCompareWarnsOfAnotherMachine(t *testing.T) {
	old, new := gateFiles(t)
	new.Meta.CPU, new.Meta.GoVersion = "Some Other CPU", "go1.27"
	c, err := results.Compare(old, new, results.DefaultTolerance, gated)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Write(&out, false); err != nil {
		t.Fatal(err)
	}
	said := strings.Join(strings.Fields(out.String()), " ") // as if not wrapped
	for _, want := range []string{"Warning: the machines differ (OLD: " + old.Meta.CPU, "NEW: Some Other CPU",
		"Warning: the Go versions differ (OLD " + old.Meta.GoVersion + ", NEW go1.27)", "No regression."} {
		if !strings.Contains(said, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Settings that leave the numbers comparable but differ are said, by
// name, with both values; the Redis rows' key prefix, each run's own, is
// not.
func TestCompareSaysSettingsThatDiffer(t *testing.T) {
	old, new := gateFiles(t)
	old.Meta.Settings, new.Meta.Settings = maps.Clone(old.Meta.Settings), maps.Clone(new.Meta.Settings)
	old.Meta.Settings["http-rate"], new.Meta.Settings["http-rate"] = "10000", "5000"
	old.Meta.Settings["redis-prefix"], new.Meta.Settings["redis-prefix"] = "ratelab:bench:a:", "ratelab:bench:b:"
	new.Meta.Settings["outage-away"] = "3s" // only NEW has it: not compared
	c, err := results.Compare(old, new, results.DefaultTolerance, gated)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := c.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "settings differ: http-rate 10000 in OLD, 5000 in NEW") || strings.Contains(out, "redis-prefix") || strings.Contains(out, "outage-away") {
		t.Errorf("compare says:\n%s\nwant the http rate named as differing, and nothing of the prefix or a setting one run lacks", out)
	}
	if c.Regressions() != 0 {
		t.Errorf("%d regressions from a setting alone", c.Regressions())
	}
}
