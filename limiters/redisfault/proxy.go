package redisfault

import (
	"net"
	"sync"
	"time"
)

// A Fault is what a Proxy does to the traffic between a client and its
// server.
type Fault int

const (
	// Pass relays everything as it comes.
	Pass Fault = iota
	// Slow holds each reply for the proxy's Delay (300ms unless set).
	Slow
	// Reset sends half of a reply, then resets the connection.
	Reset
	// Silent drops every reply and leaves the connection open: a server
	// that never answers.
	Silent
	// Trickle sends replies a byte every 20ms.
	Trickle
	// Refused closes every connection and refuses new ones, as a server
	// that is down.
	Refused
	// Unanswered holds what either side sends, and the connections it
	// accepts, until the fault clears, then delivers it, as TCP does
	// across a network that drops packets for a while.
	Unanswered
)

func (f Fault) String() string {
	switch f {
	case Slow:
		return "slow"
	case Reset:
		return "reset mid-reply"
	case Silent:
		return "silent"
	case Trickle:
		return "trickle"
	case Refused:
		return "refused"
	case Unanswered:
		return "unanswered"
	}
	return "pass"
}

// A Proxy is a TCP proxy on loopback to a server, which puts a Fault
// between them (Set) and clears it (Set(Pass)).
type Proxy struct {
	to, addr string
	// Delay is how long Slow holds a reply; zero means 300ms.
	Delay time.Duration

	mu    sync.Mutex
	fault Fault
	ln    net.Listener // nil while refused
	// open is closed while bytes may flow; a new one while unanswered.
	open  chan struct{}
	conns map[net.Conn]bool // both ends of every connection relayed
	// setAt and clearedAt are when the last fault was set and cleared.
	setAt, clearedAt time.Time
	closed           bool
	wg               sync.WaitGroup
}

// NewProxy starts a proxy to the server at to, on a free loopback port.
func NewProxy(to string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{to: to, addr: ln.Addr().String(), ln: ln, open: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(p.open)
	p.wg.Go(func() { p.accept(ln) })
	return p, nil
}

// Addr is the proxy's address, to give clients in place of the server's.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) accept(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			in.Close()
			return
		}
		p.wg.Go(func() { p.connect(in) })
	}
}

// track adds conn to those relayed, unless the proxy is closed or its
// server refused.
func (p *Proxy) track(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.fault == Refused {
		return false
	}
	p.conns[conn] = true
	return true
}

// connect connects in to the server, once bytes may flow, and relays
// between them.
func (p *Proxy) connect(in net.Conn) {
	if !p.wait() {
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", p.to, time.Second)
	if err != nil || !p.track(out) {
		if out != nil {
			out.Close()
		}
		p.drop(in)
		return
	}
	p.wg.Go(func() { p.relay(in, out, false) })
	p.relay(out, in, true)
}

// wait waits until bytes may flow, and reports whether the proxy is still
// open.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// drop closes conns and forgets them.
func (p *Proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
		delete(p.conns, conn)
	}
}

func (p *Proxy) current() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// relay copies from src to dst, holding what it reads while the server is
// unanswered; replies (from the server) meet the reply faults.
func (p *Proxy) relay(src, dst net.Conn, replies bool) {
	defer p.drop(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if replies && !p.reply(dst, buf[:n]) {
				return
			}
			if !replies {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// reply writes the reply b to dst as the fault in force says, and reports
// whether the connection goes on.
func (p *Proxy) reply(dst net.Conn, b []byte) bool {
	switch p.current() {
	case Slow:
		time.Sleep(cmp(p.Delay, 300*time.Millisecond))
	case Reset:
		dst.Write(b[:len(b)/2])
		if tcp, ok := dst.(*net.TCPConn); ok {
			tcp.SetLinger(0) // RST, not FIN
		}
		return false
	case Silent:
		return true
	case Trickle:
		for i := range b {
			if p.current() != Trickle {
				_, err := dst.Write(b[i:])
				return err == nil
			}
			if _, err := dst.Write(b[i : i+1]); err != nil {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		return true
	}
	_, err := dst.Write(b)
	return err == nil
}

// cmp returns d, or def when d is zero.
func cmp(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Set puts fault f between the clients and the server, in place of the
// one in force; Pass clears it: a refused server listens again on the
// same address, and what was held while unanswered goes through.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || f == p.fault {
		return
	}
	switch p.fault { // clear the one in force
	case Refused:
		if !p.listen() {
			return // never given back: the caller's test says so
		}
	case Unanswered:
		close(p.open)
	}
	if f == Pass {
		p.clearedAt = time.Now()
	} else {
		p.setAt = time.Now()
	}
	p.fault = f
	switch f {
	case Refused:
		p.ln.Close()
		p.ln = nil
		for conn := range p.conns {
			conn.Close()
		}
	case Unanswered:
		p.open = make(chan struct{})
	}
}

// listen listens again on the proxy's address, which was just its own:
// free again at once, or nearly.
func (p *Proxy) listen() bool {
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return false
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
	return true
}

// Times returns when the last fault was set and when it was cleared (zero
// if it has not been).
func (p *Proxy) Times() (setAt, clearedAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setAt, p.clearedAt
}

// Close stops the proxy and every connection through it, and waits for
// its goroutines to end.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for conn := range p.conns {
		conn.Close()
	}
	if p.fault == Unanswered {
		close(p.open)
		p.fault = Pass
	}
	p.mu.Unlock()
	p.wg.Wait()
}
