package products

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/haproxytest"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// HAProxy's freq_ctr, request by request, against values worked out by
// hand from src/freq_ctr.c: http_req_rate(1s) gt 3 on one key, from an
// even millisecond base. The rate read counts the request itself, and a
// denied request is counted too.
func TestHAProxyFreqCtr(t *testing.T) {
	const base = 1_000_000 // ms, even
	k := HAProxy{}.NewKey([]Rule{HAProxyRule{Period: time.Second, Limit: 3}}).(*haproxyKey)
	for _, step := range []struct {
		at         int64 // ms after base
		admitted   bool
		tick       int64 // after base
		curr, prev int64
		rate       int64
	}{
		{0, true, 0, 1, 0, 1}, // the first request anchors the periods
		{100, true, 0, 2, 0, 2},
		{200, true, 0, 3, 0, 3},
		{300, false, 0, 4, 0, 4}, // over: denied, and counted
		// One period on: the last one's 4 weigh whole at its start.
		{1000, false, 1000, 1, 4, 5},
		{1500, false, 1000, 2, 4, 4}, // 4·500/1000 + 2
		{1750, false, 1000, 3, 4, 4}, // 4·250/1000 + 3
		{2000, false, 2000, 1, 3, 4}, // still sending: still refused
		{2999, true, 2000, 2, 3, 2},  // ⌊3·1/1000⌋ + 2
		// Two periods idle and more: both counts start again.
		{5000, true, 5000, 1, 0, 1},
		// An odd millisecond: the period starts at the even one before.
		{7001, true, 7000, 1, 0, 1},
		{7999, true, 7000, 2, 0, 2},
		{8000, true, 8000, 1, 2, 3},
		{8001, true, 8000, 2, 2, 3},  // ⌊2·999/1000⌋ + 2: the estimate rounds down
		{8002, false, 8000, 3, 2, 4}, // ⌊2·998/1000⌋ + 3
	} {
		now := base + step.at
		d := k.Decide(now * int64(time.Millisecond))
		c := k.ctrs[0]
		rate := c.rate(now, 1000)
		if d.Admitted != step.admitted || c.tick-base != step.tick || c.curr != step.curr || c.prev != step.prev || rate != step.rate {
			t.Fatalf("+%dms: admitted %v, tick +%d, curr %d, prev %d, rate %d; want %v, +%d, %d, %d, %d",
				step.at, d.Admitted, c.tick-base, c.curr, c.prev, rate, step.admitted, step.tick, step.curr, step.prev, step.rate)
		}
	}
}

// The flapping correction: no request in this period and one or none in
// the last reads as the last's count, not its weighed part.
func TestHAProxyFlapping(t *testing.T) {
	c := freqCtr{tick: 1000, curr: 1, prev: 0, used: true}
	if r := c.rate(2500, 1000); r != 1 { // a period on: past = curr = 1, curr = 0
		t.Errorf("one request a period ago: rate %d, want 1", r)
	}
	c = freqCtr{tick: 1000, curr: 5, prev: 0, used: true}
	if r := c.rate(2500, 1000); r != 2 { // 5·500/1000
		t.Errorf("five a period ago, half gone: rate %d, want 2", r)
	}
	if r := c.rate(3500, 1000); r != 0 {
		t.Errorf("two periods on: rate %d, want 0", r)
	}
}

// Express writes a window as it is and a bucket as the window it fills
// again in; each says what HAProxy keeps otherwise.
func TestHAProxyExpress(t *testing.T) {
	for _, tt := range []struct {
		want limiters.Limit
		rule string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "http_req_rate(1m) gt 100"},
		{limiters.Limit{N: 10, Per: time.Second, Burst: 20}, "http_req_rate(2s) gt 20"},
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "http_req_rate(407s) gt 407"},
		{limiters.Limit{N: 3, Per: 1500 * time.Millisecond}, "http_req_rate(1500ms) gt 3"},
	} {
		r, err := HAProxy{}.Express(tt.want)
		if err != nil || r.String() != tt.rule || r.Meant() != tt.want || r.Changes() == "" {
			t.Errorf("%s: %v (%q, %v)", tt.want, r, r.Changes(), err)
		}
	}
	if _, err := (HAProxy{}).Express(limiters.Limit{}); err == nil {
		t.Error("no limit: no error")
	}
}

