package main

import (
	"strings"
	"testing"
)

// bench --help names every mode the lab has, with what it measures, and
// --modes names them all too: the list comes from the modes' own
// declarations, so a new mode cannot be left out of it.
func TestBenchHelpListsModes(t *testing.T) {
	stdout, _, code := ratelab(t, "", "bench", "--help")
	if code != 0 {
		t.Fatalf("bench --help: exit %d", code)
	}
	modes := modes()
	if len(modes) < 8 {
		t.Fatalf("%d modes, want the lab's eight or more", len(modes))
	}
	flat := strings.Join(strings.Fields(stdout), " ")
	for _, m := range modes {
		listed := strings.Contains(stdout, "\t"+m.Name+" ") || strings.Contains(flat, m.About)
		switch {
		case m.Outside && listed:
			t.Errorf("bench --help lists mode %q, which bench does not run (%s)", m.Name, m.About)
		case !m.Outside && !(strings.Contains(stdout, "\t"+m.Name+" ") && strings.Contains(flat, m.About)):
			t.Errorf("bench --help lacks mode %q (%s)", m.Name, m.About)
		}
	}
	if !strings.Contains(flat, strings.Join(modeNames(), ", ")) {
		t.Errorf("--modes does not name %v:\n%s", modeNames(), stdout)
	}
}
