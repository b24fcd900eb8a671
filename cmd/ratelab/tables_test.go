package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/ratelab/ratelab/internal/golden"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/probe"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// Every table make bench, ratelab probe and ratelab plan print fits an
// ordinary terminal (report.TextWidth columns): the lab's, rendered from
// a lab run's results; the probe's, from a run against the plan's nginx
// (testdata/probe-results.json); the plan's, from the mobile API's log
// planned here. Each is checked against its golden, and each line's
// width measured.
func TestTerminalTablesFit(t *testing.T) {
	var mobile bytes.Buffer
	if _, err := synthlog.WriteMobile(&mobile, synthlog.Mobile{Users: 300, PerNAT: 20, Span: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	r, err := accesslog.NewReader([]accesslog.Input{{Name: "mobile.json", R: &mobile}}, accesslog.Options{Format: "caddy"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Run(context.Background(), r, plan.Config{Limits: []limiters.Limit{limiters.PerSecond(10), limiters.PerSecond(30), limiters.PerSecond(100)}, Spare: 0.001}, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) *results.File {
		f, err := results.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tt := range []struct {
		name  string
		f     *results.File
		modes report.Modes
	}{
		{"lab", read("../../plots/testdata/results.json"), modes()},
		{"probe", read("testdata/probe-results.json"), probe.Modes()},
		{"plan", p.File("mobile.json", nil), plan.Modes()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tables := report.Tables(tt.f, tt.modes)
			if len(tables) == 0 {
				t.Fatal("no tables")
			}
			for _, tb := range tables {
				if err := tb.Text(&out); err != nil {
					t.Fatal(err)
				}
				out.WriteString("\n")
			}
			for i, line := range strings.Split(out.String(), "\n") {
				if w := twwidth.Width(line); w > report.TextWidth {
					t.Errorf("line %d is %d columns, more than %d:\n%s", i+1, w, report.TextWidth, line)
				}
			}
			golden.Check(t, tt.name+"-tables.golden", out.Bytes())
		})
	}
}
