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

// API Gateway's throttle as the model keeps it: a bucket full at the
// key's first request, refilled continuously at rateLimit, a whole token
// a request, none taken by a refusal.
func TestAPIGatewayBucket(t *testing.T) {
	const base = 1_800_000_000 * int64(time.Second)
	s := func(sec float64) int64 { return base + int64(sec*1e9) }
	k := APIGateway{}.NewKey([]Rule{APIGatewayRule{RateLimit: 0.5, BurstLimit: 2}})
	for i, st := range []struct {
		at       float64
		admitted bool
	}{
		{0, true}, {0, true}, {0, false}, // full, then empty
		{1.9, false}, // 0.95 of a token
		{2, true},    // a whole one
		{10, true}, {10, true}, {10, false},
	} {
		if d := k.Decide(s(st.at)); d.Admitted != st.admitted {
			t.Errorf("request %d at %.1fs: admitted %v; want %v", i, st.at, d.Admitted, st.admitted)
		}
	}
}

// A bucket is kept as it is, its rate to four digits; a window as a
// bucket of N refilled at N a period; several as one throttle, the lowest
// rate and burst; an address is no key API Gateway has.
func TestAPIGatewayExpress(t *testing.T) {
	r, _ := APIGateway{}.Express(limiters.Limit{N: 1, Per: time.Second, Burst: 407})
	w, _ := APIGateway{}.Express(limiters.Limit{N: 739, Per: 15 * time.Minute})
	h, _ := APIGateway{}.Express(limiters.Limit{N: 2220, Per: time.Hour})
	if r.String() != "rateLimit 1, burstLimit 407" || w.String() != "rateLimit 0.8211, burstLimit 739" || h.String() != "rateLimit 0.6167, burstLimit 2220" {
		t.Errorf("expressed %s, %s, %s", r, w, h)
	}
	if got := (APIGateway{}).Merge([]Rule{w, h}); len(got) != 1 || got[0].String() != "rateLimit 0.6167, burstLimit 739" {
		t.Errorf("Merge: %v; want the lower rate and the lower burst", got)
	}
	if w.Expect() != "gcra 821/1000s burst 739" {
		t.Errorf("expect %q", w.Expect())
	}
	ip, _ := accesslog.ParseKey("ip")
	if err := (APIGateway{}).Keys(ip); err == nil || !strings.Contains(err.Error(), "aws-waf") {
		t.Errorf("keyed by address: %v; want an error naming the nearest", err)
	}
	if _, err := (APIGateway{}).Write(Policy{Key: ip, Rules: []Rule{r}}); err == nil {
		t.Error("a policy by address written; want an error")
	}
}

// What Write writes, Read reads back; it holds to create-usage-plan's
// input (API_CreateUsagePlan), and the check can fail.
func TestAPIGatewayWriteRead(t *testing.T) {
	key, _ := accesslog.ParseKey("header:X-Api-Key")
	p := Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{APIGatewayRule{RateLimit: 1, BurstLimit: 407}},
		Tiers: []Tier{{Name: "shared", Keys: []string{"key_a", "key_b"}, Rules: []Rule{APIGatewayRule{RateLimit: 5, BurstLimit: 2035}}}}}
	text, err := APIGateway{}.Write(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := apiGatewayCheck([]byte(text)); err != nil {
		t.Errorf("%v\n%s", err, text)
	}
	r, err := APIGateway{}.Read([]byte(text), "apigateway.json", key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Notes) != 0 || !sameRules(r.RulesOf("key_z"), p.Rules) || !sameRules(r.RulesOf("key_b"), p.Tiers[0].Rules) {
		t.Errorf("read %+v\n%s", r, text)
	}
	for _, bad := range []struct{ from, to string }{
		{`"burstLimit": 407`, `"burstLimit": -1`},
		{`"name": "ratelab-users"`, `"name": ""`},
		{`"apiId": "API_ID"`, `"restApiId": "API_ID"`},
	} {
		if apiGatewayCheck([]byte(strings.Replace(text, bad.from, bad.to, 1))) == nil {
			t.Errorf("the check passed %s", bad.to)
		}
	}
	one := `{"name": "per-key", "throttle": {"rateLimit": 10.0, "burstLimit": 20}, "quota": {"limit": 2000, "period": "DAY", "offset": 0}}`
	if r, err := (APIGateway{}).Read([]byte(one), "plan.json", key); err != nil || r.Rules[0].String() != "rateLimit 10, burstLimit 20" || len(r.Notes) != 1 {
		t.Errorf("a usage plan alone: %+v, %v; want its throttle, its quota said", r, err)
	}
}

// apiGatewayCheck checks apigateway.json against create-usage-plan's
// input: every field known, a name, a throttle's rate and burst of 0 or
// more, a quota's period DAY, WEEK or MONTH, each stage an API and a
// stage.
func apiGatewayCheck(text []byte) error {
	var f agFile
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return err
	}
	for _, p := range f.UsagePlans {
		u := p.UsagePlan
		switch {
		case u.Name == "":
			return fmt.Errorf("a usage plan without a name")
		case u.Throttle != nil && (u.Throttle.RateLimit < 0 || u.Throttle.BurstLimit < 0):
			return fmt.Errorf("%s: throttle %+v", u.Name, *u.Throttle)
		case u.Quota != nil && !containsString([]string{"DAY", "WEEK", "MONTH"}, u.Quota.Period):
			return fmt.Errorf("%s: quota period %q", u.Name, u.Quota.Period)
		}
		for _, s := range u.APIStages {
			if s.APIID == "" || s.Stage == "" {
				return fmt.Errorf("%s: a stage without its API or name", u.Name)
			}
		}
	}
	return nil
}
