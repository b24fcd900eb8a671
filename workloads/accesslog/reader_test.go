package accesslog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// read returns every entry of log, read with o, and the reader.
func read(t *testing.T, log string, o Options) ([]Entry, *Reader) {
	t.Helper()
	return readAllOf(t, []Input{{Name: "access.log", R: strings.NewReader(log)}}, o)
}

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

// Lines as nginx and Apache write them, with what each goes wrong on.
const combinedLog = `203.0.113.9 - - [28/Nov/2026:10:00:00 +0000] "GET /api/v1/users?page=2 HTTP/1.1" 200 512 "-" "Mozilla/5.0 (X11; Linux x86_64)"
198.51.100.7 - alice [28/Nov/2026:10:00:00 +0000] "POST /api/v1/orders HTTP/2.0" 429 0 "https://shop.example/cart" "curl/8.5.0"
this is not a log line
203.0.113.9 - - [28/Nov/2026:10:00:01 +0000] "GET /static/app.js HTTP/1.1" 304 - "https://shop.example/" "Mozilla/5.0 (X11; Linux x86_64)"
203.0.113.9 - - [28/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1" 2x0 10 "-" "Mozilla/5.0"
203.0.113.9 - - [31/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1" 200 10 "-" "Mozilla/5.0"

- - - [28/Nov/2026:10:00:02 +0000] "GET / HTTP/1.1" 200 10 "-" "Mozilla/5.0"
192.0.2.1 - - [28/Nov/2026:11:00:02 +0100] "\x16\x03\x01" 400 157 "-" "-"
`

func TestCombined(t *testing.T) {
	got, r := read(t, combinedLog, Options{})
	want := []struct {
		at          string
		key         string
		status      int
		agent, path bool
	}{
		{"2026-11-28T10:00:00Z", "203.0.113.9", 200, true, true},
		{"2026-11-28T10:00:00Z", "198.51.100.7", 429, true, true},
		{"2026-11-28T10:00:01Z", "203.0.113.9", 304, true, true},
		{"2026-11-28T10:00:02Z", "192.0.2.1", 400, false, true}, // an agent of "-" is none
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.At != at(w.at) || g.Key != w.key || g.Status != w.status || g.N != 1 || (g.Agent != 0) != w.agent || (g.Path != 0) != w.path {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}
	// The same agent hashes alike, a different one not.
	if got[0].Agent != got[2].Agent || got[0].Agent == got[1].Agent {
		t.Errorf("agents %x %x %x: want the first and third alike, the second not", got[0].Agent, got[1].Agent, got[2].Agent)
	}
	n, skips := r.Skipped()
	wantSkips := []string{
		"access.log:3: not of the log format: $remote_addr at column 1 runs to the end of the line (no \" - \" after it)",
		"access.log:5: status \"2x0\" is not an HTTP status",
		"access.log:6: time \"31/Nov/2026:10:00:01 +0000\"",
		"access.log:8: $remote_addr (the key) is empty",
	}
	if n != len(wantSkips) || len(skips) != len(wantSkips) {
		t.Fatalf("skipped %d: %v; want %d", n, skips, len(wantSkips))
	}
	for i, w := range wantSkips {
		if !strings.HasPrefix(skips[i].String(), w) {
			t.Errorf("skip %d = %q, want it to start %q", i, skips[i], w)
		}
	}
	if r.Lines() != 9 || r.Requests() != 4 {
		t.Errorf("%d lines, %d requests; want 9 and 4", r.Lines(), r.Requests())
	}
}

func TestCommonAndKeys(t *testing.T) {
	log := `10.0.0.1 - bob [28/Nov/2026:10:00:00 +0000] "GET /api/v2/items/7?x=1 HTTP/1.1" 200 20
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 20
`
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"ip", []string{"10.0.0.1", "10.0.0.1"}},
		{"ip+path:2", []string{"10.0.0.1 /api/v2", "10.0.0.1 /"}},
		{"ip+path:9", []string{"10.0.0.1 /api/v2/items/7", "10.0.0.1 /"}},
		{"field:remote_user", []string{"bob"}}, // the second has none: skipped
	} {
		k, err := ParseKey(c.key)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := read(t, log, Options{Format: Common, Key: k})
		var keys []string
		for _, e := range got {
			keys = append(keys, e.Key)
		}
		if strings.Join(keys, "|") != strings.Join(c.want, "|") {
			t.Errorf("--key %s: keys %q, want %q", c.key, keys, c.want)
		}
	}
	for _, bad := range []string{"", "user", "field:", "ip+path:0", "ip+route:2", "header:"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) = nil error, want one", bad)
		}
	}
}

