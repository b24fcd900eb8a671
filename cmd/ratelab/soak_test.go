package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/ratelab/ratelab/limiters/redistest"
)

var soak = flag.Duration("soak", 0, "TestServeSoak: how long each backend's ratelab serve runs under load (make soak-serve: 10m); zero skips it")

// TestServeSoak runs ratelab serve (its own process, this binary) for
// -soak on each backend, in memory and on Redis, at 80% of the highest
// rate it keeps pace with here, from 100,000 keys, with slow clients
// beside (connections that send their header a byte a second, a hundred
// at a time, each opened again when the server closes it). Every 10s it
// samples the server's resident memory, open file descriptors and threads
// (/proc) and goroutines (its metrics); after a minute's warm-up memory
// and threads may not grow by more than a quarter and a margin; once the
// load has closed its connections, descriptors and goroutines must be
// back to what they were before it; and no slow client may keep its
// connection past the server's header timeout (5s) and a margin. The
// series go to the log.
func TestServeSoak(t *testing.T) {
	if *soak == 0 {
		t.Skip("a soak of minutes: go test -run TestServeSoak -soak 10m ./cmd/ratelab (make soak-serve)")
	}
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"serve", "--algo", "gcra", "--limit", "100/s burst 100", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}
			if backend == "redis" {
				c := redistest.Client(t, nil)
				args = append(args, "--backend", "redis", "--redis-url", redistest.URL(), "--redis-prefix", redistest.Prefix(t, c))
			}
			srv := startServe(t, args...)
			rate := sustained(t, srv.url)
			t.Logf("%s: the highest rate kept here %d/s; the soak runs at %d/s for %v", backend, rate, rate*8/10, *soak)
			soakAt(t, srv, rate*8/10, *soak)
		})
	}
}

// A served is a ratelab serve of the test's own.
type served struct {
	cmd          *exec.Cmd
	url, metrics string
}

// startServe starts ratelab serve with args as a process of its own, and
// reads the addresses it prints. It stops with the test.
func startServe(t *testing.T, args ...string) served {
	exe := asRatelab(t)
	cmd := exec.Command(exe, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	s := served{cmd: cmd}
	lines := bufio.NewScanner(out)
	for s.url == "" || s.metrics == "" {
		if !lines.Scan() {
			t.Fatalf("ratelab serve printed no addresses: %v", lines.Err())
		}
		if u, ok := strings.CutPrefix(lines.Text(), "ratelab serve: listening on "); ok {
			s.url = u + "/"
		}
		if u, ok := strings.CutPrefix(lines.Text(), "ratelab serve: metrics on "); ok {
			s.metrics = u
		}
	}
	go io.Copy(io.Discard, out)
	return s
}

// soakKeys are the keys of the soak: a hundred thousand.
var soakKeys = func() []string {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%06d", i)
	}
	return keys
}()

