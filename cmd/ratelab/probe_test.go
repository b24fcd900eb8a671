package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/probe"
)

func TestProbeBadFlags(t *testing.T) {
	dir := t.TempDir()
	notConf, threeRules := filepath.Join(dir, "notes.txt"), filepath.Join(dir, "haproxy.cfg")
	os.WriteFile(notConf, []byte("limits: some\n"), 0o644)
	os.WriteFile(threeRules, []byte("backend t\n    stick-table type ip size 1k expire 20s store http_req_rate(1s)\n"+
		"    http-request track-sc0 src table t\n    http-request track-sc1 src table t\n    http-request track-sc2 src table t\n"+
		"    http-request deny if { sc_http_req_rate(0) gt 10 }\n    http-request deny if { sc_http_req_rate(1) gt 20 }\n    http-request deny if { sc_http_req_rate(2) gt 30 }\n"), 0o644)
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string // a part of it
	}{
		{"no URL", []string{"probe", "--key", "header:X", "--limit", "10/s"}, "probe: want one URL, got 0 arguments"},
		{"no key", []string{"probe", "--limit", "10/s", "http://127.0.0.1:1/"}, `the key "": want header:NAME, query:NAME or source`},
		{"source off loopback without addresses", []string{"probe", "--key", "source", "--limit", "10/s", "http://192.0.2.1:1/"}, "--key source needs --source"},
		{"bad source", []string{"probe", "--key", "source", "--source", "10.0.0.9-10.0.0.1", "--limit", "10/s", "http://127.0.0.1:1/"}, `--source "10.0.0.9-10.0.0.1"`},
		{"bad key", []string{"probe", "--key", "cookie:x", "--limit", "10/s", "http://127.0.0.1:1/"}, `the key "cookie:x"`},
		{"bad limit", []string{"probe", "--key", "header:X", "--limit", "ten a second", "http://127.0.0.1:1/"}, `probe: invalid value "ten a second" for flag --limit: limiters: not a rate`},
		{"second limit shorter", []string{"probe", "--key", "header:X", "--limit", "40/min, 5/s", "http://127.0.0.1:1/"}, `the second limit (5/s) must be the longer`},
		{"not a URL", []string{"probe", "--key", "header:X", "--limit", "10/s", "ftp://x"}, "want an http:// or https:// URL"},
		{"bad deny status", []string{"probe", "--key", "header:X", "--limit", "10/s", "--deny-status", "302", "http://127.0.0.1:1/"}, "a refusal is a 4xx or a 5xx"},
		{"bad header", []string{"probe", "--key", "header:X", "--header", "Authorization Bearer x", "http://127.0.0.1:1/"}, `--header "Authorization Bearer x": want "Name: value"`},
		{"bad method", []string{"probe", "--key", "header:X", "--method", "PO ST", "http://127.0.0.1:1/"}, `--method "PO ST"`},
		{"no body file", []string{"probe", "--key", "header:X", "--body", "@/nonexistent/login.json", "http://127.0.0.1:1/"}, "--body: open /nonexistent/login.json"},
		{"bad expect", []string{"probe", "--key", "header:X", "--limit", "10/s", "--expect", "bogus 10/s", "http://127.0.0.1:1/"}, `probe: --expect "bogus 10/s"`},
		{"expect a file of no product", []string{"probe", "--key", "header:X", "--expect", notConf, "http://127.0.0.1:1/"}, "not a configuration ratelab reads"},
		{"expect three rules", []string{"probe", "--key", "header:X", "--expect", threeRules, "http://127.0.0.1:1/"}, "the probe checks two at most"},
		{"bad tolerance", []string{"probe", "--key", "header:X", "--limit", "10/s", "--expect", "10/s", "--tolerance", "2", "http://127.0.0.1:1/"}, "--tolerance 2: want a fraction"},
		{"over the rate", []string{"probe", "--key", "header:X", "--limit", "50/s", "--max-rate", "100", "http://127.0.0.1:1/"}, "more than --max-rate 100"},
		{"over budget", []string{"probe", "--key", "header:X", "--limit", "10/s", "--max-requests", "50", "http://127.0.0.1:1/"}, "more than --max-requests 50"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := ratelab(t, "", tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q: want 2 and %q", code, stderr, tt.stderr)
			}
			if strings.Count(stderr, "\n") > 2 {
				t.Errorf("stderr has %d lines: want the error and where the help is", strings.Count(stderr, "\n"))
			}
		})
	}
}

// A target with nothing behind it: the probe says no request was decided,
// and why, and exits 1.
func TestProbeNothingDecided(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, stderr, code := ratelab(t, "", "probe", "--key", "header:X", "--limit", "20/s", "--out", t.TempDir(), srv.URL)
	if code != 1 || !strings.Contains(stderr, "\nratelab probe: the target decides nothing: every answer (5) was 503 Service Unavailable: the target fails every request") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// --expect, as CI uses it: a GCRA expected as a sliding log exits 1,
// naming the algorithm that strayed, after the tables and probe.json.
func TestProbeExpect(t *testing.T) {
	if testing.Short() {
		t.Skip("probes a server for a few seconds")
	}
	t.Parallel()
	srv, err := server.New(server.Config{Algorithm: limiters.GCRA, Limit: limiters.Limit{N: 20, Per: time.Second, Burst: 10}, KeyHeader: "X-User"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	out := t.TempDir()
	stdout, stderr, code := ratelab(t, "", "probe", "--key", "header:X-User", "--limit", "20/s burst 10", "--expect", "sliding-log 20/s",
		"--out", out, "http://"+ln.Addr().String()+"/")
	if code != 1 || !strings.Contains(stderr, `strays from "sliding-log 20/s"`) || !strings.Contains(stderr, "algorithm: behaves as") || !strings.Contains(stderr, "not sliding-log") {
		t.Errorf("exit %d, stderr %q: want 1, naming the algorithm", code, stderr)
	}
	for _, want := range []string{"What the target behaves as", "Accuracy against the policy", "Judged against the bucket 20/s burst 10", "boundary-attack", "Latency and pace"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	// The lab's report of it: the page, its twin and the two charts.
	for _, f := range []string{"report.html", "report.md", "charts/probe-windows.png", "charts/probe-fit.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if md, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(md), "judged from outside") || strings.Contains(string(md), "Which limiter should I pick") {
		t.Errorf("report.md: %v: want the probe's page, without the lab's picks", err)
	}
	// Fed to the next command: ratelab report draws the page again from
	// the results file.
	again := t.TempDir()
	if _, stderr, code := ratelab(t, "", "report", filepath.Join(out, "results.json"), "--out", again); code != 0 {
		t.Errorf("report of the probe's results.json: exit %d: %s", code, stderr)
	} else if _, err := os.Stat(filepath.Join(again, "report.html")); err != nil {
		t.Errorf("report of the probe's results.json: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(out, "probe.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r probe.Report
	if err := json.Unmarshal(b, &r); err != nil || r.Schema != probe.ReportSchema || len(r.Accuracy) != 4 || r.Timing.Admitted.N == 0 {
		t.Errorf("probe.json: %v; schema %d, %d workloads judged, timing %+v", err, r.Schema, len(r.Accuracy), r.Timing)
	}
}
