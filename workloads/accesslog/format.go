// Package accesslog reads the access logs servers already write (nginx's
// and Apache's combined and common formats, an nginx log_format of one's
// own, JSON lines, and ratelab's own t,key[,n] CSV traces) as requests:
// when each came, from which client (the key a limit would count it
// under), at what cost, and what the server answered.
//
// A Reader streams: it holds a line at a time, and a bounded window of
// lines to put back in time order (logs written by several workers are out
// of order by a little). A line it cannot read is counted, and the first
// few are kept with their line numbers (Reader.Skipped); it never invents
// a request, and an input that fails (a truncated gzip) stops it with an
// error naming the line.
package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// The formats a Reader reads, by the names --format gives them.
const (
	Combined = "combined" // nginx's and Apache's combined: common, then "referer" "user agent"
	Common   = "common"   // host ident user [time] "request" status bytes
	JSON     = "json"     // one JSON object a line
	CSV      = "csv"      // ratelab's trace: t,key[,n...], t in seconds from the start
)

// The log_format strings of the named formats, as nginx writes them.
// Apache's %h %l %u %t "%r" %>s %b (and "%{Referer}i" "%{User-agent}i")
// writes the same lines, but for a quote in a field: Apache writes \",
// nginx \x22; a quote after a backslash does not end a field.
const (
	combinedFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	commonFormat   = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`
)

// A template is an nginx log_format: literal text and variables in turn.
// A line is read by matching each literal at its place and taking each
// variable as the text up to the next literal (nginx escapes the quotes a
// variable holds, so a literal quote ends it).
type template struct {
	parts []part
	vars  map[string]int // a variable's name (no $) to its index in parts
}

type part struct {
	lit string // literal text; empty for a variable
	v   string // the variable's name, without $
	b   []byte // lit, as bytes
}

// parseTemplate reads an nginx log_format string: $name and ${name} are
// variables, everything else literal.
func parseTemplate(s string) (*template, error) {
	t := &template{vars: map[string]int{}}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String(), b: []byte(lit.String())})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '$' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		name, n := varName(s[i+1:])
		if name == "" {
			return nil, fmt.Errorf("log format %q: a $ at byte %d names no variable", s, i)
		}
		if len(t.parts) > 0 && lit.Len() == 0 && t.parts[len(t.parts)-1].lit == "" {
			return nil, fmt.Errorf("log format %q: $%s follows a variable with nothing between them, so a line cannot say where one ends", s, name)
		}
		flush()
		if _, dup := t.vars[name]; dup {
			return nil, fmt.Errorf("log format %q: $%s appears twice", s, name)
		}
		t.vars[name] = len(t.parts)
		t.parts = append(t.parts, part{v: name})
		i += 1 + n
	}
	flush()
	if len(t.vars) == 0 {
		return nil, fmt.Errorf("log format %q has no variable", s)
	}
	return t, nil
}

// varName returns the variable name s starts with (after the $) and how
// many bytes it takes: name or {name}.
func varName(s string) (string, int) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 2 {
			return "", 0
		}
		return s[1:end], end + 1
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}

// errNoMatch is a line that is not of the template.
var errNoMatch = errors.New("not of the log format")

// match splits line into the template's variables: into[i] is the value of
// the variable at parts[i] (literals' entries are left alone).
func (t *template) match(line []byte, into [][]byte) error {
	pos := 0
	for i, p := range t.parts {
		if p.lit != "" {
			if !hasPrefixAt(line, pos, p.lit) {
				return fmt.Errorf("%w: want %q at column %d", errNoMatch, p.lit, pos+1)
			}
			pos += len(p.lit)
			continue
		}
		end := len(line)
		switch next := i + 1; {
		case next == len(t.parts)-1:
			// The line's last literal ends it: the variable runs to it,
			// whatever it holds ("/a;b;" for $uri;).
			lit := t.parts[next].b
			if len(line)-len(lit) < pos || string(line[len(line)-len(lit):]) != string(lit) {
				return fmt.Errorf("%w: the line does not end with %q", errNoMatch, lit)
			}
			end = len(line) - len(lit)
		case next < len(t.parts):
			j := indexAt(line, pos, t.parts[next].b)
			if j < 0 {
				return fmt.Errorf("%w: $%s at column %d runs to the end of the line (no %q after it)", errNoMatch, p.v, pos+1, t.parts[next].lit)
			}
			end = j
		}
		into[i] = line[pos:end]
		pos = end
	}
	if pos != len(line) {
		return fmt.Errorf("%w: %d bytes left over at column %d", errNoMatch, len(line)-pos, pos+1)
	}
	return nil
}

func hasPrefixAt(b []byte, at int, s string) bool {
	return len(b)-at >= len(s) && string(b[at:at+len(s)]) == s
}

// indexAt is the index in b, from at on, of s; -1 if none. A quote a
// backslash escapes (Apache writes a quote in a field as \") is not one
// that s may start with.
func indexAt(b []byte, at int, s []byte) int {
	for {
		var i int
		if len(s) == 1 {
			i = bytes.IndexByte(b[at:], s[0])
		} else {
			i = bytes.Index(b[at:], s)
		}
		if i < 0 {
			return -1
		}
		if s[0] != '"' || !escaped(b, at+i) {
			return at + i
		}
		at += i + 1
	}
}

// escaped reports whether b[i] follows an odd run of backslashes.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// A preset is the log of a product, by name (--format caddy): the JSON
// fields it writes each thing in, the likeliest first, or (format) a
// log_format of its own. A field an option names wins over the preset's.
type preset struct {
	about                           string
	format                          string // a log_format template; empty: JSON
	time, addr, status, agent, path []string
	// headers are the fields a request header of the name given is
	// logged in, the likeliest first; nil: the product logs none but
	// those it names (noHeaders says so).
	headers   func(name string) []string
	noHeaders string
}

// headerFields are the fields a JSON log of no product's may log a
// request header in: nginx's variable (a log_format with escape=json),
// the name as given, and Go's canonical form.
func headerFields(name string) []string {
	out := []string{"http_" + strings.ToLower(strings.ReplaceAll(name, "-", "_"))}
	for _, n := range []string{name, textproto.CanonicalMIMEHeaderKey(name), strings.ToLower(name)} {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// presets are the products' logs ratelab reads by name.
var presets = map[string]preset{
	"caddy": {about: "Caddy's JSON access log (ts in seconds, request.client_ip, headers as arrays)",
		time: []string{"ts"}, addr: []string{"request.client_ip", "request.remote_ip", "request.remote_addr"},
		status: []string{"status"}, agent: []string{"request.headers.User-Agent"}, path: []string{"request.uri"},
		headers: func(h string) []string { return []string{"request.headers." + textproto.CanonicalMIMEHeaderKey(h)} }},
	"traefik": {about: "Traefik's JSON access log (StartUTC, ClientHost, DownstreamStatus; request_User-Agent when headers are kept)",
		time: []string{"StartUTC", "time"}, addr: []string{"ClientHost", "ClientAddr"},
		status: []string{"DownstreamStatus"}, agent: []string{"request_User-Agent"}, path: []string{"RequestPath"},
		headers: func(h string) []string {
			return slices.Compact([]string{"request_" + textproto.CanonicalMIMEHeaderKey(h), "request_" + h})
		}},
	"alb": {about: "AWS Application Load Balancer's access log (space-separated, client:port, the ELB's status)",
		format:    `$type $time_iso8601 $elb $client_port $target_port $request_processing_time $target_processing_time $response_processing_time $status $target_status_code $received_bytes $sent_bytes "$request" "$http_user_agent" $rest`,
		noHeaders: "AWS ALB's access log keeps no request header but the user agent"},
	"cloudflare": {about: "Cloudflare's HTTP request logs, Logpush JSON (EdgeStartTimestamp, ClientIP, EdgeResponseStatus)",
		time: []string{"EdgeStartTimestamp"}, addr: []string{"ClientIP"},
		status: []string{"EdgeResponseStatus"}, agent: []string{"ClientRequestUserAgent"}, path: []string{"ClientRequestURI", "ClientRequestPath"},
		// Logpush writes the headers a zone's custom fields name, under
		// RequestHeaders, their names in lower case.
		headers: func(h string) []string { return []string{"RequestHeaders." + strings.ToLower(h)} }},
	"gcp": {about: "Google Cloud Load Balancing's request logs, as Cloud Logging exports them (timestamp, httpRequest.*)",
		time: []string{"timestamp"}, addr: []string{"httpRequest.remoteIp"},
		status: []string{"httpRequest.status"}, agent: []string{"httpRequest.userAgent"}, path: []string{"httpRequest.requestUrl"},
		noHeaders: "Google Cloud Load Balancing's request log keeps no request header but the user agent and the referer"},
}

// Presets are the names of the products' logs a Reader reads by name
// (Options.Format), each with what it is, in order.
func Presets() [][2]string {
	var out [][2]string
	for _, name := range []string{"caddy", "traefik", "alb", "cloudflare", "gcp"} {
		out = append(out, [2]string{name, presets[name].about})
	}
	return out
}
