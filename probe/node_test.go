package probe

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeOnce installs the npm limiters once for the test binary.
var nodeOnce struct {
	sync.Once
	err error
}

// startNode starts the npm limiters of testdata/node (server.js, with
// windows of w seconds) on a free loopback port and returns its base URL;
// it is stopped when the test ends. Without Node.js and npm the test is
// skipped, unless NODE_REQUIRED is set (make test-clocked installs them,
// and sets it). The packages come from npm's registry, at the versions
// package-lock.json pins, into testdata/node/node_modules.
func startNode(t *testing.T, w int) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("NODE_REQUIRED") != "" {
			t.Fatalf("Node.js or npm is not installed, and NODE_REQUIRED is set: %v", err)
		}
		t.Skip("Node.js and npm are not installed (make test-clocked installs Debian's nodejs and npm)")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	nodeOnce.Do(func() {
		// --ignore-scripts: the one install script is microtime's, which
		// ships a prebuilt binary.
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeOnce.err = err
			t.Logf("npm ci: %s", out)
		}
	})
	switch {
	case nodeOnce.err != nil && os.Getenv("NODE_REQUIRED") != "":
		t.Fatalf("npm ci in %s: %v", dir, nodeOnce.err)
	case nodeOnce.err != nil:
		t.Skipf("npm ci in %s: %v (no registry to install npm's limiters from; make test-clocked requires them)", dir, nodeOnce.err)
	}
	cmd := exec.Command(node, "server.js", "--port", "0", "--window", strconv.Itoa(w))
	cmd.Dir = dir
	// The server exits when its standard input closes: a test binary that
	// dies leaves none running.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if url, found := strings.CutPrefix(line, "listening "); ok && found {
			return url
		}
		t.Fatalf("server.js said %q, not where it listens", line)
	case <-time.After(20 * time.Second):
		t.Fatal("server.js did not listen within 20s")
	}
	return ""
}

// npm's limiters, probed with no policy (their windows 2 seconds long, to
// keep the tests short): each named right, its own fields read and
// checked against what it does, and a composite of two limiters named as
// none of the six.
func TestProbeNode(t *testing.T) {
	if testing.Short() {
		t.Skip("probes npm's limiters for up to a minute each")
	}
	t.Parallel()
	base := startNode(t, 2)
	for _, tt := range []struct {
		path  string
		want  string // "" for none of the six
		check func(t testing.TB, r *Report)
	}{
		// rate-limiter-flexible's fixed window from a key's first request,
		// with the fields its README sets: a fractional Retry-After and
		// an epoch reset rounded up.
		{"/rlf/memory", "fixed-window 20/2s, windows from a key's first request", func(t testing.TB, r *Report) {
			honest(t, r, true)
		}},
		{"/fastify/default", "fixed-window 20/2s, windows from a key's first request", func(t testing.TB, r *Report) {
			honest(t, r, true)
		}},
		{"/fastify/continue", "fixed-window 20/2s, windows from a key's first request, a refusal restarts the window", func(t testing.TB, r *Report) {
			honest(t, r, false)
		}},
		// express-rate-limit with the IETF draft's structured fields, in
		// the current draft's form and the seventh's.
		{"/express/draft8", "fixed-window 20/2s, windows from a key's first request", func(t testing.TB, r *Report) {
			honest(t, r, true)
			if r.Claims.PolicyFrom != "RateLimit-Policy" {
				t.Errorf("claims %+v: want the policy read off RateLimit-Policy", r.Claims)
			}
		}},
		{"/express/draft7", "fixed-window 20/2s, windows from a key's first request", func(t testing.TB, r *Report) {
			honest(t, r, true)
		}},
		{"/limiter/bucket", "gcra 10/s burst 20", nil},
		{"/rolling/log", "sliding-log 20/2s, refusals counted", nil},
		{"/pacer/sliding", "sliding-log 20/2s", nil},
		// Two of rate-limiter-flexible's windows, the second used when the
		// first refuses: no one of the six.
		{"/rlf/bursty", "", nil},
	} {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			t.Parallel()
			probeChecked(t, Target{URL: base + tt.path, Key: byUser}, 2*time.Minute, func(t testing.TB, r *Report) {
				if tt.want == "" {
					if r.Verdict.Named {
						t.Errorf("named %s, want none of the six", r.Verdict.Text)
					}
				} else {
					named(t, r, tt.want, time.Minute)
				}
				if r.Concurrency.OverAdmits() || !r.Keys.Isolated {
					t.Errorf("concurrency %+v, keys %+v: want no over-admission, and keys apart", r.Concurrency, r.Keys)
				}
				if tt.check != nil {
					tt.check(t, r)
				}
			})
		})
	}
}

// honest checks that r's fields tell the truth: a declared policy that
// agrees, a remaining quota that is exact, and waits that do not lie
// (and, if remains, that a refused key's wait is not longer than needed
// either).
func honest(t testing.TB, r *Report, exactWait bool) {
	t.Helper()
	if r.Verdict.Declared != "" || declaredVerdict(r) != "agrees" || r.Remaining.Verdict != "exact" || len(r.Headers.Malformed) != 0 {
		t.Errorf("declared %q (%q), remaining %+v, malformed %q: want agreeing, exact and none", r.Claims.PolicyText, r.Verdict.Declared, r.Remaining, r.Headers.Malformed)
	}
	for _, ra := range r.RetryAfter {
		if ra.Lies() || ra.Header == "" || (exactWait && !strings.HasPrefix(ra.Verdict, "honest")) {
			t.Errorf("Retry-After %+v: want an honest wait", ra)
		}
	}
}
