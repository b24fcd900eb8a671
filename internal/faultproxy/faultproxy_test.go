package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/faultproxy"
)

// The proxy relays; refused, it closes what it relays and refuses new
// connections; unanswered, it holds what is sent until given back.
func TestProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			conn, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	}()
	c, err := faultproxy.New(echo.Addr().String())
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
	c.Cut(faultproxy.Refused)
	if _, err := ask(conn, "two"); err == nil {
		t.Error("a connection kept its server while refused")
	}
	if late, err := net.DialTimeout("tcp", c.Addr(), time.Second); err == nil {
		late.Close()
		t.Error("a connection accepted while refused")
	}
	c.Restore()
	conn = dial()
	if got, err := ask(conn, "three"); got != "three\n" || err != nil {
		t.Fatalf("given back: %q, %v", got, err)
	}

	c.Cut(faultproxy.Unanswered)
	held := dial()
	for _, cn := range []net.Conn{conn, held} {
		io.WriteString(cn, "four\n")
		cn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := cn.Read(make([]byte, 8)); n != 0 || err == nil {
			t.Errorf("answered while unanswered: %d bytes, %v", n, err)
		}
	}
	c.Restore()
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
