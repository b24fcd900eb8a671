package demo

import (
	"bytes"
	"strings"
	"testing"
)

// The demo's first scenes are the seed's worked examples; their results
// are the seed's, row by row.
func TestDemoScenes(t *testing.T) {
	scenes, err := Scenes()
	if err != nil {
		t.Fatal(err)
	}
	results := func(s Scene) string {
		var b strings.Builder
		for _, st := range s.Steps {
			if st.Allowed {
				b.WriteByte('A')
			} else {
				b.WriteByte('D')
			}
		}
		return b.String()
	}
	for i, want := range []string{
		"AAAAAAAAADAD",      // Example 1: 9 allowed to t=4, denied at 4.5, allowed at 5, denied at 5.5
		"AAAAAAAAAADAAAAAA", // Example 3: the burst of 10, an 11th denied, then the steady state
		"AAADAAA",           // Example 2: alice's 4th denied, bob unaffected, both refilled at t=1
	} {
		if got := results(scenes[i]); got != want {
			t.Errorf("scene %d (%s): %s, want %s", i+1, scenes[i].Title, got, want)
		}
	}
	if r := scenes[0].Steps[9].RetryAfter; r == nil || *r != 0.5 {
		t.Errorf("Example 1 at 4.5s: retry after %v, want 0.5s", r)
	}

	edge := scenes[3].Summary
	for i, row := range edge.Rows {
		want := "5"
		if row[0] == "fixed-window" {
			want = "10"
		}
		if row[3] != want || edge.Bad[i] != (want == "10") {
			t.Errorf("the window edge, %s: %s admitted in two seconds, want %s", row[0], row[3], want)
		}
	}

	hour := scenes[5].Steps
	if !hour[99].Allowed || hour[100].Allowed || hour[100].DeniedBy != "100/h" || *hour[100].RetryAfter != 3450 {
		t.Errorf("the hour: request 100 %+v, 101 %+v; want the 101st denied by 100/h until the first leaves the hour (3450s)", hour[99], hour[100])
	}
	for _, st := range hour[:100] {
		if !st.Allowed {
			t.Errorf("olga denied at %vs by %s before her hour ran out", st.At, st.DeniedBy)
		}
	}
}

func TestWrite(t *testing.T) {
	scenes, err := Scenes()
	if err != nil {
		t.Fatal(err)
	}
	var plain, colored bytes.Buffer
	if err := Write(&plain, scenes, false); err != nil {
		t.Fatal(err)
	}
	if err := Write(&colored, scenes, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("escape codes in the plain text")
	}
	if !strings.Contains(colored.String(), "\x1b[1;31mDENY") || !strings.Contains(colored.String(), "\x1b[32mALLOW") {
		t.Error("no colours in the coloured text")
	}
	for _, want := range []string{"1. A burst, then the refill", "6. Three limits at once", "⋮  96 more alike, all admitted", "fixed-window      5 of 5   5 of 5                  10  2x the limit", "100/h"} {
		if !strings.Contains(plain.String(), want) {
			t.Errorf("the demo lacks %q", want)
		}
	}
	for i, line := range strings.Split(plain.String(), "\n") {
		if len([]rune(line)) > 140 {
			t.Errorf("line %d is %d wide: %q", i+1, len([]rune(line)), line)
		}
	}
}