// An nginx log_format of one's own: the time in ISO 8601, an API key
// header, the cost in a field of its own.
func TestLogFormat(t *testing.T) {
	format := `$remote_addr [$time_iso8601] "$request" $status key=$http_x_api_key tokens=$upstream_tokens "$http_user_agent"`
	log := `203.0.113.9 [2026-11-28T10:00:00.250+00:00] "GET /v1/chat HTTP/1.1" 200 key=k-123 tokens=812 "sdk/1.2"
203.0.113.9 [2026-11-28T10:00:00.500+00:00] "GET /v1/chat HTTP/1.1" 200 key=k-123 tokens=- "sdk/1.2"
203.0.113.9 [2026-11-28T10:00:01+00:00] "GET /v1/chat HTTP/1.1" 200 key=k-9 tokens=lots "sdk/1.2"
`
	k, _ := ParseKey("header:X-Api-Key")
	got, r := read(t, log, Options{Format: format, Key: k, Cost: "field:upstream_tokens"})
	if len(got) != 1 || got[0].Key != "k-123" || got[0].N != 812 || got[0].At != at("2026-11-28T10:00:00.25Z") {
		t.Errorf("entries %+v; want one of k-123 costing 812 at 10:00:00.25", got)
	}
	if r.Free() != 1 {
		t.Errorf("free %d; want 1 (tokens=-)", r.Free())
	}
	if n, s := r.Skipped(); n != 1 || !strings.Contains(s[0].String(), `access.log:3: cost "lots"`) {
		t.Errorf("skipped %d %v; want line 3's cost", n, s)
	}
	for _, c := range []struct{ format, key, want string }{
		{`$remote_addr $status`, "ip", "has no time"},
		{`[$time_local] $status`, "ip", "has no $remote_addr"},
		{`$remote_addr [$time_local]`, "field:user", "has no $user"},
		{`$remote_addr$status [$time_local]`, "ip", "nothing between them"},
		{`$remote_addr [$time_local]`, "ip+path:1", "has no path"},
		{`plain`, "ip", "want combined, common, json, csv"},
	} {
		k, _ := ParseKey(c.key)
		_, err := NewReader([]Input{{Name: "x", R: strings.NewReader("")}}, Options{Format: c.format, Key: k})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("format %q, key %s: error %v; want one saying %q", c.format, c.key, err, c.want)
		}
	}
}

// A JSON log of the same traffic as combinedLog's requests reads as the
// same entries: times as RFC 3339, seconds and milliseconds.
func TestJSONAsCombined(t *testing.T) {
	log := `{"ts":"2026-11-28T10:00:00Z","remote_addr":"203.0.113.9","request":"GET /api/v1/users?page=2 HTTP/1.1","status":200,"http_user_agent":"Mozilla/5.0 (X11; Linux x86_64)"}
{"ts":1795860000,"remote_addr":"198.51.100.7","request":"POST /api/v1/orders HTTP/2.0","status":"429","http_user_agent":"curl/8.5.0"}
{"ts":"1795860001000","remote_addr":"203.0.113.9","request":"GET /static/app.js HTTP/1.1","status":304,"http_user_agent":"Mozilla/5.0 (X11; Linux x86_64)"}
{"ts":1795860002.0,"remote_addr":"192.0.2.1","request":"\\x16\\x03\\x01","status":400}
{"ts":"yesterday","remote_addr":"192.0.2.1"}
{"remote_addr":"192.0.2.1"}
[1,2]
{"ts":1795860002,"remote_addr":"192.0.2.1"} {"x":1}
`
	want, _ := read(t, combinedLog, Options{})
	got, r := read(t, log, Options{Format: JSON})
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		w, g := want[i], got[i]
		w.Line, g.Line = 0, 0
		if g != w {
			t.Errorf("entry %d = %+v, want %+v (as combined)", i, g, w)
		}
	}
	_, skips := r.Skipped()
	wantSkips := []string{"access.log:5: ts: time \"yesterday\"", "access.log:6: no time", "access.log:7: not a JSON object", "access.log:8: more than one JSON value"}
	for i, w := range wantSkips {
		if i >= len(skips) || !strings.HasPrefix(skips[i].String(), w) {
			t.Errorf("skips %v; want %d to start %q", skips, i, w)
		}
	}
	// Named fields, nested.
	k, _ := ParseKey(".user.id")
	got, _ = read(t, `{"at":"2026-11-28T10:00:00Z","user":{"id":42},"tokens":7}`+"\n", Options{Format: JSON, Key: k, Time: ".at", Cost: ".tokens"})
	if len(got) != 1 || got[0].Key != "42" || got[0].N != 7 {
		t.Errorf("entries %+v; want user 42 costing 7", got)
	}
}

