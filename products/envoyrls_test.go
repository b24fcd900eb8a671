package products

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// The rate limit service's limit, request by request, from
// cache_key.go and fixed_cache_impl.go: windows of the unit on the
// epoch, on whole seconds; every request counted, refused or not; two
// limits each counting every request.
func TestEnvoyRLSWindows(t *testing.T) {
	const base = 1_800_000_000 * int64(time.Second) // a minute of the epoch
	s := func(sec float64) int64 { return base + int64(sec*1e9) }
	k := EnvoyRLS{}.NewKey([]Rule{EnvoyRLSRule{Unit: "second", RequestsPerUnit: 2}, EnvoyRLSRule{Unit: "minute", RequestsPerUnit: 5}})
	for i, st := range []struct {
		at       float64
		admitted bool
	}{
		{0, true}, {0.5, true}, {0.9, false}, // the second's 3rd
		{1, true},     // a new second; the minute's 4th
		{1.5, true},   // the minute's 5th
		{2, false},    // the minute's 6th: over, and counted
		{59.9, false}, // the minute's 7th
		{60, true},    // a new minute, a new second
		{60.1, true},  // the second's 2nd
		{60.2, false}, // the second's 3rd
		{61, true},    // the minute's 4th (the refused one counted)
		{61.1, true},  // the minute's 5th
		{62, false},   // its 6th
	} {
		if d := k.Decide(s(st.at)); d.Admitted != st.admitted {
			t.Errorf("request %d at %.1fs: admitted %v; want %v", i, st.at, d.Admitted, st.admitted)
		}
	}
}

// A window is kept in the nearest unit, N scaled; a bucket as the most
// it admits in the unit nearest its filling; of one unit, the lower
// limit; a shorter unit's at or above a longer's, dropped.
func TestEnvoyRLSExpress(t *testing.T) {
	for _, tt := range []struct {
		want limiters.Limit
		rule string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "unit: minute, requests_per_unit: 100"},
		{limiters.Limit{N: 299, Per: 15 * time.Minute}, "unit: hour, requests_per_unit: 1196"},
		{limiters.Limit{N: 20, Per: time.Second, Burst: 38}, "unit: second, requests_per_unit: 58"},
	} {
		r, err := EnvoyRLS{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || r.Changes() == "" || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q; want %s", tt.want, r, r.Changes(), tt.rule)
		}
	}
	r := func(u string, n int) Rule { return EnvoyRLSRule{Unit: u, RequestsPerUnit: n} }
	if got := (EnvoyRLS{}).Merge([]Rule{r("hour", 2956), r("hour", 2220), r("minute", 3000)}); !sameRules(got, []Rule{r("hour", 2220)}) {
		t.Errorf("Merge: %v", got)
	}
}

// What Write writes, Read reads back, by a header and by address: every
// key's limits and each tier key's, a tier without a unit's limit
// unlimited there; it holds to the service's configuration rules, and
// the check can fail.
func TestEnvoyRLSWriteRead(t *testing.T) {
	r := func(u string, n int) Rule { return EnvoyRLSRule{Unit: u, RequestsPerUnit: n} }
	for _, k := range []string{"ip", "header:X-Api-Key"} {
		key, _ := accesslog.ParseKey(k)
		p := Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."}, Rules: []Rule{r("second", 38), r("hour", 1196)},
			Tiers: []Tier{{Name: "shared", Keys: []string{"100.64.0.1", "100.64.0.2"}, Rules: []Rule{r("hour", 39312)}}}}
		text, err := EnvoyRLS{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := rlsCheck([]byte(text)); err != nil {
			t.Errorf("--key %s: %v\n%s", k, err, text)
		}
		read, err := EnvoyRLS{}.Read([]byte(text), "ratelimit.yaml", key)
		if err != nil {
			t.Fatalf("--key %s: %v\n%s", k, err, text)
		}
		if !sameRules(read.RulesOf("203.0.113.9"), p.Rules) || !sameRules(read.RulesOf("100.64.0.2"), p.Tiers[0].Rules) {
			t.Errorf("--key %s: every key's %v, a tier key's %v\n%s", k, read.RulesOf("203.0.113.9"), read.RulesOf("100.64.0.2"), text)
		}
	}
	text, _ := EnvoyRLS{}.Write(Policy{Rules: []Rule{r("second", 38)}})
	for _, bad := range []string{strings.Replace(text, "unit: second", "unit: fortnight", 1), strings.Replace(text, "domain: ratelab", "domain: \"\"", 1)} {
		if rlsCheck([]byte(bad)) == nil {
			t.Errorf("the check passed\n%s", bad)
		}
	}
	if _, err := (EnvoyRLS{}).Read([]byte(strings.Replace(text, "unit: second", "unit: fortnight", 1)), "ratelimit.yaml", accesslog.KeySpec{}); err == nil || !strings.Contains(err.Error(), "ratelimit.yaml:") {
		t.Errorf("a unit of a fortnight read: %v; want an error naming the line", err)
	}
}

// rlsCheck checks a configuration as the service loads it
// (src/config/config_impl.go): every field known, a domain, each
// descriptor a key, a rate_limit's unit among the service's and its
// requests a uint32, or unlimited.
func rlsCheck(text []byte) error {
	type rateLimit struct {
		Unit            string `yaml:"unit"`
		RequestsPerUnit *int64 `yaml:"requests_per_unit"`
		Unlimited       bool   `yaml:"unlimited"`
	}
	type descriptor struct {
		Key         string       `yaml:"key"`
		Value       string       `yaml:"value"`
		RateLimit   *rateLimit   `yaml:"rate_limit"`
		Descriptors []descriptor `yaml:"descriptors"`
	}
	var c struct {
		Domain      string       `yaml:"domain"`
		Descriptors []descriptor `yaml:"descriptors"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(text)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return err
	}
	if c.Domain == "" {
		return fmt.Errorf("no domain")
	}
	var check func(ds []descriptor) error
	check = func(ds []descriptor) error {
		for _, d := range ds {
			if d.Key == "" {
				return fmt.Errorf("a descriptor without a key")
			}
			if rl := d.RateLimit; rl != nil && !rl.Unlimited {
				if !containsString([]string{"second", "minute", "hour", "day", "week", "month", "year"}, strings.ToLower(rl.Unit)) ||
					rl.RequestsPerUnit == nil || *rl.RequestsPerUnit < 0 || *rl.RequestsPerUnit > 1<<32-1 {
					return fmt.Errorf("%s: rate_limit %+v", d.Key, *rl)
				}
			}
			if err := check(d.Descriptors); err != nil {
				return err
			}
		}
		return nil
	}
	return check(c.Descriptors)
}
