package products

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Cloudflare's rule as the model keeps its documented shape: a request
// acted on when the count before it exceeds the limit (a limit of 1
// blocks the third), windows of the period; with a mitigation timeout,
// every request of the key refused until it ends, across windows, each
// one the limit alone would admit said Banned.
func TestCloudflareBan(t *testing.T) {
	const base = 1_800_000_000 * int64(time.Second) // a tenth second of the epoch
	s := func(sec float64) int64 { return base + int64(sec*1e9) }
	type step struct {
		at               float64
		admitted, banned bool
	}
	for _, tt := range []struct {
		name  string
		rule  CloudflareRule
		steps []step
	}{
		{"1 in 10s, no ban: the third blocked", CloudflareRule{RequestsPerPeriod: 1, Period: 10 * time.Second}, []step{
			{0, true, false}, {1, true, false}, {2, false, false}, {3, false, false},
			{10, true, false}, // the next window
		}},
		{"1 in 10s, banned 60s", CloudflareRule{RequestsPerPeriod: 1, Period: 10 * time.Second, Timeout: time.Minute}, []step{
			{0, true, false}, {1, true, false},
			{2, false, false}, // over: the ban starts
			{10, false, true}, // a new window, its count 0: the ban alone
			{61.9, false, true},
			{62, true, false}, // the ban ended at 2 s + 60 s
		}},
	} {
		k := Cloudflare{}.NewKey([]Rule{tt.rule})
		for i, st := range tt.steps {
			if d := k.Decide(s(st.at)); d.Admitted != st.admitted || d.Banned != st.banned {
				t.Errorf("%s: request %d at %.1fs: admitted %v banned %v; want %v, %v", tt.name, i, st.at, d.Admitted, d.Banned, st.admitted, st.banned)
			}
		}
	}
}

// A window is kept in the nearest period, N scaled, less the one more
// Cloudflare lets through; a bucket as the most it admits in the period
// nearest its filling; the ban as long as the period; each said.
func TestCloudflareExpress(t *testing.T) {
	for _, tt := range []struct {
		want limiters.Limit
		rule string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "requests_per_period 99, period 60, mitigation_timeout 60"},
		{limiters.Limit{N: 299, Per: 15 * time.Minute}, "requests_per_period 198, period 600, mitigation_timeout 600"},
		{limiters.Limit{N: 38, Per: time.Second}, "requests_per_period 379, period 10, mitigation_timeout 10"},
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "requests_per_period 706, period 300, mitigation_timeout 300"},
	} {
		r, err := Cloudflare{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || !strings.Contains(r.Changes(), "a ban") || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q; want %s", tt.want, r, r.Changes(), tt.rule)
		}
	}
}

func cloudflarePolicy(t *testing.T, k string) Policy {
	t.Helper()
	key, _ := accesslog.ParseKey(k)
	keys := []string{"key_a", "key \"b\""}
	if k == "ip" {
		keys = []string{"100.64.0.1", "2001:db8::1"}
	}
	r := func(n int, p time.Duration) Rule { return CloudflareRule{RequestsPerPeriod: n, Period: p, Timeout: p} }
	return Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{r(379, 10*time.Second), r(198, 10*time.Minute)},
		Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{r(1899, 10*time.Second), r(6551, 10*time.Minute)}}}}
}

// What Write writes, Read reads back, by a header and by address; it
// holds to the Rulesets API's values, and the check can fail.
func TestCloudflareWriteRead(t *testing.T) {
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := cloudflarePolicy(t, k)
		text, err := Cloudflare{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := cloudflareAPICheck([]byte(text)); err != nil {
			t.Errorf("--key %s: %v\n%s", k, err, text)
		}
		r, err := Cloudflare{}.Read([]byte(text), "cloudflare.json", p.Key)
		if err != nil {
			t.Fatalf("--key %s: %v\n%s", k, err, text)
		}
		if len(r.Notes) != 0 || !sameRules(r.RulesOf("203.0.113.9"), p.Rules) {
			t.Errorf("--key %s: every key's %v, notes %q\n%s", k, r.RulesOf("203.0.113.9"), r.Notes, text)
		}
		for _, key := range p.Tiers[0].Keys {
			if !sameRules(r.RulesOf(key), p.Tiers[0].Rules) {
				t.Errorf("--key %s: %s's %v; want %v\n%s", k, key, r.RulesOf(key), p.Tiers[0].Rules, text)
			}
		}
	}
	text, _ := Cloudflare{}.Write(cloudflarePolicy(t, "header:X-Api-Key"))
	for _, bad := range []struct{ from, to string }{
		{`"period": 10,`, `"period": 15,`},
		{`"mitigation_timeout": 600`, `"mitigation_timeout": 900`},
		{`"cf.colo.id",`, ``},
		{`headers[\"x-api-key\"]"`, `headers[\"X-Api-Key\"]"`},
	} {
		changed := strings.Replace(text, bad.from, bad.to, 1)
		if changed == text {
			t.Fatalf("%s is not in the file", bad.from)
		}
		if cloudflareAPICheck([]byte(changed)) == nil {
			t.Errorf("the API check passed %s for %s", bad.to, bad.from)
		}
	}
	if _, err := (Cloudflare{}).Read([]byte(strings.Replace(text, `"period": 10,`, `"period": 15,`, 1)), "cloudflare.json", accesslog.KeySpec{}); err == nil || !strings.Contains(err.Error(), "period 15") {
		t.Errorf("a period of 15 read: %v; want an error saying so", err)
	}
}

// cloudflareAPICheck checks cloudflare.json against the Rulesets API and
// the rate limiting rules' parameters (parameters.mdx): every field
// known, the phase http_ratelimit, a period of 10, 60, 120, 300, 600 or
// 3600, a mitigation timeout of 0, 10, 60, 120, 300, 600, 3600 or 86400,
// at least 1 request a period, characteristics with cf.colo.id and a
// header's name in lower case, an action among the API's, refs apart.
func cloudflareAPICheck(text []byte) error {
	var rs cfRuleset
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil {
		return err
	}
	if rs.Phase != "http_ratelimit" || rs.Kind != "zone" || rs.Name == "" {
		return fmt.Errorf("ruleset %q: kind %q, phase %q", rs.Name, rs.Kind, rs.Phase)
	}
	header := regexp.MustCompile(`^http\.request\.headers\["([^"]*)"\]$`)
	refs := map[string]bool{}
	for _, r := range rs.Rules {
		if r.Ref == "" || refs[r.Ref] || r.Expression == "" || !containsString([]string{"block", "challenge", "js_challenge", "managed_challenge", "log"}, r.Action) {
			return fmt.Errorf("rule %q: its ref, expression or action", r.Ref)
		}
		refs[r.Ref] = true
		rl := r.RateLimit
		if rl == nil || !containsString([]string{"10", "60", "120", "300", "600", "3600"}, fmt.Sprint(rl.Period)) ||
			!containsString([]string{"0", "10", "60", "120", "300", "600", "3600", "86400"}, fmt.Sprint(rl.MitigationTimeout)) || rl.RequestsPerPeriod < 1 {
			return fmt.Errorf("rule %s: its ratelimit %+v", r.Ref, rl)
		}
		if !containsString(rl.Characteristics, "cf.colo.id") {
			return fmt.Errorf("rule %s: characteristics without cf.colo.id", r.Ref)
		}
		for _, c := range rl.Characteristics {
			if m := header.FindStringSubmatch(c); m != nil && m[1] != strings.ToLower(m[1]) {
				return fmt.Errorf("rule %s: the header %q is not in lower case", r.Ref, m[1])
			}
		}
	}
	return nil
}