// attack sends GETs to url at rate from soakKeys in turn for d, counts
// those sent and those answered (200 or 429) as they come back, and
// returns the latencies of those answered.
func attack(url string, rate int, d time.Duration, sent, answered *atomic.Int64) (lat []time.Duration) {
	var next atomic.Int64
	tg := func(tgt *vegeta.Target) error {
		tgt.Method, tgt.URL = http.MethodGet, url
		tgt.Header = http.Header{"X-Api-Key": []string{soakKeys[int(next.Add(1))%len(soakKeys)]}}
		return nil
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections() // the server's connections close with the attack
	a := vegeta.NewAttacker(vegeta.Client(&http.Client{Transport: tr, Timeout: 30 * time.Second}), vegeta.Workers(64), vegeta.MaxWorkers(2048), vegeta.MaxBody(0))
	for res := range a.Attack(tg, vegeta.Rate{Freq: rate, Per: time.Second}, d, "soak") {
		sent.Add(1)
		if res.Code == 200 || res.Code == 429 {
			answered.Add(1)
			lat = append(lat, res.Latency)
		}
	}
	return lat
}

// sustained is the highest rate, of 1,000/s doubled up to 64,000/s, at
// which 3s of requests were all answered, sent at 95% of the rate or
// more, with a median under 5ms.
func sustained(t *testing.T, url string) int {
	best := 0
	for rate := 1000; rate <= 64_000; rate *= 2 {
		start := time.Now()
		var s, a atomic.Int64
		lat := attack(url, rate, 3*time.Second, &s, &a)
		took := time.Since(start)
		sent, answered := int(s.Load()), int(a.Load())
		slices.Sort(lat)
		p50 := time.Duration(0)
		if len(lat) > 0 {
			p50 = lat[len(lat)/2]
		}
		t.Logf("  %6d/s asked: %6.0f/s sent, %d of %d answered, p50 %v", rate, float64(sent)/took.Seconds(), answered, sent, p50)
		if float64(sent)/took.Seconds() < 0.95*float64(rate) || answered < sent || p50 > 5*time.Millisecond {
			break
		}
		best = rate
	}
	if best == 0 {
		t.Fatal("ratelab serve kept pace with no rate from 1,000/s")
	}
	return best
}

// A sample is what the soak reads of the server every 10s.
type sample struct {
	at                         time.Duration
	rss                        int64 // bytes
	fds, threads, goroutines   int
	sent, answered, slowClosed int
}

// soakAt attacks srv at rate for d with slow clients beside, samples it
// every 10s, logs the series, and checks that nothing grew past warm-up.
func soakAt(t *testing.T, srv served, rate int, d time.Duration) {
	idle := readSample(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slow slowClients
	host := strings.TrimSuffix(strings.TrimPrefix(srv.url, "http://"), "/")
	for range 100 {
		slow.wg.Go(func() { slow.run(ctx, host) })
	}
	var sent, answered atomic.Int64
	attacking := make(chan struct{})
	go func() {
		defer close(attacking)
		for ctx.Err() == nil {
			attack(srv.url, rate, min(d, time.Minute), &sent, &answered)
			if time.Since(slow.start()) >= d {
				return
			}
		}
	}()
	var series []sample
	start := time.Now()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-attacking:
			done = true
		case <-tick.C:
		}
		s := readSample(t, srv)
		s.at, s.sent, s.answered, s.slowClosed = time.Since(start).Round(time.Second), int(sent.Load()), int(answered.Load()), int(slow.closed.Load())
		series = append(series, s)
	}
	cancel()
	slow.wg.Wait()
	t.Logf("%8s %10s %6s %8s %11s %12s %12s %18s", "at", "RSS", "fds", "threads", "goroutines", "sent", "answered", "slow conns closed")
	for _, s := range series {
		t.Logf("%8v %8.1fMB %6d %8d %11d %12d %12d %18d", s.at, float64(s.rss)/1e6, s.fds, s.threads, s.goroutines, s.sent, s.answered, s.slowClosed)
	}
	if longest := time.Duration(slow.longest.Load()); longest > 8*time.Second {
		t.Errorf("a slow client kept its connection %v, past the server's header timeout (5s)", longest)
	} else {
		t.Logf("slow clients: %d connections closed by the server, the longest held %v (header timeout 5s)", slow.closed.Load(), longest.Round(100*time.Millisecond))
	}
	if sent.Load() != answered.Load() {
		t.Errorf("%d requests sent, %d answered 200 or 429", sent.Load(), answered.Load())
	}
	// Flat after a minute's warm-up: the highest of each figure over the
	// rest of the run is within a quarter and a margin of its highest over
	// the two minutes after the warm-up. (Highest, not each sample: every
	// minute the attack starts again on new connections, and the samples
	// at its edges dip.)
	var early, late sample
	for _, s := range series {
		switch {
		case s.at < time.Minute:
		case s.at < 3*time.Minute:
			early = highest(early, s)
		default:
			late = highest(late, s)
		}
	}
	if late.at > 0 && (late.rss > early.rss*5/4+16<<20 || late.threads > early.threads*5/4+8) {
		t.Errorf("grown after warm-up: the highest from 3m on, %+v, against the highest from 1m to 3m, %+v", late, early)
	}
	// Descriptors and goroutines follow the connections the load holds,
	// which swing; once it has closed them the server must hold no more
	// than before the load, give or take a few.
	settled := readSample(t, srv)
	for deadline := time.Now().Add(15 * time.Second); settled.fds > idle.fds+16 || settled.goroutines > idle.goroutines+16; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("15s after the load: %d descriptors and %d goroutines, against %d and %d before it", settled.fds, settled.goroutines, idle.fds, idle.goroutines)
			break
		}
		settled = readSample(t, srv)
	}
	t.Logf("before the load: %d descriptors, %d goroutines; after it: %d and %d", idle.fds, idle.goroutines, settled.fds, settled.goroutines)
}

// highest is each figure's highest of a and b, at b's time.
func highest(a, b sample) sample {
	return sample{at: b.at, rss: max(a.rss, b.rss), fds: max(a.fds, b.fds), threads: max(a.threads, b.threads), goroutines: max(a.goroutines, b.goroutines)}
}

