// Package caddytest runs a Caddy built with the rate_limit plugin (make
// test-clocked's tools/with-caddy builds it and names it in CADDY) for a
// test, with a Caddyfile it was given whole (the plan's): its site moved
// to a free loopback port, its reverse proxy to a server of the test's
// own that answers "ok", its admin endpoint off, stopped when the test
// ends.
package caddytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/proctest"
)

// Binary is the Caddy CADDY names, or "" when it names none; then, if
// CADDY_REQUIRED is set, the test fails.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("CADDY")
	if bin == "" {
		if os.Getenv("CADDY_REQUIRED") != "" {
			t.Fatal("CADDY_REQUIRED is set and CADDY names no Caddy")
		}
		return ""
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("CADDY=%s: %v", bin, err)
	}
	return bin
}

var (
	siteLine  = regexp.MustCompile(`(?m)^http://:\d+ \{$`)
	bindLine  = regexp.MustCompile(`(?m)^\s*bind \S+\n`)
	proxyLine = regexp.MustCompile(`(?m)^(\s*reverse_proxy )\S+`)
	global    = regexp.MustCompile(`(?m)^\{\n`)
)

// Validate runs caddy validate on caddyfile and returns what it said, and
// whether it passed. Without Caddy the test is skipped.
func Validate(t testing.TB, caddyfile string) (string, bool) {
	t.Helper()
	bin := Binary(t)
	if bin == "" {
		t.Skip("no Caddy with the rate_limit plugin (make test-clocked builds one: tools/with-caddy)")
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	return string(out), err == nil
}

// Start runs Caddy with caddyfile and returns the site's base URL.
// Without Caddy the test is skipped.
func Start(t testing.TB, caddyfile string) string {
	t.Helper()
	bin := Binary(t)
	if bin == "" {
		t.Skip("no Caddy with the rate_limit plugin (make test-clocked builds one: tools/with-caddy)")
	}
	if !siteLine.MatchString(caddyfile) || !proxyLine.MatchString(caddyfile) || !global.MatchString(caddyfile) {
		t.Fatalf("the Caddyfile has no http:// site, reverse_proxy or global options:\n%s", caddyfile)
	}
	addr := proctest.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	conf := bindLine.ReplaceAllString(caddyfile, "")
	conf = siteLine.ReplaceAllString(conf, fmt.Sprintf("http://:%s {\n\tbind 127.0.0.1", port))
	conf = proxyLine.ReplaceAllString(conf, "${1}"+proctest.Backend(t))
	conf = global.ReplaceAllString(conf, "{\n\tadmin off\n\tpersist_config off\n")
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	proctest.Run(t, "caddy", cmd, addr, 15*time.Second, func() string { return conf })
	return "http://" + addr
}