func TestCSVTrace(t *testing.T) {
	log := "t,key,n\n0,alice\n0.5,\"bob, jr\",3\n0.25,carol\nx,dave\n1,erin,2,1\n"
	got, r := read(t, log, Options{Format: CSV, Reorder: -1})
	if len(got) != 2 || got[1].Key != "bob, jr" || got[1].N != 3 || got[1].At != int64(500*time.Millisecond) {
		t.Errorf("entries %+v; want alice and bob, jr at 0.5s costing 3", got)
	}
	n, skips := r.Skipped()
	if n != 3 || !strings.Contains(skips[0].String(), "access.log:4: 250ms earlier") || !strings.Contains(skips[1].String(), "access.log:5: time \"x\"") || !strings.Contains(skips[2].String(), "access.log:6: an actual cost") {
		t.Errorf("skipped %d: %v", n, skips)
	}
	k, _ := ParseKey("field:user")
	if _, err := NewReader([]Input{{Name: "x", R: strings.NewReader("")}}, Options{Format: CSV, Key: k}); err == nil {
		t.Error("a CSV trace with --key field:user: no error")
	}
}

// Lines out of order by less than the reorder window are taken in order;
// by more, skipped and said so.
func TestReorder(t *testing.T) {
	line := func(sec int, who string) string {
		return who + ` - - [28/Nov/2026:10:00:` + string(rune('0'+sec/10)) + string(rune('0'+sec%10)) + ` +0000] "GET / HTTP/1.1" 200 1 "-" "-"` + "\n"
	}
	log := line(1, "a") + line(3, "b") + line(2, "c") + line(6, "d") + line(1, "e") + line(6, "f")
	got, r := read(t, log, Options{Reorder: 2 * time.Second})
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, "") != "acbdf" {
		t.Errorf("order %q, want acbdf", strings.Join(keys, ""))
	}
	if n, s := r.Skipped(); n != 1 || !strings.HasPrefix(s[0].String(), "access.log:5: 2s earlier than a line already taken") {
		t.Errorf("skipped %d %v; want line 5, 2s early", n, s)
	}
}

// A gzip log reads as the plain one; a truncated one stops with an error
// that names it.
func TestGzip(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(combinedLog))
	zw.Close()
	got, _ := read(t, z.String(), Options{})
	if len(got) != 4 {
		t.Errorf("%d entries from gzip, want 4", len(got))
	}
	r, _ := NewReader([]Input{{Name: "cut.gz", R: bytes.NewReader(z.Bytes()[:z.Len()-10])}}, Options{})
	var err error
	for err == nil {
		_, err = r.Read()
	}
	if err == io.EOF || !strings.HasPrefix(err.Error(), "cut.gz:") || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a truncated gzip: %v; want an unexpected EOF naming cut.gz", err)
	}
}

// A log of another format stops early, saying so, rather than read to the
// end for nothing.
func TestWrongFormat(t *testing.T) {
	log := strings.Repeat(`{"ts":1795860000,"remote_addr":"198.51.100.7"}`+"\n", 500)
	r, _ := NewReader([]Input{{Name: "app.log", R: strings.NewReader(log)}}, Options{})
	_, err := r.Read()
	if err == nil || !strings.Contains(err.Error(), "none of the first 100 lines is a request of the format combined") || r.Lines() != 100 {
		t.Errorf("after %d lines: %v; want the format named after 100", r.Lines(), err)
	}
	r, _ = NewReader([]Input{{Name: "short.log", R: strings.NewReader("junk\n")}}, Options{})
	if _, err := r.Read(); err == nil || err == io.EOF || !strings.Contains(err.Error(), "short.log:1") {
		t.Errorf("one bad line only: %v; want an error naming it", err)
	}
}

