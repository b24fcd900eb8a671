package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServeBadFlags(t *testing.T) {
	gcra := []string{"serve", "--algo", "gcra", "--limit", "1/s burst 5"}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of it
	}{
		{"unknown flag", []string{"serve", "--colour"}, 2, "flag provided but not defined: --colour"},
		{"no algo", []string{"serve"}, 2, "serve: --algo or --config is required"},
		{"unknown algo", []string{"serve", "--algo", "magic"}, 2, `unknown algorithm "magic"`},
		{"missing limit", []string{"serve", "--algo", "gcra"}, 2, "gcra needs --limit"},
		{"window flags on a bucket", append(gcra, "--window", "1s"), 2, "serve: --window is gone: the limit is one flag, --limit N/PERIOD"},
		{"capacity flags", []string{"serve", "--algo", "gcra", "--capacity", "5", "--rate", "1"}, 2, "serve: --capacity is gone"},
		{"zero limit", []string{"serve", "--algo", "fixed-window", "--limit", "0/s"}, 2, "the count is zero"},
		{"an argument", append(gcra, "extra"), 2, `no arguments, got "extra"`},
		{"config and algo", []string{"serve", "--config", "x.yaml", "--algo", "gcra"}, 2, "--config gives the algorithm and the limits; --algo is not for it"},
		{"config with a typo", []string{"serve", "--config", "testdata/typo.yaml"}, 2, "testdata/typo.yaml:7: tiers.pro[1].nmae: unknown field"},
		{"unknown backend", append(gcra, "--backend", "etcd"), 2, `--backend "etcd": want memory or redis`},
		{"redis url in memory", append(gcra, "--redis-url", "redis://x"), 2, "--redis-url is for --backend redis"},
		{"fail in memory", append(gcra, "--fail", "closed"), 2, "--fail is for --backend redis"},
		{"bad fail", append(gcra, "--backend", "redis", "--fail", "maybe"), 2, `--fail "maybe": want open, closed or fallback`},
		{"bad redis url", append(gcra, "--backend", "redis", "--redis-url", "http://x"), 2, "--redis-url"},
		{"bad key", append(gcra, "--key", "cookie"), 2, `--key "cookie": want header or ip`},
		{"proxies without ip", append(gcra, "--trusted-proxies", "10.0.0.0/8"), 2, "--trusted-proxies is for --key ip"},
		{"key header with ip", append(gcra, "--key", "ip", "--key-header", "X-Key"), 2, "--key-header is for --key header"},
		{"bad proxy", append(gcra, "--key", "ip", "--trusted-proxies", "10.0.0.0/33"), 2, "trusted proxy 1 of 1"},
		{"bad key header", append(gcra, "--key-header", "X Key"), 2, "not a header name"},
		{"bad headers", append(gcra, "--headers", "some"), 2, `--headers "some": want all, legacy, draft or none`},
		{"echo cost without a settle header", append(gcra, "--echo-cost", "5"), 2, "--echo-cost is the cost the echo reports in --settle-header: give both"},
		{"negative key cap", append(gcra, "--max-keys", "-1"), 2, "--max-keys -1: want 0 (no cap) or more"},
		{"bad echo cost", append(gcra, "--settle-header", "X-Tokens", "--echo-cost", "lots"), 2, `echo cost "lots": want a number, 0 or more, or random`},
		{"bad addr", append(gcra, "--addr", "nowhere"), 1, "serve: listen tcp: address nowhere"},
		{"redis down", append(gcra, "--backend", "redis", "--redis-url", "redis://127.0.0.1:1/0"), 1, "no answer from Redis at 127.0.0.1:1"},
		{"bad sentinel url", append(gcra, "--backend", "redis", "--redis-url", "redis://127.0.0.1:1?master_name=m&colour=red"), 2, "--redis-url (Sentinels): redis: unexpected option: colour"},
		{"sentinels down", append(gcra, "--backend", "redis", "--redis-url", "redis://127.0.0.1:1?master_name=mymaster"), 1, `no answer from Redis (master "mymaster" of the Sentinels at 127.0.0.1:1)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := ratelab(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.stderr)
			}
			if tt.code == 2 && !strings.Contains(tt.name, "config with") && !strings.HasSuffix(errOut, "\nsee 'ratelab serve --help'\n") {
				t.Errorf("stderr %q: want where the help is", errOut)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	out, _, code := ratelab(t, "", "help", "serve")
	if code != 0 || !strings.Contains(out, "ratelab serve --config FILE") {
		t.Errorf("help serve: exit %d, output %q", code, out)
	}
}

// TestServe runs the command on a free port, as a person would, until
// its context ends (as on SIGINT).
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errOut strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--algo", "fixed-window", "--limit", "3/h", "--key-header", "X-User"},
			strings.NewReader(""), pw, &errOut)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the address: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "ratelab serve: listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("first line %q: want the address listened on", line)
	}
	req, _ := http.NewRequest("GET", url+"/anything", nil)
	req.Header.Set("X-User", "carol")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var echo struct {
		Key       string `json:"key"`
		Limit     int    `json:"limit"`
		Remaining int    `json:"remaining"`
	}
	err = json.NewDecoder(resp.Body).Decode(&echo)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || echo.Key != "carol" || echo.Limit != 3 || echo.Remaining != 2 {
		t.Errorf("GET: status %d, echo %+v (%v): want 200, carol, limit 3, remaining 2", resp.StatusCode, echo, err)
	}
	if got := resp.Header.Get("Ratelimit-Policy"); got != `"3/h";q=3;w=3600` { // named after its rate
		t.Errorf("RateLimit-Policy %q, want the flags' limit", got)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if !strings.Contains(errOut.String(), "shutting down") {
		t.Errorf("stderr %q: want the shutdown said", errOut.String())
	}
}
