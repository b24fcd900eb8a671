package results_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
)

// The modes are those the harness registers, and the tests' own, in
// their Order.
func TestModes(t *testing.T) {
	var names []string
	for _, m := range results.Modes() {
		names = append(names, m.Name)
	}
	want := []string{"simulated", "realtime", "memory", "timing", "http", "fleet", "llm", "outage", checksMode, tablesMode}
	if !slices.Equal(names, want) {
		t.Errorf("Modes = %q, want %q", names, want)
	}
	if !slices.IsSortedFunc(results.Modes(), func(a, b results.Mode) int { return cmp.Compare(a.Order, b.Order) }) {
		t.Error("Modes are not in their Order")
	}
	scored := map[string]bool{"simulated": true, "realtime": true, "memory": true}
	for _, name := range want {
		m, ok := results.ModeNamed(name)
		if !ok || m.Name != name || m.Scored != scored[name] {
			t.Errorf("ModeNamed(%q) = %q (scored %v), %v; want it, scored %v", name, m.Name, m.Scored, ok, scored[name])
		}
	}
	if m, ok := results.ModeNamed("nope"); ok {
		t.Errorf("ModeNamed(nope) = %+v, true; want none", m)
	}
	// What Modes returns is a copy: changing it changes no mode.
	ms := results.Modes()
	ms[0].Name = "changed"
	if results.Modes()[0].Name != "simulated" {
		t.Error("Modes returned the registry itself")
	}
}

func TestRegisterRefusesTwice(t *testing.T) {
	before := len(results.Modes())
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), `mode "simulated" registered twice`) {
			t.Errorf("registering simulated again: panic %v, want one naming it", p)
		}
		if n := len(results.Modes()); n != before {
			t.Errorf("%d modes after a refused Register, want %d", n, before)
		}
	}()
	results.Register(results.Mode{Name: "simulated"})
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