func TestEpoch(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1795860000", 1795860000e9},
		{"1795860000.123", 1795860000123e6},
		{"1795860000123", 1795860000123e6},
		{"1.79586e9", 1795860000e9},
		{"1795860000123456", 1795860000123456e3},
		{"1795860000123456789", 1795860000123456789},
	} {
		if got, err := epoch([]byte(c.in)); err != nil || got != c.want {
			t.Errorf("epoch(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-5", "1e20", "12.3x", "NaN", "99999999999999999999"} {
		if _, err := epoch([]byte(bad)); err == nil {
			t.Errorf("epoch(%q): no error", bad)
		}
	}
}

// Cloud logs nest their fields and name them otherwise, give the URL
// whole, and count time in nanoseconds: the flags name the fields.
func TestJSONCloudShapes(t *testing.T) {
	gcp := `{"timestamp":"2026-11-28T10:00:00.123456Z","httpRequest":{"remoteIp":"203.0.113.9","requestUrl":"https://api.example.com/v1/items?id=3","status":429,"userAgent":"curl/8.5.0"}}` + "\n"
	k, _ := ParseKey(".httpRequest.remoteIp+path:1")
	got, _ := read(t, gcp, Options{Format: JSON, Key: k, Time: ".timestamp", Status: ".httpRequest.status", Agent: ".httpRequest.userAgent", Path: ".httpRequest.requestUrl"})
	if len(got) != 1 || got[0].Key != "203.0.113.9 /v1" || got[0].Status != 429 || got[0].Agent == 0 || got[0].At != at("2026-11-28T10:00:00.123456Z") {
		t.Errorf("a GCP line: %+v; want 203.0.113.9 /v1, 429, an agent, at 10:00:00.123456", got)
	}
	cf := `{"ClientIP":"198.51.100.7","EdgeStartTimestamp":1795860000123456789,"EdgeResponseStatus":200,"ClientRequestPath":"/a"}` + "\n"
	k, _ = ParseKey(".ClientIP")
	got, _ = read(t, cf, Options{Format: JSON, Key: k, Time: "EdgeStartTimestamp", Status: "EdgeResponseStatus", Path: "ClientRequestPath"})
	if len(got) != 1 || got[0].At != 1795860000123456789 || got[0].Status != 200 || got[0].Path == 0 {
		t.Errorf("a Cloudflare line: %+v; want at 1795860000.123456789, 200, a path", got)
	}
	if _, err := NewReader([]Input{{Name: "x", R: strings.NewReader("")}}, Options{Status: ".status"}); err == nil || !strings.Contains(err.Error(), "name a JSON log's fields") {
		t.Errorf("--status with the combined format: %v; want an error", err)
	}
}

// Caddy writes a request's headers as arrays: the agent is the array's
// first value, as two lines with the same first agent hash alike. A field
// an option names that no line has is said, once, not read as "none".
func TestJSONArraysAndUnseenFields(t *testing.T) {
	caddy := `{"ts":1795860000.123456,"request":{"remote_ip":"100.64.0.1","uri":"/v1/feed","headers":{"User-Agent":["ShopApp/4.2.1 (iPhone; iOS 18.1)"]}},"status":200}
{"ts":1795860000.223456,"request":{"remote_ip":"100.64.0.1","uri":"/v1/feed","headers":{"User-Agent":["ShopApp/4.2.1 (iPhone; iOS 18.1)","x"]}},"status":200}
{"ts":1795860000.323456,"request":{"remote_ip":"100.64.0.1","uri":"/v1/feed","headers":{"User-Agent":["ShopApp/4.2.0 (Android 14)"]}},"status":200}
`
	k, _ := ParseKey(".request.remote_ip")
	got, r := read(t, caddy, Options{Format: JSON, Key: k, Agent: ".request.headers.User-Agent", Path: ".request.uri"})
	if len(got) != 3 || got[0].Agent == 0 || got[0].Agent != got[1].Agent || got[0].Agent == got[2].Agent || got[0].Path == 0 {
		t.Errorf("Caddy's lines: %+v; want three, the first two agents alike, the third not, and a path", got)
	}
	if u := r.Unseen(); len(u) != 0 {
		t.Errorf("unseen %q; want none", u)
	}
	_, r = read(t, caddy, Options{Format: JSON, Key: k, Agent: ".request.headers.user_agent", Status: ".request.status"})
	want := []string{"--status .request.status: no line read has the field", "--agent .request.headers.user_agent: no line read has the field"}
	if u := r.Unseen(); !slices.Equal(u, want) {
		t.Errorf("unseen %q; want %q", u, want)
	}
}

// Keyed by X-Forwarded-For, a request counts under its last address: the
// one the proxy in front appended, which the client cannot write.
func TestForwardedFor(t *testing.T) {
	format := `$remote_addr [$time_local] "$request" $status "$http_x_forwarded_for"`
	log := `10.0.0.2 [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 "1.2.3.4, 203.0.113.9"
10.0.0.2 [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 "5.6.7.8, 203.0.113.9"
10.0.0.2 [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 "198.51.100.7"
10.0.0.2 [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 "-"
`
	k, _ := ParseKey("header:X-Forwarded-For")
	got, r := read(t, log, Options{Format: format, Key: k})
	if len(got) != 3 || got[0].Key != "203.0.113.9" || got[1].Key != "203.0.113.9" || got[2].Key != "198.51.100.7" {
		t.Errorf("entries %+v; want 203.0.113.9 twice (whatever the client wrote before it), then 198.51.100.7", got)
	}
	if n, _ := r.Skipped(); n != 1 {
		t.Errorf("%d skipped; want the line without one", n)
	}
	for _, field := range []string{".x_forwarded_for", ".headers.X-Forwarded-For", ".xff"} {
		k, _ = ParseKey(field)
		line := `{"ts":1795860000,"x_forwarded_for":"1.2.3.4 , 203.0.113.9 ","xff":"1.2.3.4,203.0.113.9","headers":{"X-Forwarded-For":"203.0.113.9"}}` + "\n"
		got, _ = read(t, line, Options{Format: JSON, Key: k})
		if len(got) != 1 || got[0].Key != "203.0.113.9" {
			t.Errorf("--key %s: entries %+v; want 203.0.113.9", field, got)
		}
	}
}

// Rotated logs given in any order are read oldest first: the inputs are
// merged by time.
func TestRotatedAnyOrder(t *testing.T) {
	line := func(h int) string {
		return fmt.Sprintf(`203.0.113.9 - - [28/Nov/2026:%02d:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`+"\n", h)
	}
	newer, older := line(11)+line(12), line(9)+line(10)
	for _, inputs := range [][]Input{
		{{Name: "access.log", R: strings.NewReader(newer)}, {Name: "access.log.1", R: strings.NewReader(older)}},
		{{Name: "access.log.1", R: strings.NewReader(older)}, {Name: "access.log", R: strings.NewReader(newer)}},
	} {
		r, _ := NewReader(inputs, Options{})
		var hours []int
		for {
			e, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			hours = append(hours, time.Unix(0, e.At).UTC().Hour())
		}
		if !slices.Equal(hours, []int{9, 10, 11, 12}) {
			t.Errorf("%s then %s: the hours %v; want 9 to 12 in order", inputs[0].Name, inputs[1].Name, hours)
		}
	}
}

// Times outside 1970 to 2261 (which nanoseconds since 1970 cannot hold,
// or their spans) are lines not read, not wrapped around.
func TestTimesOutOfRange(t *testing.T) {
	log := `203.0.113.9 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"
203.0.113.9 - - [01/Jan/2300:13:55:36 +0000] "GET / HTTP/1.1" 200 1 "-" "-"
203.0.113.9 - - [01/Jan/1969:13:55:36 +0000] "GET / HTTP/1.1" 200 1 "-" "-"
`
	got, r := read(t, log, Options{})
	if n, s := r.Skipped(); len(got) != 1 || n != 2 || !strings.Contains(s[0].String(), "not between 1970 and 2261") {
		t.Errorf("%d entries, skipped %d %v; want 1, and the other two said out of range", len(got), n, s)
	}
	for _, bad := range []string{"9223372036", "9223372036854775807", "9.3e18"} {
		if _, err := epoch([]byte(bad)); err == nil {
			t.Errorf("epoch(%q): no error", bad)
		}
	}
	if _, err := cost([]byte("4294967297")); err == nil || !strings.Contains(err.Error(), "more than any limit") {
		t.Errorf("cost 2^32+1: %v; want more than any limit", err)
	}
}

// Apache escapes a quote in a field as \"; a log format's last literal
// ends the line, whatever the variable before it holds.
func TestEscapedQuotesAndLastLiteral(t *testing.T) {
	log := `203.0.113.9 - - [28/Nov/2026:10:00:00 +0000] "GET /a\" b HTTP/1.1" 200 1 "-" "Mozilla \"quoted\" 1.0"` + "\n"
	got, r := read(t, log, Options{})
	if n, s := r.Skipped(); len(got) != 1 || got[0].Status != 200 || n != 0 {
		t.Errorf("an Apache line with \\\" in its fields: %+v, skipped %d %v; want it read, status 200", got, n, s)
	}
	got, r = read(t, "[28/Nov/2026:10:00:00 +0000] 203.0.113.9 /a;b;\n", Options{Format: `[$time_local] $remote_addr $uri;`})
	if n, s := r.Skipped(); len(got) != 1 || got[0].Key != "203.0.113.9" || n != 0 {
		t.Errorf("$uri; with a ; in the uri: %+v, skipped %d %v; want it read", got, n, s)
	}
}

// A parallel parse reads as one goroutine does: the same entries in the
// same order, the same lines, skips (where and why), free lines, lines
// without the key, and the same error where one stops the log; over
// blocks of lines, with bad, blank, too long and out-of-order lines, two
// rotated files, and a log of no request at all.
func TestParallelParse(t *testing.T) {
	var big strings.Builder
	for i := range 3*parseBlock + 77 {
		sec := i / 40
		if i%97 == 5 {
			sec -= 1 // out of order, within --reorder
		}
		switch {
		case i%1013 == 7:
			big.WriteString("not a log line\n")
		case i%2039 == 11:
			big.WriteString("\n# a comment\n")
		case i%4093 == 13:
			big.WriteString(strings.Repeat("x", maxLine+10) + "\n")
		case i%3001 == 17:
			fmt.Fprintf(&big, "- - - [28/Nov/2026:10:%02d:%02d +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n", sec/60%60, sec%60)
		default:
			fmt.Fprintf(&big, "10.0.%d.%d - - [28/Nov/2026:10:%02d:%02d +0000] \"GET /p/%d HTTP/1.1\" %d 1 \"-\" \"agent %d\"\n",
				i%7, i%250, sec/60%60, sec%60, i%13, []int{200, 200, 429, 304}[i%4], i%5)
		}
	}
	bad := strings.Repeat("not a log line\n", 2*hopeless)
	for _, tt := range []struct {
		name string
		logs []string
		o    Options
	}{
		{"one file over four blocks", []string{big.String()}, Options{}},
		{"two rotated files", []string{combinedLog, big.String()}, Options{}},
		{"by path, a cost", []string{combinedLog + big.String()}, Options{Key: KeySpec{PathSegments: 2}, Reorder: -1}},
		{"no request in the first lines", []string{bad + big.String()}, Options{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				entries                  []Entry
				err                      string
				lines, requests, skipped int
				skips                    []Skip
				noKey                    int
				firstNoKey               Skip
			}
			readAll := func(parsers int) result {
				var inputs []Input
				for i, l := range tt.logs {
					inputs = append(inputs, Input{Name: fmt.Sprintf("access.log.%d", len(tt.logs)-i), R: strings.NewReader(l)})
				}
				o := tt.o
				o.Parsers = parsers
				r, err := NewReader(inputs, o)
				if err != nil {
					t.Fatal(err)
				}
				var out result
				for {
					e, err := r.Read()
					if err == io.EOF {
						break
					}
					if err != nil {
						out.err = err.Error()
						break
					}
					out.entries = append(out.entries, e)
				}
				if s := r.streams[0]; (s.parsers != nil) != (parsers > 1) {
					t.Fatalf("%d parsers: parsed in parallel %v", parsers, s.parsers != nil)
				}
				out.lines, out.requests = r.Lines(), r.Requests()
				out.skipped, out.skips = r.Skipped()
				out.noKey, out.firstNoKey = r.NoKey()
				return out
			}
			one := readAll(1)
			t.Logf("one goroutine: %d entries of %d lines, %d skipped, %d without the key, error %q", len(one.entries), one.lines, one.skipped, one.noKey, one.err)
			if len(one.entries) == 0 && one.err == "" {
				t.Fatal("one goroutine read nothing: the comparison proves little")
			}
			for _, k := range []int{2, 3} {
				got := readAll(k)
				if got.err != one.err || got.lines != one.lines || got.requests != one.requests || got.skipped != one.skipped || got.noKey != one.noKey ||
					got.firstNoKey != one.firstNoKey || !slices.Equal(got.skips, one.skips) || !slices.Equal(got.entries, one.entries) {
					t.Errorf("%d parsers: %d entries, %d lines, %d skipped %v, error %q; one: %d, %d, %d %v, %q",
						k, len(got.entries), got.lines, got.skipped, got.skips, got.err, len(one.entries), one.lines, one.skipped, one.skips, one.err)
				}
			}
		})
	}
}
