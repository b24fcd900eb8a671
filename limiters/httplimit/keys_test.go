package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters/httplimit"
)

var proxies = []string{"10.0.0.0/8", "192.0.2.10", "2001:db8:ffff::/48"}

// clientIPCases are who ClientIP says the client is.
var clientIPCases = []struct {
	name    string
	cfg     httplimit.IPConfig
	peer    string
	headers map[string][]string
	want    string
}{
	{name: "the peer, IPv4", peer: "203.0.113.7:51000", want: "203.0.113.7"},
	{name: "the peer, IPv6, grouped by /64", peer: "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", want: "2001:db8:1:2::/64"},
	{name: "another address of the same /64", peer: "[2001:db8:1:2::1]:443", want: "2001:db8:1:2::/64"},
	{name: "IPv4-mapped IPv6 is IPv4", peer: "[::ffff:203.0.113.7]:80", want: "203.0.113.7"},
	{name: "a zone is dropped", peer: "[fe80::1%eth0]:80", want: "fe80::/64"},
	{name: "a peer without a port", peer: "203.0.113.7", want: "203.0.113.7"},

	// Spoofing: a forwarding header from a peer nobody trusts is the
	// client's own writing.
	{name: "X-Forwarded-For from an untrusted peer, no proxy trusted", peer: "203.0.113.7:1",
		headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "203.0.113.7"},
	{name: "X-Forwarded-For from an untrusted peer", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "203.0.113.7:1",
		headers: map[string][]string{"X-Forwarded-For": {"10.0.0.1, 198.51.100.1"}}, want: "203.0.113.7"},
	{name: "Forwarded from an untrusted peer", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "Forwarded"}, peer: "203.0.113.7:1",
		headers: map[string][]string{"Forwarded": {"for=198.51.100.1"}}, want: "203.0.113.7"},

	// A trusted peer's header is read right to left past trusted hops.
	{name: "X-Forwarded-For from a trusted proxy", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "198.51.100.1"},
	{name: "past two trusted hops; what the client wrote on the left is ignored", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 192.0.2.10,10.9.9.9"}}, want: "198.51.100.1"},
	{name: "a client claiming to be a trusted proxy is still the first untrusted hop", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"10.0.0.1, 198.51.100.1"}}, want: "198.51.100.1"},
	{name: "several header lines are one list", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1", "10.0.0.2"}}, want: "198.51.100.1"},
	{name: "every hop trusted: the leftmost", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"10.0.0.5, 10.0.0.6"}}, want: "10.0.0.5"},
	{name: "a trusted peer and no header: the peer", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1", want: "10.1.2.3"},
	{name: "an entry that is not an address: the hop that wrote it", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1, garbage, 10.0.0.7"}}, want: "10.0.0.7"},
	{name: "empty list elements are skipped", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1, ,"}}, want: "198.51.100.1"},
	{name: "ports and brackets in X-Forwarded-For", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Forwarded-For": {"[2001:db8:5:6::9]:4711, 198.51.100.1:80"}}, want: "198.51.100.1"},
	{name: "IPv6 from a trusted IPv6 proxy", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "[2001:db8:ffff:1::1]:1",
		headers: map[string][]string{"X-Forwarded-For": {"2001:db8:5:6::9"}}, want: "2001:db8:5:6::/64"},
	{name: "only the configured header is read", cfg: httplimit.IPConfig{TrustedProxies: proxies}, peer: "10.1.2.3:1",
		headers: map[string][]string{"Forwarded": {"for=198.51.100.1"}, "X-Real-Ip": {"198.51.100.2"}}, want: "10.1.2.3"},
	{name: "X-Real-IP as the header", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "x-real-ip"}, peer: "10.1.2.3:1",
		headers: map[string][]string{"X-Real-Ip": {"198.51.100.2"}, "X-Forwarded-For": {"6.6.6.6"}}, want: "198.51.100.2"},

	// RFC 7239.
	{name: "Forwarded: quoted IPv6 with a port, other parameters", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "Forwarded"}, peer: "10.1.2.3:1",
		headers: map[string][]string{"Forwarded": {`for=6.6.6.6, For="[2001:db8:cafe::17]:4711";proto=https;by=10.1.2.3`}}, want: "2001:db8:cafe::/64"},
	{name: "Forwarded: past trusted hops", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "Forwarded"}, peer: "10.1.2.3:1",
		headers: map[string][]string{"Forwarded": {`for=6.6.6.6;by="a,b", for=198.51.100.1, for=10.0.0.9`}}, want: "198.51.100.1"},
	{name: "Forwarded: unknown stops at the hop that wrote it", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "Forwarded"}, peer: "10.1.2.3:1",
		headers: map[string][]string{"Forwarded": {`for=198.51.100.1, for=unknown`}}, want: "10.1.2.3"},
	{name: "Forwarded: an element without for=", cfg: httplimit.IPConfig{TrustedProxies: proxies, Header: "Forwarded"}, peer: "10.1.2.3:1",
		headers: map[string][]string{"Forwarded": {`for=198.51.100.1, proto=https`}}, want: "10.1.2.3"},

	// Prefix lengths.
	{name: "IPv6 by /48", cfg: httplimit.IPConfig{IPv6Prefix: 48}, peer: "[2001:db8:1:2::1]:1", want: "2001:db8:1::/48"},
	{name: "IPv6 by address", cfg: httplimit.IPConfig{IPv6Prefix: 128}, peer: "[2001:db8:1:2::1]:1", want: "2001:db8:1:2::1"},
	{name: "IPv4 by /24", cfg: httplimit.IPConfig{IPv4Prefix: 24}, peer: "203.0.113.7:1", want: "203.0.113.0/24"},
}

