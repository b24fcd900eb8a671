package products

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Kong's windows, request by request, worked out by hand from
// handler.lua and timestamp.lua: aligned to the UTC calendar on whole
// seconds, a refusal counted nowhere, an admission in every period, a
// calendar month's edge.
func TestKongWindows(t *testing.T) {
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	type step struct {
		at       string
		admitted bool
	}
	for _, tt := range []struct {
		name  string
		rules []Rule
		steps []step
	}{
		{"minute: 2", []Rule{KongRule{Period: "minute", Limit: 2}}, []step{
			{"2026-12-07T10:00:59.2Z", true}, {"2026-12-07T10:00:59.9Z", true},
			{"2026-12-07T10:00:59.99Z", false}, // the minute's 2 reached
			{"2026-12-07T10:01:00Z", true},     // the next minute of the calendar
			{"2026-12-07T10:01:30Z", true}, {"2026-12-07T10:01:31Z", false}, {"2026-12-07T10:01:59Z", false},
		}},
		{"second: 1, hour: 3: a refusal counted nowhere", []Rule{KongRule{Period: "second", Limit: 1}, KongRule{Period: "hour", Limit: 3}}, []step{
			{"2026-12-07T10:10:00Z", true}, {"2026-12-07T10:10:00.5Z", false}, {"2026-12-07T10:10:00.9Z", false},
			{"2026-12-07T10:10:01Z", true}, // the hour's count is 2, not 4
			{"2026-12-07T10:10:02Z", true},
			{"2026-12-07T10:10:03Z", false}, // the hour's 3
			{"2026-12-07T11:00:00Z", true},
		}},
		{"month: 1, at a calendar month's edge", []Rule{KongRule{Period: "month", Limit: 1}}, []step{
			{"2026-02-28T23:59:59Z", true}, {"2026-02-28T23:59:59.9Z", false},
			{"2026-03-01T00:00:00Z", true}, {"2026-03-31T00:00:00Z", false},
		}},
	} {
		k := Kong{}.NewKey(tt.rules)
		for i, s := range tt.steps {
			if d := k.Decide(at(s.at)); d.Admitted != s.admitted {
				t.Errorf("%s: request %d at %s: admitted %v; want %v", tt.name, i, s.at, d.Admitted, s.admitted)
			}
		}
	}
}

// A window of one of Kong's periods is kept as it is; another as the
// nearest period, its N scaled; a bucket as its nearest window first.
func TestKongExpress(t *testing.T) {
	for _, tt := range []struct {
		want    limiters.Limit
		rule    string
		changes string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "minute: 100", "UTC calendar"},
		{limiters.Limit{N: 299, Per: 15 * time.Minute}, "hour: 1196", "no window of 15m"},
		{limiters.Limit{N: 739, Per: 15 * time.Minute}, "hour: 2956", "no window of 15m"},
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "minute: 467", "no bucket"}, // full in 6m47s: the minute nearer than the hour
		{limiters.Limit{N: 20, Per: time.Second, Burst: 38}, "second: 58", "no bucket"},
	} {
		r, err := Kong{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || !strings.Contains(r.Changes(), tt.changes) || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q; want %s, %q", tt.want, r, r.Changes(), tt.rule, tt.changes)
		}
	}
}

func kongPolicy(t *testing.T, k string) Policy {
	t.Helper()
	key, _ := accesslog.ParseKey(k)
	keys := []string{"key_a", "key_b"}
	if k == "ip" {
		keys = []string{"100.64.0.1", "100.64.0.2"}
	}
	return Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{KongRule{Period: "second", Limit: 38}, KongRule{Period: "hour", Limit: 1196}},
		Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{KongRule{Period: "second", Limit: 190}, KongRule{Period: "hour", Limit: 39312}}}}}
}

