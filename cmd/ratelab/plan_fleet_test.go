package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// A day of an AWS load balancer's logs from two nodes, given as a shell's
// glob gives them (576 gzipped files in name order, each 5-minute slot's
// second file starting minutes before the first one ended), is planned
// by the plain command as the same requests in one sorted file: the same
// plan, to the request, but for the log's name and its sources; its
// terminal report under 200 lines, none over 120 columns, the sources a
// row a node.
func TestPlanFleet(t *testing.T) {
	dir := t.TempDir()
	world := synthlog.ALBDay(5, 0.1)
	fleet := synthlog.Fleet{Nodes: 2, Format: "alb"}
	log, err := fleet.Write(filepath.Join(dir, "logs"), world)
	if err != nil {
		t.Fatal(err)
	}
	sorted, err := os.Create(filepath.Join(dir, "sorted.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.WriteSorted(sorted, world); err != nil {
		t.Fatal(err)
	}
	sorted.Close()
	if len(log.Files) != 576 {
		t.Fatalf("%d files; want 576, a node's every 5 minutes", len(log.Files))
	}
	plan := func(out string, logs ...string) string {
		var stdout, stderr bytes.Buffer
		args := append([]string{"plan", "--format", "alb", "--out", out}, logs...)
		if err := run(context.Background(), args, nil, &stdout, &stderr); err != nil {
			t.Fatalf("plan of %d files: %v\n%s", len(logs), err, stderr.String())
		}
		return stdout.String()
	}
	globOut, sortedOut := filepath.Join(dir, "glob"), filepath.Join(dir, "sorted")
	text := plan(globOut, log.Files...)
	plan(sortedOut, filepath.Join(dir, "sorted.log"))
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	wide := 0
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 120 {
			wide++
		}
	}
	if len(lines) >= 200 || wide > 0 {
		t.Errorf("the report of 576 files: %d lines, %d over 120 columns; want under 200, none", len(lines), wide)
	}
	for _, want := range []string{"576 files from 10.0.1.20 and 10.0.1.21", "Where it came from", "│ 10.0.1.20 │   288 │", "│ 10.0.1.21 │   288 │"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	got, want := planRows(t, globOut), planRows(t, sortedOut)
	if len(got) < 10 || !slices.Equal(got, want) {
		t.Errorf("the plan of the files (%d rows) is not the plan of the sorted log (%d rows)", len(got), len(want))
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Errorf("the first that differs:\n%s\n%s", got[i], want[i])
				break
			}
		}
	}
}

// planRows are a plan.json's rows as JSON, but for what differs between
// two reads of one log's requests: the log's name, its sources, the time
// the plan took.
func planRows(t *testing.T, dir string) []string {
	t.Helper()
	f, err := results.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range f.Rows {
		if r.Setting("kind") == "source" {
			continue
		}
		r.Workload = ""
		r.Metrics = slices.DeleteFunc(r.Metrics, func(m results.Metric) bool { return m.Name == "took" })
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}
