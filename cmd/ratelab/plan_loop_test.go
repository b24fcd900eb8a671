package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/caddytest"
	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/internal/haproxytest"
	"github.com/ratelab/ratelab/internal/nginxtest"
	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/gcra"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// loopLog writes the mobile API's log in a tenth of its time (each client
// ten times as fast, so that its policy is probed in a minute, not ten;
// 10 users behind each NAT address, so that their tier is one a probe can
// press: with 100 behind each it was 100/s burst 940, which under make
// test-clocked's load a probe could not; now every key's bucket, 20/s
// burst 38, spares them as it is, and the tier is the same), plans it as
// a user would, --format caddy --emit nginx,ratelab,haproxy,caddy, and returns the
// log's path, the plan's folder and its two policies: every key's bucket
// and the shared keys' tier, read back from tiers.yaml.
func loopLog(t *testing.T) (log, out string, users, shared limiters.Limit) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "mobile.json")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synthlog.WriteMobile(f, synthlog.Mobile{Scale: 10, PerNAT: 10}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "plan")
	if _, stderr, code := ratelab(t, "", "plan", "--format", "caddy", "--emit", "nginx,ratelab,haproxy,caddy", "--out", out, log); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	c, err := config.Load(filepath.Join(out, "tiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tiers.Tiers["users"]) != 1 || len(c.Tiers.Tiers["shared"]) != 1 {
		t.Fatalf("tiers.yaml: %+v: want a bucket for users and one for shared", c.Tiers.Tiers)
	}
	return log, out, c.Tiers.Tiers["users"][0], c.Tiers.Tiers["shared"][0]
}

// startEmitted starts nginx with the plan's nginx.conf as a person pastes
// it: its first part in the http block, its limit_req lines in the one
// location; edit changes the text first (nil: none).
func startEmitted(t *testing.T, emitted string, edit func(string) string) string {
	t.Helper()
	if edit != nil {
		emitted = edit(emitted)
	}
	httpPart, location, ok := strings.Cut(emitted, "# In the server or location:")
	if !ok {
		t.Fatalf("nginx.conf has no limit_req lines:\n%s", emitted)
	}
	return nginxtest.Start(t, func(dir string, port int) string {
		return fmt.Sprintf(`http {
	access_log off;
%[5]s%[3]s
	server {
		listen 127.0.0.1:%[2]d;
		root %[1]s/www;
		location / {
%[4]s
		}
	}
}
`, dir, port, httpPart, location, nginxtest.Temps(dir))
	}, "index.html")
}

// probeExpects probes url as a user keyed by address would, expecting
// want (one bucket: not looking for a second), and returns the exit code
// and the verdict's line.
func probeExpects(t *testing.T, url string, want limiters.Limit) (int, string) {
	t.Helper()
	return probeExpectsAll(t, url, "gcra "+want.String(), "--look", "0s")
}

// probeExpectsAll is probeExpects of want as --expect writes it, with
// more flags.
func probeExpectsAll(t *testing.T, url, want string, flags ...string) (int, string) {
	t.Helper()
	args := append([]string{"probe", "--key", "source", "--expect", want, "--out", t.TempDir()}, flags...)
	stdout, stderr, code := ratelab(t, "", append(args, url)...)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	t.Logf("ratelab probe --expect %q: exit %d: %s\n%s", want, code, lines[len(lines)-1], stderr)
	return code, lines[len(lines)-1]
}

// asShared puts the probe's addresses (127.0.0.2 to 127.0.0.254) where
// the shared keys are listed: an nginx map's entries, or a tier file's
// users; the policy lines are left as emitted.
func asShared(emitted string) string {
	entry := regexp.MustCompile(`(?m)^    "[0-9.]+" 1;$`)
	seen := false
	return entry.ReplaceAllStringFunc(emitted, func(string) string {
		if seen {
			return ""
		}
		seen = true
		return `    "~^127\.0\.0\." 1;`
	})
}

