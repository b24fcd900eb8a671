package products

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A bucket is written as nginx can: a whole rate a second, else a whole
// rate a minute, else the rate a minute rounded up; nginx keeps a rate in
// thousandths a second, truncated; its burst is one less than the
// bucket's capacity. A window is a bucket of N at once, said so.
func TestNginxExpress(t *testing.T) {
	for _, tt := range []struct {
		want     limiters.Limit
		rate     string
		burst    int
		enforced limiters.Limit
		rounded  bool
	}{
		{limiters.Limit{N: 5, Per: time.Second, Burst: 47}, "5r/s", 46, limiters.Limit{N: 5, Per: time.Second, Burst: 47}, false},
		{limiters.Limit{N: 1, Per: 2 * time.Second, Burst: 47}, "30r/m", 46, limiters.Limit{N: 30, Per: time.Minute, Burst: 47}, false},
		{limiters.Limit{N: 120, Per: time.Minute, Burst: 1}, "2r/s", 0, limiters.Limit{N: 2, Per: time.Second, Burst: 1}, false},
		{limiters.Limit{N: 95, Per: time.Minute, Burst: 95}, "95r/m", 94, limiters.Limit{N: 1583, Per: 1000 * time.Second, Burst: 95}, true},
		{limiters.Limit{N: 1, Per: 7 * time.Second, Burst: 10}, "9r/m", 9, limiters.Limit{N: 9, Per: time.Minute, Burst: 10}, true},
		{limiters.Limit{N: 1, Per: 100 * time.Second, Burst: 300}, "1r/m", 299, limiters.Limit{N: 16, Per: 1000 * time.Second, Burst: 300}, true},
		{limiters.Limit{N: 120, Per: 10 * time.Second, Burst: 120}, "12r/s", 119, limiters.Limit{N: 12, Per: time.Second, Burst: 120}, false},
	} {
		got := NginxExpress(tt.want)
		if got.Rate != tt.rate || got.Burst != tt.burst || got.Enforced != tt.enforced || got.Rounded != tt.rounded || got.Meant() != tt.want {
			t.Errorf("%s: %s burst=%d, enforced %v, rounded %v, meant %v; want %s burst=%d, %v, %v", tt.want, got.Rate, got.Burst, got.Enforced, got.Rounded, got.Meant(), tt.rate, tt.burst, tt.enforced, tt.rounded)
		}
		if (got.Changes() != "") != tt.rounded {
			t.Errorf("%s: changes %q; want said where rounded (%v)", tt.want, got.Changes(), tt.rounded)
		}
	}
	r, err := Nginx{}.Express(limiters.Limit{N: 300, Per: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "rate=20r/m burst=299" || r.Meant() != (limiters.Limit{N: 300, Per: 15 * time.Minute}) || !strings.Contains(r.Changes(), "no window") || r.Expect() != "gcra 333/1000s burst 300" {
		t.Errorf("300/15m: %s, meant %v, changes %q, expect %q", r, r.Meant(), r.Changes(), r.Expect())
	}
	if _, err := (Nginx{}).Express(limiters.Limit{Per: time.Second}); err == nil {
		t.Error("a limit of 0 expressed; want an error")
	}
}

// nginx's limit_req, request by request, against values worked out by
// hand from ngx_http_limit_req_module.c: its clock of milliseconds, its
// rate in thousandths a second and its division truncated, a refusal that
// changes nothing, a request refused by a later zone not counted by an
// earlier one, and delay=.
func TestNginxClock(t *testing.T) {
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	type step struct {
		at       int64
		admitted bool
		held     time.Duration
	}
	for _, tt := range []struct {
		name  string
		rules []NginxRule
		steps []step
	}{
		{"10r/s burst=5: six at once, one more every 100 ms", []NginxRule{nginxRule(10, time.Second, 6)}, []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, false, 0},
			{ms(99.9), false, 0}, // 99 ms leak 990: excess 5,010 > 5,000
			{ms(100), true, 0},   // excess 5,000
			{ms(100), false, 0},
		}},
		{"10r/s: time in whole milliseconds", []NginxRule{nginxRule(10, time.Second, 1)}, []step{
			{ms(0.9), true, 0},
			{ms(99.95), false, 0}, // 99 − 0 ms: excess 10
			{ms(100.0), true, 0},  // 100 ms: excess 0, though 99.1 ms passed
		}},
		{"82r/m: 1,366 thousandths a second, truncated", []NginxRule{nginxRule(82, time.Minute, 1)}, []step{
			{0, true, 0},
			{ms(732), false, 0}, // 1,366·732/1000 = 999: excess 1
			{ms(733), true, 0},  // 1,001: excess 0 (an exact 82/60s bucket admits at 731.7 ms)
		}},
		{"a request a later zone refuses is not counted by an earlier one", []NginxRule{nginxRule(1, time.Second, 2), nginxRule(10, time.Second, 1)}, []step{
			{0, true, 0},
			{ms(1), false, 0},   // the second zone: excess 990 > 0
			{ms(100), true, 0},  // the first: 0 − 100 + 1,000 = 900 (999 − 99 + 1,000 had it counted)
			{ms(101), false, 0}, // the first: 900 − 1 + 1,000 > 1,000
		}},
		{"10r/s burst=5 delay=2: the rest held", []NginxRule{{Rate: "10r/s", Burst: 5, Delay: 2, Enforced: limiters.Limit{N: 10, Per: time.Second, Burst: 6}}}, []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, true, 100 * time.Millisecond}, // excess 3,000: (3,000 − 2,000)·1000/10,000
			{0, true, 200 * time.Millisecond},
		}},
	} {
		k := Nginx{}.NewKey(rulesOf(tt.rules))
		for i, s := range tt.steps {
			d := k.Decide(1_800_000_000_000_000_000 + s.at)
			if d.Admitted != s.admitted || d.Held != s.held {
				t.Errorf("%s: request %d at %v: admitted %v held %v; want %v, %v", tt.name, i, time.Duration(s.at), d.Admitted, d.Held, s.admitted, s.held)
			}
		}
	}
}

