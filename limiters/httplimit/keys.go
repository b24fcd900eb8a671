package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// KeyFunc returns the key a request is limited by: a user, an API key, a
// client address. An error means the request has no key; the middleware
// then answers it 400, or serves it unmetered (WithUnmetered).
//
// A key is kept by the limiter: in memory as a hash, on Redis in the name
// of a Redis key. Hash a secret (an API key, a token) before using it as a
// key for a Redis limiter.
type KeyFunc func(r *http.Request) (string, error)

// HeaderKey returns a KeyFunc keyed by the first value of the header
// called name ("X-API-Key"). A request without it, or with it empty, has
// no key.
func HeaderKey(name string) (KeyFunc, error) {
	if !validHeaderName(name) {
		return nil, fmt.Errorf("httplimit: %q is not a header name", name)
	}
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if v := r.Header[canon]; len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("httplimit: no %s header", canon)
	}, nil
}

// IPConfig says how ClientIP finds a request's client and groups
// addresses. The zero value keys by the direct peer's address, trusting no
// forwarding header, with IPv6 clients grouped by /64.
type IPConfig struct {
	// TrustedProxies are the proxies whose forwarding header is believed:
	// CIDR prefixes ("10.0.0.0/8", "fd00::/8") or single addresses. Empty
	// means none: the client is the direct peer, and forwarding headers,
	// which any client can write, are ignored.
	TrustedProxies []string
	// Header is the forwarding header the trusted proxies write: empty
	// means X-Forwarded-For. "Forwarded" is read as RFC 7239 (its for=
	// parameters); any other (X-Real-IP, CF-Connecting-IP) as a
	// comma-separated list of addresses, like X-Forwarded-For. Only this
	// header is read: a header the proxies do not write is the client's to
	// forge.
	Header string
	// IPv4Prefix and IPv6Prefix are how many leading bits of an address
	// make the key: zero means 32 for IPv4 (each address its own key) and
	// 64 for IPv6 (a client usually holds a whole /64 and could otherwise
	// change address at every request).
	IPv4Prefix, IPv6Prefix int
}

// ClientIP returns a KeyFunc keyed by the client's address, grouped by
// c's prefix lengths: "203.0.113.7", "2001:db8:1:2::/64".
//
// The client is the direct peer (the request's RemoteAddr) unless the peer
// is a trusted proxy. Then the forwarding header is read right to left,
// the order proxies append to it, past every trusted address; the first
// address not trusted is the client. Everything left of it was written by
// the client or by proxies nobody vouches for, and is ignored. When every
// address is trusted, the leftmost is the client; when the header is
// missing, the peer is. When an entry is not an address ("unknown", an
// obfuscated RFC 7239 node), the client is the trusted hop that wrote it.
func ClientIP(c IPConfig) (KeyFunc, error) {
	k := &ipKey{v4: c.IPv4Prefix, v6: c.IPv6Prefix, header: "X-Forwarded-For"}
	if k.v4 == 0 {
		k.v4 = 32
	}
	if k.v6 == 0 {
		k.v6 = 64
	}
	if k.v4 < 1 || k.v4 > 32 {
		return nil, fmt.Errorf("httplimit: IPv4 prefix length %d: want 1 to 32", c.IPv4Prefix)
	}
	if k.v6 < 1 || k.v6 > 128 {
		return nil, fmt.Errorf("httplimit: IPv6 prefix length %d: want 1 to 128", c.IPv6Prefix)
	}
	if c.Header != "" {
		if !validHeaderName(c.Header) {
			return nil, fmt.Errorf("httplimit: forwarding header %q is not a header name", c.Header)
		}
		k.header = c.Header
	}
	k.header = http.CanonicalHeaderKey(k.header)
	k.forwarded = k.header == "Forwarded"
	for i, s := range c.TrustedProxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("httplimit: trusted proxy %d of %d, %q: not an address or a CIDR prefix (as in 10.0.0.0/8 or 2001:db8::/32)", i+1, len(c.TrustedProxies), s)
		}
		k.trusted = append(k.trusted, p)
	}
	return k.key, nil
}

// parsePrefix reads "10.0.0.0/8" or a single address "10.0.0.1".
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 { // ::ffff:10.0.0.0/104 is 10.0.0.0/8
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

type ipKey struct {
	trusted   []netip.Prefix
	header    string // canonical
	forwarded bool   // header is RFC 7239's Forwarded
	v4, v6    int
}

func (k *ipKey) key(r *http.Request) (string, error) {
	a, err := k.client(r)
	if err != nil {
		return "", err
	}
	bits := k.v6
	if a.Is4() {
		bits = k.v4
	}
	var buf [64]byte
	b := buf[:0]
	if bits == a.BitLen() {
		b = a.AppendTo(b)
	} else {
		p, _ := a.Prefix(bits) // bits is in range: checked by ClientIP
		b = p.Addr().AppendTo(b)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(bits), 10)
	}
	return string(b), nil
}

func (k *ipKey) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client finds the client's address (see ClientIP).
func (k *ipKey) client(r *http.Request) (netip.Addr, error) {
	peer, ok := parseNode(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("httplimit: the peer address %q is not an IP address", r.RemoteAddr)
	}
	if !k.isTrusted(peer) {
		return peer, nil
	}
	client := peer
	lines := r.Header[k.header]
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			var entry string
			rest, entry = lastElement(rest)
			if k.forwarded {
				entry = forwardedFor(entry)
			}
			if strings.TrimSpace(entry) == "" && !k.forwarded {
				continue // an empty list element, which lists allow
			}
			a, ok := parseNode(entry)
			if !ok {
				return client, nil // a trusted hop wrote what is not an address: key by that hop
			}
			client = a
			if !k.isTrusted(a) {
				return client, nil
			}
		}
	}
	return client, nil
}

// lastElement splits a comma-separated list into what precedes its last
// element and that element, a comma inside a quoted string (which
// Forwarded's values may be) not counting.
func lastElement(s string) (rest, last string) {
	quoted := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			if !escaped(s, i) {
				quoted = !quoted
			}
		case ',':
			if !quoted {
				return s[:i], s[i+1:]
			}
		}
	}
	return "", s
}

// escaped reports whether s[i] follows an odd number of backslashes.
func escaped(s string, i int) bool {
	n := 0
	for i > 0 && s[i-1] == '\\' {
		n++
		i--
	}
	return n%2 == 1
}

// forwardedFor returns the value of the for= parameter of one RFC 7239
// Forwarded element (for=192.0.2.60;proto=http;by=203.0.113.43),
// unquoted, or "" when it has none.
func forwardedFor(elem string) string {
	for elem != "" {
		var pair string
		pair, elem, _ = strings.Cut(elem, ";")
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
			if strings.Contains(value, `\`) {
				value = strings.ReplaceAll(value, `\`, "") // no address holds a backslash
			}
		}
		return value
	}
	return ""
}

// parseNode reads an address as forwarding headers and RemoteAddr write
// one: "192.0.2.1", "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]" or
// "[2001:db8::1]:443". IPv4-mapped IPv6 addresses become IPv4, and zones
// are dropped.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		s = s[1:end]
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		s = s[:i] // one colon: IPv4 and a port
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// validHeaderName reports whether s is a field name: a token of RFC 9110.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
