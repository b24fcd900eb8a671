// Package haproxytest starts Debian's HAProxy for a test with a
// configuration the test was given whole (the plan's haproxy.cfg): bound
// to a free loopback port, its backend a server of the test's own that
// answers "ok", stopped when the test ends. It never touches a system
// HAProxy.
package haproxytest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
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
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	t.Cleanup(app.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg = bindLine.ReplaceAllString(cfg, "${1}"+addr)
	cfg = serverLine.ReplaceAllString(cfg, "${1}"+app.Listener.Addr().String())
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// -db: in the foreground, as the test's child; -W is not asked, one
	// process.
	cmd := exec.Command(bin, "-db", "-f", path)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // HAProxy's hard stop
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			// Its own HAProxy that answered, not another that took the
			// free port at once (this one then failed to bind).
			select {
			case err := <-done:
				t.Fatalf("haproxy exited though %s answered (another on its port?): %v\n%s", addr, err, out)
			case <-time.After(300 * time.Millisecond):
			}
			return "http://" + addr
		}
		select {
		case err := <-done:
			t.Fatalf("haproxy exited: %v\n%s\n%s", err, out, cfg)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not answer on %s within 10s\n%s", addr, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
