package accesslog

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// Whatever encoding/json reads as one object, the scanner reads alike:
// each wanted field's scalar, nested ones too, and an array's first.
func FuzzJSONScan(f *testing.F) {
	for _, seed := range []string{
		`{"ts":1795860000,"remote_addr":"203.0.113.9","status":200}`,
		`{"ts":"2026-11-28T10:00:00Z","user":{"id":42,"name":"a\"b"},"tags":[1,{"x":"}"}],"ok":true}`,
		` { "ts" : 1.5e9 , "user" : { } , "status" : null } `,
		`{"remote_addr":"\u00e9\n","ts":[],"status":"429"}`,
		`{"a":{"b":{"c":1}},"user":{"id":"x"}}`,
		`{"ts":[1795860000.25],"user":{"name":["ShopApp/4.2.1","x"],"id":[]},"status":[null,200],"ok":[[1]]}`,
		`[1,2]`, `{"ts":1} {"ts":2}`, `{"ts":"unterminated}`, `{"ts" 1}`,
	} {
		f.Add(seed)
	}
	names := []string{"ts", "remote_addr", "status", "user.id", "user.name", "ok", "a.b.c"}
	f.Fuzz(func(t *testing.T, line string) {
		s := newJSONScanner(names)
		err := s.scan([]byte(line))
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader([]byte(line)))
		d.UseNumber()
		if d.Decode(&m) != nil || m == nil || len(bytes.Trim([]byte(line)[d.InputOffset():], " \t\r\n")) > 0 {
			return // not one object alone: the scanner may read it or not
		}
		if !utf8.ValidString(line) {
			return // encoding/json makes a bad byte U+FFFD; the scanner keeps it, as a log format's fields do
		}
		if err != nil {
			t.Fatalf("scan(%q): %v; encoding/json reads it", line, err)
		}
		for _, n := range names {
			var want any = m
			for _, part := range splitDots(n) {
				o, ok := want.(map[string]any)
				if !ok {
					want = nil
					break
				}
				want = o[part]
			}
			if a, ok := want.([]any); ok {
				// An array's first value (Caddy's headers are arrays).
				want = nil
				if len(a) > 0 {
					want = a[0]
				}
			}
			got := s.vals[s.want[n]]
			switch w := want.(type) {
			case string:
				if !got.set || !got.str || string(got.text) != w {
					t.Errorf("scan(%q) %s = %+v, want the string %q", line, n, got, w)
				}
			case json.Number:
				if !got.set || got.str || string(got.text) != w.String() {
					t.Errorf("scan(%q) %s = %+v, want the number %s", line, n, got, w)
				}
			case nil:
				if got.set {
					t.Errorf("scan(%q) %s = %+v, want none", line, n, got)
				}
			}
		}
	})
}

func splitDots(s string) []string {
	var out []string
	for {
		i := bytes.IndexByte([]byte(s), '.')
		if i < 0 {
			return append(out, s)
		}
		out, s = append(out, s[:i]), s[i+1:]
	}
}
