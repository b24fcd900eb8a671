package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeBadFlags(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string // a part of it
	}{
		{"no URL", []string{"probe", "--key", "header:X", "--policy", "10/s"}, "probe: want one URL, got 0 arguments"},
		{"no key", []string{"probe", "--policy", "10/s", "http://127.0.0.1:1/"}, `the key "": want header:NAME or query:NAME`},
		{"bad key", []string{"probe", "--key", "cookie:x", "--policy", "10/s", "http://127.0.0.1:1/"}, `the key "cookie:x"`},
		{"no policy", []string{"probe", "--key", "header:X", "http://127.0.0.1:1/"}, "probe: --policy:"},
		{"bad policy", []string{"probe", "--key", "header:X", "--policy", "ten a second", "http://127.0.0.1:1/"}, "probe: --policy:"},
		{"not a URL", []string{"probe", "--key", "header:X", "--policy", "10/s", "ftp://x"}, "want an http:// or https:// URL"},
		{"bad deny status", []string{"probe", "--key", "header:X", "--policy", "10/s", "--deny-status", "503", "http://127.0.0.1:1/"}, "a refusal is a 4xx"},
		{"over budget", []string{"probe", "--key", "header:X", "--policy", "10/s", "--max-requests", "50", "http://127.0.0.1:1/"}, "more than --max-requests 50"},
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
	_, stderr, code := ratelab(t, "", "probe", "--key", "header:X", "--policy", "20/s", "--out", t.TempDir(), srv.URL)
	if code != 1 || !strings.Contains(stderr, "the target decides nothing: the first 20 answers were all errors or 5xx (the first answered 503)") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
