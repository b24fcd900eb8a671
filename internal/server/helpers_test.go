package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
)

// clock is a limiters.Clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// lines is a log writer whose lines the test reads as they come.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// running is a server started by start.
type running struct {
	*server.Server
	url    string
	hup    chan os.Signal
	log    lines
	client *http.Client
}

// start runs a server made of cfg on a free loopback port until the test
// ends, and checks that it then shuts down cleanly.
func start(t *testing.T, cfg server.Config) *running {
	t.Helper()
	r := &running{hup: make(chan os.Signal, 1), log: make(lines, 16), client: &http.Client{Timeout: 10 * time.Second}}
	if cfg.Log == nil {
		cfg.Log = log.New(r.log, "", 0)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	r.Server, r.url = s, "http://"+ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln, r.hup) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		r.client.CloseIdleConnections()
	})
	return r
}

// reply is a response, read.
type reply struct {
	status int
	header http.Header
	body   []byte
	echo   server.Echo
}

// get sends GET / with key in X-API-Key ("" for none) and the header
// fields kv (name, value, ...).
func (r *running) get(t *testing.T, key string, kv ...string) reply {
	t.Helper()
	req, err := http.NewRequest("GET", r.url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rep := reply{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &rep.echo); err != nil {
			t.Fatalf("GET / (key %q): 200 with a body that is not an echo: %v\n%s", key, err, body)
		}
	}
	return rep
}

// reloadBySignal sends SIGHUP down the server's reload channel, as
// signal.Notify would, and returns the line Run logs for it.
func (r *running) reloadBySignal(t *testing.T) string {
	t.Helper()
	r.hup <- syscall.SIGHUP
	return <-r.log
}

// writeFile writes a configuration file in the test's directory.
func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "ratelab.yaml")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func netListen(t *testing.T) (net.Listener, error) {
	t.Helper()
	return net.Listen("tcp", "127.0.0.1:0")
}

func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

func copyAll(w io.Writer, resp *http.Response) (int64, error) { return io.Copy(w, resp.Body) }

// bucket is a bucket of capacity c refilled at r a second.
func bucket(c int, r float64) limiters.Limit {
	l, err := limiters.Bucket(c, r)
	if err != nil {
		panic(err)
	}
	return l
}