func rulesOf(rs []NginxRule) []Rule {
	var out []Rule
	for _, r := range rs {
		out = append(out, r)
	}
	return out
}

// nginx's configuration read back: a zone's rate and burst+1 at once, the
// zones a map applies to a key (a tier of the keys it names), none where
// its key is empty; errors name the line.
func TestNginxRead(t *testing.T) {
	ip, _ := accesslog.ParseKey("ip")
	r, err := Nginx{}.Read([]byte("limit_req_zone $binary_remote_addr zone=one:10m rate=5r/s; # the example\nlocation / {\n  limit_req zone=one burst=10;\n}\n"), "nginx.conf", ip)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "nginx.conf: one rate=5r/s burst=10" || len(r.Tiers) != 0 || len(r.Rules) != 1 || r.Rules[0].(NginxRule).Enforced != (limiters.Limit{N: 5, Per: time.Second, Burst: 11}) || r.Rules[0].(NginxRule).NoDelay {
		t.Errorf("one zone: %+v", r)
	}
	r, err = Nginx{}.Read([]byte(`map $remote_addr $shared {
    default 0;
    "100.64.0.1" 1;
    ~^10\. 1;
}
map $shared $users {
    1 "";
    default $binary_remote_addr;
}
map $shared $shared_key {
    1 $binary_remote_addr;
    default "";
}
limit_req_zone $users zone=users:1m rate=30r/m;
limit_req_zone $shared_key zone=shared:1m rate=10r/s;
limit_req zone=users burst=46 nodelay;
limit_req zone=shared burst=939 nodelay;
`), "nginx.conf", ip)
	if err != nil {
		t.Fatal(err)
	}
	enforced := func(rs []Rule) []limiters.Limit {
		var ls []limiters.Limit
		for _, r := range rs {
			ls = append(ls, r.(NginxRule).Enforced)
		}
		return ls
	}
	if r.Name != "nginx.conf: users rate=30r/m burst=46; shared rate=10r/s burst=939" {
		t.Errorf("name %q", r.Name)
	}
	for key, want := range map[string][]limiters.Limit{
		"100.64.0.1": {{N: 10, Per: time.Second, Burst: 940}},
		"10.0.0.1":   {{N: 30, Per: time.Minute, Burst: 47}},
	} {
		if got := enforced(r.RulesOf(key)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v; want %v", key, got, want)
		}
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "regular expressions") {
		t.Errorf("notes %q; want the map's regular expression said", r.Notes)
	}
	for _, tt := range []struct{ file, want string }{
		{"limit_req zone=api burst=5;\n", "no limit_req_zone names it"},
		{"limit_req_zone $binary_remote_addr zone=api:10m rate=5r/h;\nlimit_req zone=api;\n", "nginx.conf:1: rate=5r/h"},
		{"limit_req_zone $binary_remote_addr zone=api:10m rate=5r/s;\nlimit_req zone=api burst=many;\n", "nginx.conf:2: burst=many"},
		{"map $remote_addr $x {\n  a b c;\n}\nlimit_req zone=x;\n", "nginx.conf:2: a map entry"},
		{"# nothing\n", "no limit_req line"},
	} {
		if _, err := (Nginx{}).Read([]byte(tt.file), "nginx.conf", ip); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want an error saying %q", tt.file, err, tt.want)
		}
	}
}

