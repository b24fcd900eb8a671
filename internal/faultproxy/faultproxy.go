// Package faultproxy is a TCP proxy on loopback that takes its server
// away and gives it back, for the tests and the lab runs that measure
// what a limiter does while Redis is down.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// The ways a Proxy takes its server away: refused, as when it is down (its
// connections closed, new ones refused); unanswered, as when a network
// between drops everything (connections stay open, nothing comes back).
const (
	Refused    = "refused"
	Unanswered = "unanswered"
)

// A Proxy is a TCP proxy on loopback to a server, which it can take away
// (Cut) and give back (Restore). Refused, it closes every connection and
// listens no more; unanswered, it holds what either side sends (and the
// connections it accepts) until the server is given back, as TCP does
// across a network that drops packets for a while.
type Proxy struct {
	to, addr string

	mu    sync.Mutex
	ln    net.Listener // nil while refused
	state string       // "", Refused or Unanswered
	// open is closed while bytes may flow; a new one while unanswered.
	open  chan struct{}
	conns map[net.Conn]bool // both ends of every connection relayed
	// cutAt and backAt are when the server was taken away and given
	// back.
	cutAt, backAt time.Time
	closed        bool
	wg            sync.WaitGroup
}

// New starts a proxy to the server at to, on a free loopback port.
func New(to string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Proxy{to: to, addr: ln.Addr().String(), ln: ln, open: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(c.open)
	c.wg.Go(func() { c.accept(ln) })
	return c, nil
}

func (c *Proxy) accept(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		if !c.track(in) {
			in.Close()
			return
		}
		c.wg.Go(func() { c.connect(in) })
	}
}

// track adds conn to those relayed, unless the proxy is closed or the
// server refused.
func (c *Proxy) track(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.state == Refused {
		return false
	}
	c.conns[conn] = true
	return true
}

// connect connects in to the server, once it answers, and relays between
// them.
func (c *Proxy) connect(in net.Conn) {
	if !c.wait() {
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", c.to, time.Second)
	if err != nil || !c.track(out) {
		if out != nil {
			out.Close()
		}
		c.drop(in)
		return
	}
	c.wg.Go(func() { c.relay(in, out) })
	c.relay(out, in)
}

// wait waits until bytes may flow, and reports whether the proxy is still
// open.
func (c *Proxy) wait() bool {
	c.mu.Lock()
	open := c.open
	c.mu.Unlock()
	<-open
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed
}

// drop closes conns and forgets them.
func (c *Proxy) drop(conns ...net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
		delete(c.conns, conn)
	}
}

// relay copies from src to dst, holding what it reads while the server is
// unanswered.
func (c *Proxy) relay(src, dst net.Conn) {
	defer c.drop(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !c.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut takes the server away as kind says: Refused or Unanswered.
func (c *Proxy) Cut(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.state != "" {
		return
	}
	c.state, c.cutAt = kind, time.Now()
	switch kind {
	case Refused:
		c.ln.Close()
		c.ln = nil
		for conn := range c.conns {
			conn.Close()
		}
	case Unanswered:
		c.open = make(chan struct{})
	}
}

// Restore gives the server back: listening again on the same address if
// refused, letting what was held through if unanswered.
func (c *Proxy) Restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.state == "" {
		return
	}
	switch c.state {
	case Refused:
		var ln net.Listener
		var err error
		for range 50 { // the address was just ours: it is free again at once, or nearly
			if ln, err = net.Listen("tcp", c.addr); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return // never given back: the run says so
		}
		c.ln = ln
		c.wg.Go(func() { c.accept(ln) })
	case Unanswered:
		close(c.open)
	}
	c.state, c.backAt = "", time.Now()
}

// Times returns when the server was last taken away and given back (zero
// if it has not been).
func (c *Proxy) Times() (cutAt, backAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutAt, c.backAt
}

// Close stops the proxy and every connection through it.
func (c *Proxy) Close() {
	c.mu.Lock()
	c.closed = true
	if c.ln != nil {
		c.ln.Close()
	}
	for conn := range c.conns {
		conn.Close()
	}
	if c.state == Unanswered {
		close(c.open)
		c.state = ""
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Addr is the proxy's address, to give clients in place of the server's.
func (c *Proxy) Addr() string { return c.addr }
