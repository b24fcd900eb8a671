// Package nginxtest starts Debian's nginx for a test: on a free loopback
// port, with a configuration the test writes, in a folder of its own,
// stopped when the test ends. It never touches a system nginx.
package nginxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/proctest"
)

// Binary is nginx's path, or "" when it is not installed; then, if
// NGINX_REQUIRED is set (make test-clocked installs nginx, and sets it),
// the test fails.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("NGINX_REQUIRED") != "" {
			t.Fatalf("nginx is not installed, and NGINX_REQUIRED is set: %v", err)
		}
		return ""
	}
	return bin
}

// Temps are an http block's lines that keep nginx's temporary files in
// dir, a folder of the test's own.
func Temps(dir string) string {
	return fmt.Sprintf("\tclient_body_temp_path %[1]s/body;\n\tproxy_temp_path %[1]s/proxy;\n\tfastcgi_temp_path %[1]s/fastcgi;\n\tuwsgi_temp_path %[1]s/uwsgi;\n\tscgi_temp_path %[1]s/scgi;\n", dir)
}

// head is the start of every configuration Start writes: the folder's
// pid file, error log and temporary paths. Conf's text follows it.
const head = `daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
`

// Start starts nginx with the configuration conf(dir, port) returns (the
// events block and what is above it are written for it: conf begins with
// http, and Temps(dir) belongs in it), serving dir/www, where each of
// files (a path under www) holds "ok". It returns nginx's base URL.
// Without nginx the test is skipped (Binary).
func Start(t testing.TB, conf func(dir string, port int) string, files ...string) string {
	t.Helper()
	bin := Binary(t)
	if bin == "" {
		t.Skip("nginx is not installed (make test-clocked installs Debian's nginx-light)")
	}
	dir := site(t, files)
	addr := proctest.FreeAddr(t)
	_, portText, _ := strings.Cut(addr, ":")
	port, _ := strconv.Atoi(portText)
	path := filepath.Join(dir, "nginx.conf")
	text := fmt.Sprintf(head, dir) + conf(dir, port)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	// SIGTERM at the end is nginx's fast shutdown: workers and master.
	proctest.Run(t, "nginx", cmd, addr, 10*time.Second, func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(log) + "\n" + text
	})
	return "http://" + addr
}

// site is a fresh folder for an nginx, with files below its www, each
// answering "ok", removed when t ends. nginx's workers run as nobody: the
// folder must be readable by all.
func site(t testing.TB, files []string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ratelab-nginx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, f := range files {
		path := filepath.Join(dir, "www", f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("ok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