// readSample reads the server's resident memory, descriptors and threads
// from /proc, and its goroutines from its metrics.
func readSample(t *testing.T, srv served) sample {
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	var s sample
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			s.rss = kb << 10
		case len(f) >= 2 && f[0] == "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		}
	}
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	s.fds = len(fds)
	res, err := http.Get(srv.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			s.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return s
}

// slowClients open connections that send a request's header a byte a
// second, and open another when the server closes one.
type slowClients struct {
	wg      sync.WaitGroup
	once    sync.Once
	began   time.Time
	closed  atomic.Int64 // connections the server closed
	longest atomic.Int64 // the longest one lived, in ns
}

func (s *slowClients) start() time.Time {
	s.once.Do(func() { s.began = time.Now() })
	return s.began
}

func (s *slowClients) run(ctx context.Context, host string) {
	s.start()
	header := "GET / HTTP/1.1\r\nHost: " + host + "\r\nX-API-Key: slow\r\n\r\n"
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		opened := time.Now()
		for i := 0; i < len(header) && ctx.Err() == nil; i++ {
			if _, err := conn.Write([]byte{header[i]}); err != nil {
				break
			}
			// A closed connection shows on the next write, or on a read.
			conn.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
				break
			}
		}
		if ctx.Err() == nil {
			s.closed.Add(1)
			lived := int64(time.Since(opened))
			for old := s.longest.Load(); lived > old && !s.longest.CompareAndSwap(old, lived); old = s.longest.Load() {
			}
		}
		conn.Close()
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

var (
	flood     = flag.Int("flood", 0, "TestServeFlood: how many distinct keys to send ratelab serve (make flood: 10,000,000); zero skips it")
	floodCaps = flag.String("flood-max-keys", "0,1000000", "TestServeFlood: the --max-keys of each run, comma-separated (0: no cap)")
)

// TestServeFlood sends ratelab serve (sliding log, 100 an hour, so no key
// expires) -flood requests, each with a new 126-byte key, as fast as 64
// connections go, once for each -flood-max-keys, and logs its resident
// memory at every million keys sent: what an attacker who invents keys
// costs it, capped and not. Every request must be answered 200 (each key
// is new), and under a cap memory must stop growing.
func TestServeFlood(t *testing.T) {
	if *flood == 0 {
		t.Skip("a flood of millions of keys: go test -run TestServeFlood -flood 10000000 ./cmd/ratelab (make flood)")
	}
	for _, c := range strings.Split(*floodCaps, ",") {
		t.Run("max-keys="+c, func(t *testing.T) {
			srv := startServe(t, "serve", "--algo", "sliding-log", "--limit", "100/h", "--max-keys", c,
				"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
			before := readSample(t, srv)
			var next atomic.Int64
			stem := strings.Repeat("k", 110)
			tg := func(tgt *vegeta.Target) error {
				tgt.Method, tgt.URL = http.MethodGet, srv.url
				tgt.Header = http.Header{"X-Api-Key": []string{fmt.Sprintf("%s%016x", stem, next.Add(1))}}
				return nil
			}
			a := vegeta.NewAttacker(vegeta.Workers(64), vegeta.MaxWorkers(64), vegeta.MaxBody(0), vegeta.KeepAlive(true), vegeta.Connections(64))
			start := time.Now()
			t.Logf("%12s %10s %10s", "keys sent", "RSS", "a second")
			t.Logf("%12d %8.1fMB", 0, float64(before.rss)/1e6)
			var series []sample
			sent, ok := 0, 0
			for res := range a.Attack(tg, vegeta.Rate{}, 0, "flood") {
				sent++
				if res.Code == 200 {
					ok++
				}
				if sent%1_000_000 == 0 {
					s := readSample(t, srv)
					series = append(series, s)
					t.Logf("%12d %8.1fMB %10.0f", sent, float64(s.rss)/1e6, float64(sent)/time.Since(start).Seconds())
				}
				if sent == *flood {
					a.Stop()
				}
			}
			if ok < sent {
				t.Errorf("%d of %d requests answered 200", ok, sent)
			}
			if c != "0" && len(series) >= 4 {
				if last, mid := series[len(series)-1].rss, series[len(series)/2].rss; last > mid*11/10+16<<20 {
					t.Errorf("under --max-keys %s, resident memory grew from %.1fMB to %.1fMB", c, float64(mid)/1e6, float64(last)/1e6)
				}
			}
		})
	}
}