// haPolicy is two windows for every key and one for a tier, by header.
func haPolicy(t *testing.T) Policy {
	t.Helper()
	key, err := accesslog.ParseKey("header:X-Api-Key")
	if err != nil {
		t.Fatal(err)
	}
	h := HAProxy{}
	rule := func(l limiters.Limit) Rule {
		r, err := h.Express(l)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return Policy{
		Key:     key,
		Notes:   []string{"ratelab plan's two windows for b2b.json."},
		Rules:   []Rule{rule(limiters.Limit{N: 100, Per: time.Minute}), rule(limiters.Limit{N: 2000, Per: time.Hour})},
		Tiers:   []Tier{{Name: "shared", Keys: []string{"key_a", "key_b"}, Rules: []Rule{rule(limiters.Limit{N: 600, Per: time.Minute})}}},
		Clients: 3000, Backend: "127.0.0.1:9000", Listen: "127.0.0.1:8000",
	}
}

// What Write writes, Read reads back: the same rules for every key, and
// the tier's keys with theirs.
func TestHAProxyRoundTrip(t *testing.T) {
	p := haPolicy(t)
	text, err := HAProxy{}.Write(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text)
	r, err := HAProxy{}.Read([]byte(text), "haproxy.cfg", p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes %q, want none", r.Notes)
	}
	if got := rulesText(r.Rules); got != "http_req_rate(1m) gt 100, http_req_rate(1h) gt 2000" {
		t.Errorf("every key's rules: %s", got)
	}
	if len(r.Tiers) != 1 || r.Tiers[0].Name != "ratelab_shared" || strings.Join(r.Tiers[0].Keys, " ") != "key_a key_b" || rulesText(r.Tiers[0].Rules) != "http_req_rate(1m) gt 600" {
		t.Errorf("tiers %+v", r.Tiers)
	}
	if got := rulesText(r.RulesOf("key_b")); got != "http_req_rate(1m) gt 600" {
		t.Errorf("key_b's rules: %s", got)
	}
	if !strings.Contains(text, "server app 127.0.0.1:9000") || strings.Count(text, "127.0.0.1:9000") != 1 {
		t.Error("the backend is not named once")
	}
}

func rulesText(rs []Rule) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// Read takes HAProxy's other spellings of the same limit (sc0_http_req_rate,
// ge, a table named in the fetch, a frontend's own table) and says what
// it takes otherwise than HAProxy would; a bad line is named.
func TestHAProxyRead(t *testing.T) {
	key, _ := accesslog.ParseKey("ip")
	cfg := `frontend fe
    bind 127.0.0.1:8080
    stick-table type ip size 100k expire 30s store http_req_rate(10s)
    acl api path_beg /api
    http-request track-sc0 src
    http-request track-sc1 req.hdr(x-user) table per_user
    http-request deny deny_status 429 if api { sc0_http_req_rate ge 21 } || { sc_http_req_rate(1,per_user) gt 50 }
    default_backend app

backend per_user
    stick-table type string size 100k store http_req_rate(1m)
`
	r, err := HAProxy{}.Read([]byte(cfg), "edge.cfg", key)
	if err != nil {
		t.Fatal(err)
	}
	if got := rulesText(r.Rules); got != "http_req_rate(10s) gt 20, http_req_rate(1m) gt 50" {
		t.Errorf("rules: %s", got)
	}
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[0], "req.hdr(x-user)") || !strings.Contains(r.Notes[1], "acls on anything but the key") {
		t.Errorf("notes %q", r.Notes)
	}
	for _, bad := range []struct{ cfg, want string }{
		{"frontend fe\n    http-request deny if { sc_http_req_rate(0) gt 5 }\n", "no http-request deny on a tracked"},
		{"frontend fe\n    stick-table type ip size 1k store http_req_rate(ten)\n", "edge.cfg:2: http_req_rate(ten)"},
		{"frontend fe\n    http-request track-scX src\n", "edge.cfg:2: track-scX"},
		{"frontend fe\n    http-request track-sc0 src\n    http-request deny if { sc_http_req_rate(0) gt many }\n", "edge.cfg:3: { sc_http_req_rate(0) gt many }"},
		{"frontend fe\n    http-request track-sc0 src\n    http-request deny if { sc0_http_req_rate lt 5 }\n", "edge.cfg:3: { sc0_http_req_rate lt 5 }"},
		{"frontend fe\n    http-request track-sc0 src table t\n    http-request deny if { sc_http_req_rate(0) gt 5 }\nbackend t\n    stick-table type ip size 1k store gpc0\n", "edge.cfg:3: the table t stores no http_req_rate"},
	} {
		if _, err := (HAProxy{}).Read([]byte(bad.cfg), "edge.cfg", key); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.cfg, err, bad.want)
		}
	}
}

// HAProxy's own checker reads what Write writes, keyed by address and by
// header (skipped where HAProxy is not installed, unless
// HAPROXY_REQUIRED).
func TestHAProxyChecks(t *testing.T) {
	bin := haproxytest.Binary(t)
	if bin == "" {
		t.Skip("haproxy is not installed (make test-clocked installs Debian's haproxy)")
	}
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := haPolicy(t)
		p.Key, _ = accesslog.ParseKey(k)
		if k == "ip" {
			p.Tiers[0].Keys = []string{"10.0.0.1", "10.0.0.2"}
		}
		text, err := HAProxy{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
			t.Errorf("--key %s: haproxy -c: %v\n%s\n%s", k, err, out, text)
		}
	}
}
