// Package haproxytest starts Debian's HAProxy for a test with a
// configuration the test was given whole (the plan's haproxy.cfg): bound
// to a free loopback port, its backend a server of the test's own that
// answers "ok", stopped when the test ends. It never touches a system
// HAProxy.
package haproxytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/proctest"
)

// Binary is haproxy's path, or "" when it is not installed; then, if
// HAPROXY_REQUIRED is set (make test-clocked installs HAProxy, and sets
// it), the test fails.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin = "/usr/sbin/haproxy"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("HAPROXY_REQUIRED") != "" {
			t.Fatalf("haproxy is not installed, and HAPROXY_REQUIRED is set: %v", err)
		}
		return ""
	}
	return bin
}

var (
	bindLine   = regexp.MustCompile(`(?m)^(\s*bind )\S+`)
	serverLine = regexp.MustCompile(`(?m)^(\s*server \S+ )\S+`)
)

// Start runs HAProxy with cfg, a whole haproxy.cfg, its first bind moved
// to a free loopback port and its servers to one of the test's own, as a
// person running it would edit them; it returns the frontend's base URL.
// Without HAProxy the test is skipped (Binary).
func Start(t testing.TB, cfg string) string {
	t.Helper()
	bin := Binary(t)
	if bin == "" {
		t.Skip("haproxy is not installed (make test-clocked installs Debian's haproxy)")
	}
	if !bindLine.MatchString(cfg) || !serverLine.MatchString(cfg) {
		t.Fatalf("haproxy.cfg has no bind or no server line:\n%s", cfg)
	}
	addr := proctest.FreeAddr(t)
	cfg = bindLine.ReplaceAllString(cfg, "${1}"+addr)
	cfg = serverLine.ReplaceAllString(cfg, "${1}"+proctest.Backend(t))
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// -db: in the foreground, as the test's child, one process.
	proctest.Run(t, "haproxy", exec.Command(bin, "-db", "-f", path), addr, 10*time.Second, func() string { return cfg })
	return "http://" + addr
}
