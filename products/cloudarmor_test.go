package products

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Cloud Armor's rules as the model keeps their documented shape: a
// throttle refuses the requests over its count for the rest of the
// interval; a rate-based ban, every request of the key for the rest of
// the interval and the ban's duration more, the ones the count alone
// would admit said Banned.
func TestCloudArmorThrottleAndBan(t *testing.T) {
	const base = 1_800_000_000 * int64(time.Second) // a tenth second of the epoch
	s := func(sec float64) int64 { return base + int64(sec*1e9) }
	type step struct {
		at               float64
		admitted, banned bool
	}
	for _, tt := range []struct {
		name  string
		rule  CloudArmorRule
		steps []step
	}{
		{"throttle 2 in 10s", CloudArmorRule{Count: 2, Interval: 10 * time.Second}, []step{
			{0, true, false}, {1, true, false}, {2, false, false}, {9.9, false, false},
			{10, true, false}, // the next interval
		}},
		{"ban: 2 in 10s, then 60s", CloudArmorRule{Count: 2, Interval: 10 * time.Second, Ban: time.Minute}, []step{
			{0, true, false}, {1, true, false},
			{2, false, false}, // over: banned till 10 s + 60 s
			{10, false, true}, // a new interval: the ban alone
			{69.9, false, true},
			{70, true, false},
		}},
	} {
		k := CloudArmor{}.NewKey([]Rule{tt.rule})
		for i, st := range tt.steps {
			if d := k.Decide(s(st.at)); d.Admitted != st.admitted || d.Banned != st.banned {
				t.Errorf("%s: request %d at %.1fs: admitted %v banned %v; want %v, %v", tt.name, i, st.at, d.Admitted, d.Banned, st.admitted, st.banned)
			}
		}
	}
}

// A window is kept in the nearest interval, N scaled; a bucket as the
// most it admits in the interval nearest its filling; of several rules,
// the strictest by rate.
func TestCloudArmorExpress(t *testing.T) {
	for _, tt := range []struct {
		want limiters.Limit
		rule string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "count 100, interval_sec 60"},
		{limiters.Limit{N: 299, Per: 15 * time.Minute}, "count 299, interval_sec 900"},
		{limiters.Limit{N: 38, Per: time.Second}, "count 380, interval_sec 10"},
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "count 707, interval_sec 300"},
	} {
		r, err := CloudArmor{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || r.Changes() == "" || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q; want %s", tt.want, r, r.Changes(), tt.rule)
		}
	}
	short, long := CloudArmorRule{Count: 380, Interval: 10 * time.Second}, CloudArmorRule{Count: 299, Interval: 15 * time.Minute}
	if got := (CloudArmor{}).Merge([]Rule{short, long}); len(got) != 1 || got[0] != long {
		t.Errorf("Merge: %v; want the 15 minutes' alone, the lower rate", got)
	}
}

func cloudArmorPolicy(t *testing.T, k string) Policy {
	t.Helper()
	key, _ := accesslog.ParseKey(k)
	keys := []string{"key_a", "key 'b'"}
	if k == "ip" {
		keys = []string{"100.64.0.1", "2001:db8::1"}
	}
	return Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{CloudArmorRule{Count: 299, Interval: 15 * time.Minute}},
		Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{CloudArmorRule{Count: 9828, Interval: 15 * time.Minute}}}}}
}