// What Write writes, Read reads back: every key's rules, each tier's keys
// and rules, for no tier, one and two, and two rules on every key.
func TestNginxWriteRead(t *testing.T) {
	b := func(n int, per time.Duration, burst int) Rule {
		return NginxExpress(limiters.Limit{N: n, Per: per, Burst: burst})
	}
	short, _ := Nginx{}.Express(limiters.Limit{N: 20, Per: time.Second})
	long, _ := Nginx{}.Express(limiters.Limit{N: 300, Per: 15 * time.Minute})
	for _, key := range []string{"ip", "header:X-Api-Key"} {
		spec, _ := accesslog.ParseKey(key)
		for _, p := range []Policy{
			{Rules: []Rule{b(1, 2*time.Second, 30)}},
			{Rules: []Rule{short, long}},
			{Rules: []Rule{b(5, time.Second, 47)}, Tiers: []Tier{{Name: "shared", Keys: []string{"100.64.0.1", "100.64.0.2"}, Rules: []Rule{b(50, time.Second, 400)}}}},
			{Rules: []Rule{b(5, time.Second, 47)}, Tiers: []Tier{
				{Name: "shared", Keys: []string{"100.64.0.1"}, Rules: []Rule{b(50, time.Second, 400)}},
				{Name: "pollers", Keys: []string{"198.18.0.1", "198.18.0.2"}, Rules: []Rule{b(1, time.Second, 60)}},
			}},
		} {
			p.Key, p.Clients = spec, 1000
			text, err := Nginx{}.Write(p)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Nginx{}.Read([]byte(text), "nginx.conf", spec)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			same := func(got, want []Rule) bool {
				if len(got) != len(want) {
					return false
				}
				for i := range got {
					g, w := got[i].(NginxRule), want[i].(NginxRule)
					if g.String() != w.String() || g.Enforced != w.Enforced || g.NoDelay != w.NoDelay {
						return false
					}
				}
				return true
			}
			if !same(r.RulesOf("203.0.113.9"), p.Rules) || len(r.Notes) != 0 {
				t.Errorf("--key %s: every key's %v, notes %q; want %v\n%s", key, r.RulesOf("203.0.113.9"), r.Notes, p.Rules, text)
			}
			for _, tier := range p.Tiers {
				for _, k := range tier.Keys {
					if !same(r.RulesOf(k), tier.Rules) {
						t.Errorf("--key %s: %s's %v; want %v\n%s", key, k, r.RulesOf(k), tier.Rules, text)
					}
				}
			}
		}
	}
	if _, err := (Nginx{}).Write(Policy{}); err == nil {
		t.Error("a policy of no rule written; want an error")
	}
}

// A configuration read back says what ratelab probe --expect takes of
// it: every key's rules as the probe finds them, two at most.
func TestReadExpect(t *testing.T) {
	r, err := Nginx{}.Read([]byte("limit_req_zone $binary_remote_addr zone=a:1m rate=38r/s;\nlimit_req_zone $binary_remote_addr zone=b:1m rate=20r/m;\nlimit_req zone=a burst=37 nodelay;\nlimit_req zone=b burst=298 nodelay;\n"), "nginx.conf", accesslog.KeySpec{})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := r.Expect(); err != nil || e != "gcra 38/s burst 38, gcra 333/1000s burst 299" {
		t.Errorf("expect %q, %v", e, err)
	}
	r.Rules = append(r.Rules, r.Rules[0])
	if _, err := r.Expect(); err == nil {
		t.Error("three rules expected; want an error: the probe checks two")
	}
}

// A zone without nodelay holds what is beyond delay= and one: the probe
// finds a bucket with a queue (checked against Debian's nginx, which
// held 5 of a burst of 5 at 10r/s, 99 of 99 on their schedule); and a
// one-line location's limit_req is read.
func TestNginxDelayExpect(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"limit_req zone=one burst=5;", "gcra 10/s burst 1 queue 5"},
		{"limit_req zone=one burst=5 delay=2;", "gcra 10/s burst 3 queue 3"},
		{"limit_req zone=one burst=5 nodelay;", "gcra 10/s burst 6"},
	} {
		conf := "limit_req_zone $http_x_api_key zone=one:1m rate=10r/s;\nserver { location / { " + tt.line + " } }\n"
		r, err := Nginx{}.Read([]byte(conf), "nginx.conf", accesslog.KeySpec{})
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if got, err := r.Expect(); err != nil || got != tt.want {
			t.Errorf("%s: expect %q (%v); want %q", tt.line, got, err, tt.want)
		}
	}
}
