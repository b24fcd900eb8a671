package probe

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sources are the addresses a probe keyed by source (--key source) sends
// from: each simulated user binds its own, so that a limiter keyed by the
// client's address (nginx's $binary_remote_addr) tells them apart.
type Sources struct {
	addrs []netip.Addr
	mu    sync.Mutex
	next  int
	of    map[string]netip.Addr // user's key: its address
}

// ParseSources reads --source for a probe of target: an address, or a
// range of them, first and last included: "127.0.0.2-127.0.0.254". Empty,
// it returns the addresses a probe keyed by source sends from when
// --source is not given, and says what it chose: on a loopback target,
// 127.0.0.2 to 127.0.0.254 (on Linux every 127/8 address is the
// loopback's, and 127.0.0.1 is the one other clients use); elsewhere none
// that could work is known, and it is an error.
func ParseSources(s, target string) (src *Sources, chose string, err error) {
	if s == "" {
		return defaultSources(target)
	}
	src, err = parseSources(s)
	return src, "", err
}

// parseSources reads an address or a range of them.
func parseSources(s string) (*Sources, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	first, err := netip.ParseAddr(strings.TrimSpace(lo))
	if err != nil {
		return nil, fmt.Errorf("probe: --source %q: want an address or a range, as in 127.0.0.2-127.0.0.254", s)
	}
	last := first
	if isRange {
		if last, err = netip.ParseAddr(strings.TrimSpace(hi)); err != nil || last.Less(first) || last.Is4() != first.Is4() {
			return nil, fmt.Errorf("probe: --source %q: want a range from a first address to a last one no lower", s)
		}
	}
	src := &Sources{of: map[string]netip.Addr{}}
	for a := first; ; a = a.Next() {
		src.addrs = append(src.addrs, a)
		if a == last || len(src.addrs) > 1<<16 {
			break
		}
	}
	// Start somewhere in the range, so that probes in a row do not give
	// the target the same addresses for their fresh keys first.
	src.next = rand.IntN(len(src.addrs))
	return src, nil
}

// defaultSources is ParseSources of no --source.
func defaultSources(target string) (*Sources, string, error) {
	u, err := url.Parse(target)
	if err == nil {
		host := u.Hostname()
		if a, err := netip.ParseAddr(host); (err == nil && a.Is4() && a.IsLoopback()) || host == "localhost" {
			const loopback = "127.0.0.2-127.0.0.254"
			src, err := parseSources(loopback)
			return src, loopback + ", one address a user (the target is on loopback)", err
		}
	}
	return nil, "", fmt.Errorf("probe: --key source needs --source, the addresses users send from, each its own: the target %q is not on loopback, and which addresses of this host reach it is for you to say", target)
}

// addr returns the address user key sends from, giving it the next free
// one on first use.
func (s *Sources) addr(key string) (netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.of[key]; ok {
		return a, nil
	}
	if len(s.of) >= len(s.addrs) {
		return netip.Addr{}, fmt.Errorf("probe: --source has %d addresses, and the probe needs one for each of its users: give a wider range", len(s.addrs))
	}
	a := s.addrs[s.next%len(s.addrs)]
	s.next++
	s.of[key] = a
	return a, nil
}

// sourceHeader carries a request's source address from the targeter to
// the transport, which removes it.
const sourceHeader = "X-Ratelab-Probe-Source"

// bySource sends each request from the address its sourceHeader names,
// over connections of that address's own.
type bySource struct {
	mu  sync.Mutex
	tr  map[string]*http.Transport
	new func(local net.Addr) *http.Transport
}

func newBySource(timeout time.Duration) *bySource {
	return &bySource{tr: map[string]*http.Transport{}, new: func(local net.Addr) *http.Transport {
		d := &net.Dialer{LocalAddr: local, Timeout: timeout, KeepAlive: 30 * time.Second}
		return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	}}
}

func (b *bySource) RoundTrip(req *http.Request) (*http.Response, error) {
	src := req.Header.Get(sourceHeader)
	b.mu.Lock()
	tr, ok := b.tr[src]
	if !ok {
		var local net.Addr
		if a, err := netip.ParseAddr(src); err == nil {
			local = net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
		}
		tr = b.new(local)
		b.tr[src] = tr
	}
	b.mu.Unlock()
	r := req.Clone(req.Context())
	r.Header.Del(sourceHeader)
	return tr.RoundTrip(r)
}

// close closes the idle connections of every address.
func (b *bySource) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tr := range b.tr {
		tr.CloseIdleConnections()
	}
}

// client is an http.Client over b, as vegeta's own: no redirects
// followed, each request bounded by timeout.
func (b *bySource) client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: b, Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
