package redisfault_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters/redisfault"
)

// The proxy relays; refused, it closes what it relays and refuses new
// connections; unanswered, it holds what is sent until given back.
func TestProxyCuts(t *testing.T) {
	c, err := redisfault.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func(conn net.Conn, line string) (string, error) {
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(conn, line+"\n"); err != nil {
			return "", err
		}
		return bufio.NewReader(conn).ReadString('\n')
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}

	conn := dial()
	if got, err := ask(conn, "one"); got != "one\n" || err != nil {
		t.Fatalf("relayed %q, %v", got, err)
	}
	c.Set(redisfault.Refused)
	if _, err := ask(conn, "two"); err == nil {
		t.Error("a connection kept its server while refused")
	}
	if late, err := net.DialTimeout("tcp", c.Addr(), time.Second); err == nil {
		late.Close()
		t.Error("a connection accepted while refused")
	}
	c.Set(redisfault.Pass)
	conn = dial()
	if got, err := ask(conn, "three"); got != "three\n" || err != nil {
		t.Fatalf("given back: %q, %v", got, err)
	}

	c.Set(redisfault.Unanswered)
	held := dial()
	for _, cn := range []net.Conn{conn, held} {
		io.WriteString(cn, "four\n")
		cn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := cn.Read(make([]byte, 8)); n != 0 || err == nil {
			t.Errorf("answered while unanswered: %d bytes, %v", n, err)
		}
	}
	c.Set(redisfault.Pass)
	for _, cn := range []net.Conn{conn, held} {
		cn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if got, err := bufio.NewReader(cn).ReadString('\n'); got != "four\n" || err != nil {
			t.Errorf("given back: %q, %v; want what was held", got, err)
		}
	}
	cutAt, backAt := c.Times()
	if !backAt.After(cutAt) {
		t.Errorf("cut at %v, back at %v", cutAt, backAt)
	}
}

// The faults on replies: slow holds each, reset cuts one in half and
// resets, silent drops them, trickle sends a byte at a time; Pass clears
// each.
func TestProxyReplyFaults(t *testing.T) {
	p, err := redisfault.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Delay = 50 * time.Millisecond
	ask := func(line string, within time.Duration) (string, time.Duration, error) {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return "", 0, err
		}
		defer conn.Close()
		start := time.Now()
		conn.SetDeadline(start.Add(within))
		if _, err := io.WriteString(conn, line); err != nil {
			return "", 0, err
		}
		b, err := io.ReadAll(io.LimitReader(conn, int64(len(line))))
		return string(b), time.Since(start), err
	}
	if got, _, err := ask("pass\n", time.Second); got != "pass\n" || err != nil {
		t.Fatalf("relayed %q, %v", got, err)
	}
	p.Set(redisfault.Slow)
	if got, took, err := ask("slow\n", time.Second); got != "slow\n" || err != nil || took < 50*time.Millisecond {
		t.Errorf("slow: %q after %v, %v; want it all, after 50ms", got, took, err)
	}
	p.Set(redisfault.Reset)
	if got, _, err := ask("reset!\n", time.Second); got != "res" || err == nil {
		t.Errorf("reset: %q, %v; want half, then an error", got, err)
	}
	p.Set(redisfault.Silent)
	if got, _, err := ask("silent\n", 100*time.Millisecond); got != "" || err == nil {
		t.Errorf("silent: %q, %v; want nothing, and a timeout", got, err)
	}
	p.Set(redisfault.Trickle)
	if got, took, err := ask("abc\n", time.Second); got != "abc\n" || err != nil || took < 60*time.Millisecond {
		t.Errorf("trickle: %q after %v, %v; want it all, a byte every 20ms", got, took, err)
	}
	p.Set(redisfault.Pass)
	if got, took, err := ask("again\n", time.Second); got != "again\n" || err != nil || took > 500*time.Millisecond {
		t.Errorf("cleared: %q after %v, %v", got, took, err)
	}
	if names := fmt.Sprint(redisfault.Pass, redisfault.Unanswered); names != "pass unanswered" {
		t.Errorf("names %q", names)
	}
}

// echoServer starts a TCP server on loopback that sends back what it is
// sent, closed when the test ends, and returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			conn, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	}()
	return echo.Addr().String()
}