// What Write writes, Read reads back, by a header and by address; it
// holds to the compute API's SecurityPolicy values, and the check can
// fail.
func TestCloudArmorWriteRead(t *testing.T) {
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := cloudArmorPolicy(t, k)
		text, err := CloudArmor{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := cloudArmorAPICheck([]byte(text)); err != nil {
			t.Errorf("--key %s: %v\n%s", k, err, text)
		}
		r, err := CloudArmor{}.Read([]byte(text), "cloud-armor.json", p.Key)
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
	text, _ := CloudArmor{}.Write(cloudArmorPolicy(t, "ip"))
	for _, bad := range []struct{ from, to string }{
		{`"intervalSec": 900`, `"intervalSec": 90`},
		{`"count": 299`, `"count": 0`},
		{`"exceedAction": "deny(429)"`, `"exceedAction": "deny(418)"`},
		{`"priority": 2147483647`, `"priority": 2147483646`},
	} {
		changed := strings.Replace(text, bad.from, bad.to, 1)
		if changed == text {
			t.Fatalf("%s is not in the file", bad.from)
		}
		if cloudArmorAPICheck([]byte(changed)) == nil {
			t.Errorf("the API check passed %s", bad.to)
		}
	}
	if _, err := (CloudArmor{}).Read([]byte(strings.Replace(text, `"intervalSec": 900`, `"intervalSec": 90`, 1)), "cloud-armor.json", accesslog.KeySpec{}); err == nil || !strings.Contains(err.Error(), "intervalSec 90") {
		t.Errorf("an interval of 90 read: %v; want an error saying so", err)
	}
}

// cloudArmorAPICheck checks cloud-armor.json against the compute API's
// SecurityPolicy and the rate limiting overview: every field known;
// priorities apart, 0 to 2147483647, and the default rule's; an action
// among the API's, throttle and rate_based_ban with rateLimitOptions;
// conformAction allow; exceedAction deny(403|404|429|502) or redirect;
// enforceOnKey among its values, a name with HTTP_HEADER alone; a count
// of 1 to 1,000,000 (10,000 for a ban) in an interval of the set; a ban's
// duration of its set; a match of an expression or source ranges.
func cloudArmorAPICheck(text []byte) error {
	var pol caPolicy
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pol); err != nil {
		return err
	}
	seen, hasDefault := map[int64]bool{}, false
	intervals := []string{"10", "30", "60", "120", "180", "240", "300", "600", "900", "1200", "1800", "2700", "3600"}
	for _, r := range pol.Rules {
		if seen[r.Priority] || r.Priority < 0 || r.Priority > caDefaultPriority {
			return fmt.Errorf("a priority %d twice or out of range", r.Priority)
		}
		seen[r.Priority] = true
		hasDefault = hasDefault || r.Priority == caDefaultPriority
		if (r.Match.Expr == nil) == (r.Match.Config == nil) || (r.Match.Config != nil && r.Match.VersionedExpr != "SRC_IPS_V1") {
			return fmt.Errorf("priority %d: a match of an expression or of source ranges", r.Priority)
		}
		if !containsString([]string{"allow", "deny(403)", "deny(404)", "deny(429)", "deny(502)", "throttle", "rate_based_ban", "redirect"}, r.Action) {
			return fmt.Errorf("priority %d: action %q", r.Priority, r.Action)
		}
		o := r.RateLimitOptions
		if r.Action != "throttle" && r.Action != "rate_based_ban" {
			continue
		}
		most := 1_000_000
		if r.Action == "rate_based_ban" {
			most = 10_000
			if !containsString([]string{"60", "120", "180", "240", "300", "600", "900", "1200", "1800", "2700", "3600"}, fmt.Sprint(o.BanDurationSec)) {
				return fmt.Errorf("priority %d: banDurationSec %d", r.Priority, o.BanDurationSec)
			}
		}
		switch {
		case o == nil || o.RateLimitThreshold == nil:
			return fmt.Errorf("priority %d: %s without a threshold", r.Priority, r.Action)
		case o.ConformAction != "allow" || !containsString([]string{"deny(403)", "deny(404)", "deny(429)", "deny(502)", "redirect"}, o.ExceedAction):
			return fmt.Errorf("priority %d: conform %q, exceed %q", r.Priority, o.ConformAction, o.ExceedAction)
		case !containsString([]string{"", "ALL", "IP", "HTTP_HEADER", "XFF_IP", "HTTP_COOKIE", "HTTP_PATH", "SNI", "REGION_CODE"}, o.EnforceOnKey) || (o.EnforceOnKeyName != "") != (o.EnforceOnKey == "HTTP_HEADER" || o.EnforceOnKey == "HTTP_COOKIE"):
			return fmt.Errorf("priority %d: enforceOnKey %q, name %q", r.Priority, o.EnforceOnKey, o.EnforceOnKeyName)
		case o.RateLimitThreshold.Count < 1 || o.RateLimitThreshold.Count > most || !containsString(intervals, fmt.Sprint(o.RateLimitThreshold.IntervalSec)):
			return fmt.Errorf("priority %d: threshold %+v", r.Priority, *o.RateLimitThreshold)
		}
	}
	if !hasDefault {
		return fmt.Errorf("no default rule (priority 2147483647)")
	}
	return nil
}
