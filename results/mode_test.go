package results_test

import (
	"cmp"
	"slices"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// The modes the tests are given are the lab's (harness.Modes), in their
// Order, then the tests' own; Named finds each, and only those.
func TestModes(t *testing.T) {
	var names []string
	for _, m := range modes {
		names = append(names, m.Name)
	}
	want := []string{"simulated", "realtime", "memory", "timing", "http", "fleet", "llm", "outage", checksMode, tablesMode}
	if !slices.Equal(names, want) {
		t.Errorf("modes = %q, want %q", names, want)
	}
	if !slices.IsSortedFunc(gated, func(a, b results.Mode) int { return cmp.Compare(a.Order, b.Order) }) {
		t.Error("modes are not in their Order")
	}
	scored := map[string]bool{"simulated": true, "realtime": true, "memory": true}
	for _, name := range want {
		m, ok := gated.Named(name)
		if !ok || m.Name != name || m.Scored != scored[name] {
			t.Errorf("Named(%q) = %q (scored %v), %v; want it, scored %v", name, m.Name, m.Scored, ok, scored[name])
		}
	}
	if m, ok := gated.Named("nope"); ok {
		t.Errorf("Named(nope) = %+v, true; want none", m)
	}
	// Each name once: two files declaring one mode are a bug.
	seen := map[string]bool{}
	for _, m := range modes {
		if seen[m.Name] {
			t.Errorf("mode %q is declared twice", m.Name)
		}
		seen[m.Name] = true
	}
}

func TestRowsOf(t *testing.T) {
	f := &results.File{Rows: []results.Row{
		{Mode: "memory", Limiter: "a"}, {Mode: "timing", Limiter: "b"}, {Mode: "memory", Limiter: "c", Skipped: "why"}, {Limiter: "d", Skipped: "why"},
	}}
	var got []string
	for _, r := range f.RowsOf("memory") {
		got = append(got, r.Limiter)
	}
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("RowsOf(memory) = %q, want a and c, measured or skipped, in order", got)
	}
	if rows := f.RowsOf("llm"); len(rows) != 0 {
		t.Errorf("RowsOf(llm) = %+v, want none", rows)
	}
}