// The loop closed: the plan's nginx configuration, pasted into an nginx,
// is the policy the plan says, as ratelab probe measures it from outside
// (--expect passes for every key's bucket and for the shared keys'
// tier); the same burst written without nginx's one more is not (the
// check can fail); ratelab serve --config with the plan's tier file is
// the same policy; and a slice of the log sent to the nginx as logged
// is refused for the clients the plan says, no other.
func TestPlanEmittedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("probes nginx and ratelab serve for a few minutes")
	}
	t.Parallel()
	log, out, users, shared := loopLog(t)
	emitted, err := os.ReadFile(filepath.Join(out, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan: every key %s, the shared keys %s\n%s", users, shared, emitted)
	t.Run("nginx windows", func(t *testing.T) {
		// The two windows as nginx writes them, two zones on one
		// location: both named, as --expect the pair says. Alone, before
		// the others (two probes at 45 a second beside five more made
		// ratelab serve's burst of 76 take a refill, and its check fail).
		windows, err := os.ReadFile(filepath.Join(out, "nginx-windows.conf"))
		if err != nil {
			t.Fatal(err)
		}
		read, err := products.Nginx{}.Read(windows, "nginx-windows.conf", accesslog.KeySpec{})
		if err != nil {
			t.Fatal(err)
		}
		if len(read.Rules) != 2 {
			t.Fatalf("nginx-windows.conf: %v, want two buckets", read.Rules)
		}
		pair := []limiters.Limit{read.Rules[0].(products.NginxRule).Enforced, read.Rules[1].(products.NginxRule).Enforced}
		// --expect of the file itself: its two zones, as the probe finds
		// nginx keep them.
		want := filepath.Join(out, "nginx-windows.conf")
		base := startEmitted(t, string(windows), nil)
		if code, said := probeExpectsAll(t, base+"/", want, "--max-requests", "3000"); code != 0 {
			t.Errorf("nginx-windows.conf as emitted, --expect %s: exit %d\n%s", want, code, said)
		}
		// Another nginx: keyed by address, the first probe's are spent.
		wrong := fmt.Sprintf("gcra %s, gcra %s", pair[0], limiters.Limit{N: pair[1].N * 2, Per: pair[1].Per, Burst: pair[1].Burst * 2})
		if code, said := probeExpectsAll(t, startEmitted(t, string(windows), nil)+"/", wrong, "--max-requests", "3000"); code != 1 {
			t.Errorf("nginx-windows.conf as emitted, --expect %s (the second doubled): exit %d, want 1\n%s", wrong, code, said)
		}
	})
	t.Run("nginx", func(t *testing.T) {
		t.Parallel()
		base := startEmitted(t, string(emitted), nil)
		if code, said := probeExpects(t, base+"/", users); code != 0 {
			t.Errorf("nginx as emitted, --expect %s: exit %d\n%s", users, code, said)
		}
	})
	t.Run("nginx shared tier", func(t *testing.T) {
		t.Parallel()
		base := startEmitted(t, string(emitted), asShared)
		if code, said := probeExpects(t, base+"/", shared); code != 0 {
			t.Errorf("nginx as emitted, the shared tier, --expect %s: exit %d\n%s", shared, code, said)
		}
	})
	t.Run("nginx without the +1", func(t *testing.T) {
		t.Parallel()
		wrong := func(s string) string {
			return strings.Replace(s, fmt.Sprintf("burst=%d nodelay", users.Burst-1), fmt.Sprintf("burst=%d nodelay", users.Burst), 1)
		}
		base := startEmitted(t, string(emitted), wrong)
		if code, said := probeExpects(t, base+"/", users); code != 1 {
			t.Errorf("nginx with burst=%d, --expect %s: exit %d, want 1 (strays)\n%s", users.Burst, users, code, said)
		}
	})
	for _, tier := range []struct {
		name string
		want limiters.Limit
		edit func(string) string
	}{
		{"serve", users, nil},
		{"serve shared tier", shared, func(s string) string {
			s, _, _ = strings.Cut(s, "users:\n")
			var b strings.Builder
			b.WriteString(s + "users:\n")
			for i := 2; i <= 254; i++ {
				fmt.Fprintf(&b, "  \"127.0.0.%d\": shared\n", i)
			}
			return b.String()
		}},
	} {
		t.Run(tier.name, func(t *testing.T) {
			t.Parallel()
			file, err := os.ReadFile(filepath.Join(out, "tiers.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if tier.edit != nil {
				file = []byte(tier.edit(string(file)))
			}
			path := filepath.Join(t.TempDir(), "tiers.yaml")
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			srv, err := server.New(server.Config{File: path, ClientIP: true})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			if code, said := probeExpects(t, "http://"+ln.Addr().String()+"/", tier.want); code != 0 {
				t.Errorf("ratelab serve --config tiers.yaml, --expect %s: exit %d\n%s", tier.want, code, said)
			}
		})
	}
	productsLooped(t, log, out)
	t.Run("replayed", func(t *testing.T) {
		t.Parallel()
		base := startEmitted(t, string(emitted), nil)
		l, err := gcra.New(users)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		replayAgainst(t, log, base, "the plan's bucket", func(key string, at time.Time) bool {
			d, _ := l.Decide(context.Background(), limiters.Request{Key: key, N: 1, At: at})
			return d.Allowed
		})
	})
}

// replayAgainst sends a slice of log to base as it was logged (each
// client from an address of its own, its requests in order at their
// logged times from the slice's start) and checks that the server
// refuses the clients that admits (what, the policy's decisions) refuses
// of the same requests, and no other.
func replayAgainst(t *testing.T, log, base, what string, admits func(key string, at time.Time) bool) {
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := accesslog.NewReader([]accesslog.Input{{Name: "mobile.json", R: f}}, accesslog.Options{Format: "caddy"})
	if err != nil {
		t.Fatal(err)
	}
	// The slice: 12 s from a minute in, when the stuck app retries, the
	// crawler and a scraper send; the shared addresses left out (their
	// tier is probed above), at most 200 clients (the loopback
	// addresses a test has).
	const from, span = 60 * time.Second, 12 * time.Second
	type sent struct {
		at  time.Duration
		key string
	}
	var slice []sent
	addr := map[string]string{}
	var first int64
	for {
		e, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = e.At
		}
		at := time.Duration(e.At-first) - from
		if at < 0 || strings.HasPrefix(e.Key, "100.64.") {
			continue
		}
		if at >= span {
			break
		}
		if _, ok := addr[e.Key]; !ok {
			if len(addr) == 200 {
				continue
			}
			addr[e.Key] = fmt.Sprintf("127.0.1.%d", len(addr)+1)
		}
		slice = append(slice, sent{at, e.Key})
	}
	// What the plan's policy refuses of them, decided.
	t0 := time.Unix(1_800_000_000, 0)
	predicted := map[string]int{}
	for _, s := range slice {
		if !admits(s.key, t0.Add(s.at)) {
			predicted[s.key]++
		}
	}
	// Sent: each client in turn over its own connection.
	byKey := map[string][]time.Duration{}
	for _, s := range slice {
		byKey[s.key] = append(byKey[s.key], s.at)
	}
	start := time.Now().Add(200 * time.Millisecond)
	var mu sync.Mutex
	refused, failed := map[string]int{}, 0
	var wg sync.WaitGroup
	for key, ats := range byKey {
		wg.Go(func() {
			local, _ := net.ResolveTCPAddr("tcp", addr[key]+":0")
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: local}).DialContext}}
			defer client.CloseIdleConnections()
			for _, at := range ats {
				time.Sleep(time.Until(start.Add(at)))
				resp, err := client.Get(base + "/")
				mu.Lock()
				switch {
				case err != nil:
					failed++
				case resp.StatusCode == http.StatusTooManyRequests:
					refused[key]++
				}
				mu.Unlock()
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if failed > 0 {
		t.Fatalf("%d of %d requests failed", failed, len(slice))
	}
	keys := func(m map[string]int) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	t.Logf("replayed %d requests of %d clients over %v: the server refused %v, %s %v", len(slice), len(byKey), span, refused, what, predicted)
	if !slices.Equal(keys(refused), keys(predicted)) {
		t.Errorf("the server refused %v; %s, deciding the same requests, refuses %v", keys(refused), what, keys(predicted))
	}
	if len(predicted) == 0 {
		t.Errorf("the slice holds no client %s refuses: it tells nothing", what)
	}
}

// productsLooped runs the plan's haproxy.cfg in HAProxy and its Caddyfile
// in Caddy with the plugin, bound and backed as a person running them
// edits them, and probes each from outside with the --expect its comment
// gives, alone (beside the others' probes at 45 a second, the fits
// blurred), eight tries at most (HAProxy alone was as expected in 11 of
// 26 tries, the others "cannot tell apart" freq_ctr from a sliding log:
// five tries all missed one run in 16, eight one in 80);
// then each with its first limit doubled,
// which it is not, beside the others; and a slice of the log sent to
// HAProxy as logged, refused for the clients its model says.
func productsLooped(t *testing.T, logPath, out string) {
	ha, err := os.ReadFile(filepath.Join(out, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	read, err := products.HAProxy{}.Read(ha, "haproxy.cfg", accesslog.KeySpec{})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := os.ReadFile(filepath.Join(out, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	readCaddy, err := products.Caddy{}.Read(cf, "Caddyfile", accesslog.KeySpec{})
	if err != nil {
		t.Fatal(err)
	}
	short, zone := read.Rules[0].(products.HAProxyRule), readCaddy.Rules[0].(products.CaddyRule)
	doubled, doubledZone := short, zone
	doubled.Limit *= 2
	doubledZone.Events *= 2
	cases := []struct {
		name, want string
		start      func(t *testing.T) string
	}{
		{"haproxy", short.Expect(), func(t *testing.T) string { return haproxytest.Start(t, string(ha)) }},
		{"caddy", zone.Expect(), func(t *testing.T) string { return caddytest.Start(t, string(cf)) }},
	}
	t.Run("products alone", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var said string
				for try := 1; try <= 8; try++ {
					var code int
					// A fresh server each try: the first's keys are spent.
					if code, said = probeExpectsAll(t, c.start(t)+"/", c.want, "--look", "0s", "--max-requests", "4000"); code == 0 {
						t.Logf("%s as emitted: as expected, %s, at try %d", c.name, c.want, try)
						return
					}
				}
				t.Errorf("%s as emitted, --expect %s: not as expected in eight tries\n%s", c.name, c.want, said)
			})
		}
	})
	// The log's slice sent to HAProxy as logged: refused for the clients
	// HAProxy's model, deciding the same requests, refuses.
	t.Run("haproxy replayed", func(t *testing.T) {
		t.Parallel()
		model := map[string]products.Key{}
		replayAgainst(t, logPath, haproxytest.Start(t, string(ha)), "HAProxy's model", func(key string, at time.Time) bool {
			k, ok := model[key]
			if !ok {
				k = products.HAProxy{}.NewKey(read.RulesOf(key))
				model[key] = k
			}
			return k.Decide(at.UnixNano()).Admitted
		})
	})
	for i, want := range []string{doubled.Expect(), doubledZone.Expect()} {
		c := cases[i]
		t.Run(c.name+" doubled", func(t *testing.T) {
			t.Parallel()
			if code, said := probeExpectsAll(t, c.start(t)+"/", want, "--look", "0s"); code != 1 {
				t.Errorf("%s as emitted, --expect %s (doubled): exit %d, want 1\n%s", c.name, want, code, said)
			}
		})
	}
}