// What Write writes, Read reads back, by a header and by address, and it
// holds to the plugin's schema (kong/plugins/rate-limiting/schema.lua)
// and the declarative format's: the check can fail.
func TestKongWriteRead(t *testing.T) {
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := kongPolicy(t, k)
		text, err := Kong{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := kongSchema([]byte(text)); err != nil {
			t.Errorf("--key %s: %v\n%s", k, err, text)
		}
		if !(Kong{}).Recognizes([]byte(text)) {
			t.Errorf("--key %s: not recognized", k)
		}
		r, err := Kong{}.Read([]byte(text), "kong.yaml", p.Key)
		if err != nil {
			t.Fatalf("--key %s: %v\n%s", k, err, text)
		}
		if len(r.Notes) != 0 || !sameRules(r.RulesOf("203.0.113.9"), p.Rules) || r.Name != "kong.yaml: second: 38, hour: 1196" {
			t.Errorf("--key %s: %q, every key's %v, notes %q\n%s", k, r.Name, r.RulesOf("203.0.113.9"), r.Notes, text)
		}
		for _, key := range p.Tiers[0].Keys {
			if !sameRules(r.RulesOf(key), p.Tiers[0].Rules) {
				t.Errorf("--key %s: %s's %v; want %v\n%s", k, key, r.RulesOf(key), p.Tiers[0].Rules, text)
			}
		}
	}
	// A shorter period's limit above a longer's is not written (the
	// schema refuses it, and it never refuses alone).
	p := kongPolicy(t, "header:X-Api-Key")
	p.Rules = []Rule{KongRule{Period: "second", Limit: 50}, KongRule{Period: "minute", Limit: 30}}
	text, _ := Kong{}.Write(p)
	if !strings.Contains(text, "{minute: 30,") || kongSchema([]byte(text)) != nil {
		t.Errorf("second 50 over minute 30 written as\n%s", text)
	}
	if kongSchema([]byte(strings.Replace(text, "{minute: 30,", "{second: 50, minute: 20,", 1))) == nil {
		t.Error("the schema check passed a minute's limit under a second's")
	}
	if kongSchema([]byte(strings.Replace(text, "limit_by: header", "limit_by: cookie", 1))) == nil {
		t.Error("the schema check passed limit_by: cookie")
	}
	if _, err := (Kong{}).Read([]byte(strings.Replace(text, "minute: 30", "minute: -3", 1)), "kong.yaml", p.Key); err == nil || !strings.Contains(err.Error(), "kong.yaml:") {
		t.Errorf("a limit of -3 read: %v; want an error naming the line", err)
	}
}

// kongSchema checks a declarative configuration against the rules of
// Kong's declarative format 3.0 and the rate-limiting plugin's
// schema.lua: a limit a period, a number above 0, no shorter period's
// above a longer's; limit_by one of its values, header_name with header;
// policy one of its values; each route with paths or an expression.
func kongSchema(text []byte) error {
	var f struct {
		Format   string `yaml:"_format_version"`
		Services []struct {
			Name   string `yaml:"name"`
			URL    string `yaml:"url"`
			Routes []struct {
				Name       string         `yaml:"name"`
				Paths      []string       `yaml:"paths"`
				Expression string         `yaml:"expression"`
				Priority   int            `yaml:"priority"`
				Headers    map[string]any `yaml:"headers"`
				Plugins    []struct {
					Name   string         `yaml:"name"`
					Config map[string]any `yaml:"config"`
				} `yaml:"plugins"`
			} `yaml:"routes"`
		} `yaml:"services"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(text)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return err
	}
	if f.Format != "3.0" || len(f.Services) == 0 {
		return errorf(Kong{}, "kong.yaml", 0, "_format_version %q, %d services", f.Format, len(f.Services))
	}
	for _, s := range f.Services {
		if s.Name == "" || !strings.HasPrefix(s.URL, "http") {
			return errorf(Kong{}, "kong.yaml", 0, "a service needs a name and a url")
		}
		for _, r := range s.Routes {
			if len(r.Paths) == 0 && r.Expression == "" {
				return errorf(Kong{}, "kong.yaml", 0, "route %s: neither paths nor an expression", r.Name)
			}
			for _, p := range r.Plugins {
				if err := kongPluginSchema(p.Name, p.Config); err != nil {
					return errorf(Kong{}, "kong.yaml", 0, "route %s: %v", r.Name, err)
				}
			}
		}
	}
	return nil
}

func kongPluginSchema(name string, c map[string]any) error {
	if name != "rate-limiting" {
		return nil
	}
	last, any := 0.0, false
	for _, p := range kongPeriods {
		v, ok := c[p.name]
		if !ok {
			continue
		}
		n, isNum := v.(int)
		if !isNum || n <= 0 {
			return errorf(Kong{}, "kong.yaml", 0, "%s: %v: want a number above 0", p.name, v)
		}
		if any && float64(n) < last {
			return errorf(Kong{}, "kong.yaml", 0, "the limit of a %s is under a shorter period's", p.name)
		}
		last, any = float64(n), true
	}
	if !any {
		return errorf(Kong{}, "kong.yaml", 0, "no limit")
	}
	allowed := map[string][]string{"limit_by": {"consumer", "credential", "ip", "service", "header", "path", "consumer-group"}, "policy": {"local", "cluster", "redis"}}
	for field, values := range allowed {
		if v, ok := c[field]; ok && !containsString(values, v) {
			return errorf(Kong{}, "kong.yaml", 0, "%s: %v: not one of %v", field, v, values)
		}
	}
	if c["limit_by"] == "header" && c["header_name"] == nil {
		return errorf(Kong{}, "kong.yaml", 0, "limit_by: header without header_name")
	}
	return nil
}

func containsString(values []string, v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	for _, x := range values {
		if x == s {
			return true
		}
	}
	return false
}
