package accesslog

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// A KeySpec says what a request is counted under: the client's address,
// a field of the line (a user id, an API key, a logged header), and
// optionally the first segments of its path, as limits are set per client
// and per route.
//
// It is written as --key writes it:
//
//	ip                 the client's address ($remote_addr; in JSON, the first of remote_addr, client_ip, ip)
//	field:NAME         a variable of the log format ($NAME), or a JSON field (NAME, or a.b for a nested one)
//	.NAME              the same, as jq writes it (.user_id, .request.user)
//	header:NAME        a logged request header: nginx's $http_name (x-api-key is $http_x_api_key);
//	                   X-Forwarded-For's last address, the client as the proxy in front saw it
//	KEY+path:N         any of those, then the path's first N segments (ip+path:2 is "203.0.113.9 /api/v1")
type KeySpec struct {
	// Field is the variable or JSON path the key is read from; empty for
	// the client's address.
	Field string
	// Header is the request header the key is, as --key names it
	// (header:X-Api-Key), empty for another key: each product logs a
	// header under a field of its own (Traefik request_X-Api-Key, Caddy
	// request.headers.X-Api-Key, nginx $http_x_api_key), and Field is
	// nginx's.
	Header string
	// PathSegments, if above 0, appends the first segments of the
	// request's path to the key.
	PathSegments int
	text         string
}

// ParseKey reads a key as --key writes it.
func ParseKey(s string) (KeySpec, error) {
	k := KeySpec{text: s}
	base, route, hasRoute := strings.Cut(s, "+")
	if hasRoute {
		n, ok := strings.CutPrefix(route, "path:")
		seg, err := strconv.Atoi(n)
		if !ok || err != nil || seg < 1 || seg > 16 {
			return KeySpec{}, fmt.Errorf("key %q: after + want path:N, N the path's first segments (1 to 16)", s)
		}
		k.PathSegments = seg
	}
	switch {
	case base == "ip":
	case strings.HasPrefix(base, "field:"):
		k.Field = strings.TrimPrefix(base, "field:")
	case strings.HasPrefix(base, "."):
		k.Field = strings.TrimPrefix(base, ".")
	case strings.HasPrefix(base, "header:"):
		h := strings.TrimPrefix(base, "header:")
		if h == "" {
			return KeySpec{}, fmt.Errorf("key %q: header: names no header", s)
		}
		k.Header, k.Field = h, "http_"+strings.ToLower(strings.ReplaceAll(h, "-", "_"))
	default:
		return KeySpec{}, fmt.Errorf("key %q: want ip, field:NAME, .NAME or header:NAME, optionally followed by +path:N", s)
	}
	if base != "ip" && k.Field == "" {
		return KeySpec{}, fmt.Errorf("key %q names no field", s)
	}
	return k, nil
}

func (k KeySpec) String() string {
	if k.text != "" {
		return k.text
	}
	return "ip"
}

// of is the key a request counts under: key, then the first segments of
// its path if k asks for them, built in buf.
func (k KeySpec) of(buf *[]byte, key, path []byte) string {
	if k.PathSegments == 0 {
		return string(key)
	}
	*buf = route(append((*buf)[:0], key...), path, k.PathSegments)
	return string(*buf)
}

// pathOf is the path a logged field gives, its query cut off: of a
// request line ("GET /a/b?q HTTP/1.1") if request says it is one, of a
// whole URL ("https://api.example.com/a/b"), or the field itself.
func pathOf(field []byte, request bool) []byte {
	if request {
		field = requestPath(field)
	}
	field = urlPath(field)
	if q := bytes.IndexByte(field, '?'); q >= 0 {
		field = field[:q]
	}
	return field
}

// route appends to key the first n segments of path (its query cut off):
// "/api/v1/users?id=3" with n 2 gives key + " /api/v1".
func route(key []byte, path []byte, n int) []byte {
	if q := bytes.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	end, seen := len(path), 0
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			if seen++; seen == n {
				end = i
				break
			}
		}
	}
	key = append(key, ' ')
	if len(path) == 0 {
		return append(key, '/')
	}
	return append(key, path[:end]...)
}

// requestPath is the path of an HTTP request line ("GET /a/b?q HTTP/1.1"
// gives "/a/b?q"); the line itself if it is not one (a logged $uri).
func requestPath(req []byte) []byte {
	sp := bytes.IndexByte(req, ' ')
	if sp < 0 {
		return req
	}
	rest := req[sp+1:]
	if e := bytes.IndexByte(rest, ' '); e >= 0 {
		rest = rest[:e]
	}
	return rest
}

// urlPath is the path of a URL as some logs give it whole
// ("https://api.example.com/v1/items?id=3" gives "/v1/items?id=3"); a
// path as it is.
func urlPath(u []byte) []byte {
	for _, scheme := range []string{"https://", "http://"} {
		if len(u) > len(scheme) && string(u[:len(scheme)]) == scheme {
			rest := u[len(scheme):]
			if i := bytes.IndexByte(rest, '/'); i >= 0 {
				return rest[i:]
			}
			return []byte("/")
		}
	}
	return u
}

// forwardedFor reports whether a field is an X-Forwarded-For list, by
// its name (http_x_forwarded_for, X-Forwarded-For, xff).
func forwardedFor(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return strings.HasSuffix(n, "forwarded_for") || n == "xff"
}

// lastAddress is the last address of an X-Forwarded-For list
// ("198.51.100.1, 203.0.113.9" gives "203.0.113.9"): the one the proxy in
// front of the server appended, the client as it saw it. The addresses
// before it are the client's to write, and an abuser who writes a new
// one each time would look like many clients.
func lastAddress(list []byte) []byte {
	if i := bytes.LastIndexByte(list, ','); i >= 0 {
		list = list[i+1:]
	}
	return bytes.TrimSpace(list)
}

// addrOnly is the address of a client's address and port: "1.2.3.4" of
// "1.2.3.4:5678" (ALB's client:port, Caddy's older remote_addr) and
// "2001:db8::1" of "[2001:db8::1]:5678"; an address alone as it is (an
// IPv6 address without brackets has colons of its own).
func addrOnly(b []byte) []byte {
	if len(b) > 0 && b[0] == '[' {
		if end := bytes.IndexByte(b, ']'); end > 0 {
			return b[1:end]
		}
	}
	if i := bytes.IndexByte(b, ':'); i >= 0 && bytes.LastIndexByte(b, ':') == i {
		return b[:i]
	}
	return b
}