func TestClientIP(t *testing.T) {
	for _, c := range clientIPCases {
		t.Run(c.name, func(t *testing.T) {
			key, err := httplimit.ClientIP(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for k, v := range c.headers {
				r.Header[http.CanonicalHeaderKey(k)] = v
			}
			got, err := key(r)
			if err != nil {
				t.Fatalf("key(peer %s, %v): %v", c.peer, c.headers, err)
			}
			if got != c.want {
				t.Errorf("key(peer %s, %v) = %q, want %q", c.peer, c.headers, got, c.want)
			}
		})
	}
}

// Through the middleware: a client that forges X-Forwarded-For to change
// its key is still limited as itself; behind a trusted proxy, clients are
// told apart by the header.
func TestSpoofedForwardingIgnored(t *testing.T) {
	quota := 2
	h := newMiddleware(t, newSlidingLog(t, quota, time.Hour), httplimit.WithClientIP(httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/8"}})).Wrap(ok)
	get := func(peer, xff string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 5 { // a new forged address each time: one key all the same
		want := 200
		if i >= quota {
			want = 429
		}
		if got := get("203.0.113.7:1000", "198.51.100."+string(rune('1'+i))); got != want {
			t.Errorf("request %d from an untrusted peer with a forged X-Forwarded-For: %d, want %d", i+1, got, want)
		}
	}
	for i := range 3 { // through the proxy: each client its own quota
		if got := get("10.0.0.1:1000", "198.51.100."+string(rune('1'+i))); got != 200 {
			t.Errorf("client %d behind a trusted proxy: %d, want 200", i+1, got)
		}
	}
}

func TestClientIPErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  httplimit.IPConfig
		want string
	}{
		{httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/8", "10.0.0.0/33"}}, `trusted proxy 2 of 2, "10.0.0.0/33"`},
		{httplimit.IPConfig{TrustedProxies: []string{"proxy.example"}}, `trusted proxy 1 of 1, "proxy.example"`},
		{httplimit.IPConfig{IPv4Prefix: 33}, "IPv4 prefix length 33"},
		{httplimit.IPConfig{IPv6Prefix: -1}, "IPv6 prefix length -1"},
		{httplimit.IPConfig{Header: "X Forwarded"}, `"X Forwarded" is not a header name`},
	} {
		_, err := httplimit.ClientIP(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("httplimit.ClientIP(%+v) = %v, want an error saying %s", c.cfg, err, c.want)
		}
		if _, err2 := httplimit.New(fixed(allowAll), httplimit.WithClientIP(c.cfg)); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("httplimit.New(httplimit.WithClientIP(%+v)) = %v, want %v", c.cfg, err2, err)
		}
	}
}

func TestClientIPPeerNotAnAddress(t *testing.T) {
	key, _ := httplimit.ClientIP(httplimit.IPConfig{})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@" // a Unix socket
	if k, err := key(r); err == nil {
		t.Errorf("key(RemoteAddr @) = %q, want an error", k)
	}
}

func TestHeaderKey(t *testing.T) {
	key, err := httplimit.HeaderKey("x-api-key")
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	if k, err := key(r); err == nil {
		t.Errorf("key(no header) = %q, want an error", k)
	}
	r.Header.Set("X-Api-Key", "")
	if k, err := key(r); err == nil {
		t.Errorf("key(an empty header) = %q, want an error", k)
	}
	r.Header.Add("X-API-Key", "second")
	r.Header.Set("X-API-Key", "k1")
	if k, err := key(r); k != "k1" || err != nil {
		t.Errorf("key(X-API-Key: k1) = %q, %v, want k1", k, err)
	}
	for _, bad := range []string{"", "X API", "X-Key:", "Ключ"} {
		if _, err := httplimit.HeaderKey(bad); err == nil {
			t.Errorf("httplimit.HeaderKey(%q) succeeded, want an error", bad)
		}
	}
}
