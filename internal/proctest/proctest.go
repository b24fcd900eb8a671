// Package proctest runs a server a test needs as a process of its own
// (nginx, HAProxy, Caddy): started, waited for until it answers on its
// address, stopped when the test ends. The packages of each server
// (nginxtest, haproxytest, caddytest) write its configuration and call
// Run.
package proctest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run starts cmd, stops it when t ends (SIGTERM, then a kill after 5
// s), and waits up to within for it to answer on addr. It fails t when
// the process exits first, or exits though addr answered (another took
// the free port at once, and this one could not bind), with the
// process's output and what more says (a log of its own, the
// configuration).
func Run(t testing.TB, name string, cmd *exec.Cmd, addr string, within time.Duration, more func() string) {
	t.Helper()
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	// A server's children may hold the output pipe too: stop waiting for
	// it a moment after the process is gone.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	said := func() string {
		if more == nil {
			return out.String()
		}
		return out.String() + more()
	}
	for deadline := time.Now().Add(within); ; {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			select {
			case err := <-done:
				t.Fatalf("%s exited though %s answered (another on its port?): %v\n%s", name, addr, err, said())
			case <-time.After(300 * time.Millisecond):
			}
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s exited: %v\n%s", name, err, said())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %s within %v\n%s", name, addr, within, said())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr is a loopback address no one listens on, a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Backend is the address of a server of the test's own that answers
// "ok", stopped when t ends: where a proxy under test sends what it
// admits.
func Backend(t testing.TB) string {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	t.Cleanup(app.Close)
	return app.Listener.Addr().String()
}
