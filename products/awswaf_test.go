package products

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// AWS WAF's rule as the model keeps its documented shape: checked at each
// tenth second, blocked from a check that counts more than the limit in
// the window before it to the one that counts no more; every request
// counted, blocked or not.
func TestAWSWAFChecks(t *testing.T) {
	const base = 1_800_000_000 * int64(time.Second) // a tenth second of the epoch
	s := func(sec float64) int64 { return base + int64(sec*1e9) }
	k := AWSWAF{}.NewKey([]Rule{AWSWAFRule{Limit: 10, Window: time.Minute}})
	for i := range 15 { // 15 in the first second: none blocked before a check
		if d := k.Decide(s(0.5 + float64(i)*0.01)); !d.Admitted {
			t.Fatalf("request %d before any check refused", i)
		}
	}
	for _, st := range []struct {
		at       float64
		admitted bool
	}{
		{9.9, true},   // still no check since the first request
		{10, false},   // the check at 10 s counts 15 > 10
		{30, false},   // 16 and more
		{60.4, false}, // the check at 60 counts those after 0 s: all 17
		{70, true},    // the check at 70 counts those after 10 s: 2 (at 10 and 30) and the one at 60.4
		{75, true},    // no check between
	} {
		if d := k.Decide(s(st.at)); d.Admitted != st.admitted {
			t.Errorf("at %.1fs: admitted %v; want %v", st.at, d.Admitted, st.admitted)
		}
	}
}

// A window of 60 to 600 seconds is kept nearest by ratio, N scaled, 10
// at least; a bucket as its nearest window first; each said.
func TestAWSWAFExpress(t *testing.T) {
	for _, tt := range []struct {
		want limiters.Limit
		rule string
	}{
		{limiters.Limit{N: 100, Per: time.Minute}, "Limit 100, EvaluationWindowSec 60"},
		{limiters.Limit{N: 299, Per: 15 * time.Minute}, "Limit 199, EvaluationWindowSec 600"},
		{limiters.Limit{N: 38, Per: time.Second}, "Limit 2280, EvaluationWindowSec 60"},
		{limiters.Limit{N: 1, Per: time.Hour}, "Limit 10, EvaluationWindowSec 600"},
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "Limit 707, EvaluationWindowSec 300"}, // full in 6m47s: 407 and 300 more
	} {
		r, err := AWSWAF{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || r.Changes() == "" || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q; want %s", tt.want, r, r.Changes(), tt.rule)
		}
	}
}

// Rules of one window merge to the lowest; a shorter window's limit at
// or above a longer's is dropped (the longer counts all it does).
func TestAWSWAFMerge(t *testing.T) {
	r := func(limit int, w time.Duration) Rule { return AWSWAFRule{Limit: limit, Window: w} }
	for _, tt := range []struct{ in, want []Rule }{
		{[]Rule{r(493, 10*time.Minute), r(370, 10*time.Minute)}, []Rule{r(370, 10*time.Minute)}},
		{[]Rule{r(199, 10*time.Minute), r(2280, time.Minute)}, []Rule{r(199, 10*time.Minute)}},
		{[]Rule{r(199, 10*time.Minute), r(60, time.Minute)}, []Rule{r(60, time.Minute), r(199, 10*time.Minute)}},
	} {
		if got := (AWSWAF{}).Merge(tt.in); !sameRules(got, tt.want) {
			t.Errorf("Merge(%v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

func wafPolicy(t *testing.T, k string) Policy {
	t.Helper()
	key, _ := accesslog.ParseKey(k)
	keys := []string{"key_a", "key_b"}
	if k == "ip" {
		keys = []string{"100.64.0.1", "2001:db8::1"}
	}
	return Policy{Key: key, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{AWSWAFRule{Limit: 2280, Window: time.Minute}, AWSWAFRule{Limit: 199, Window: 10 * time.Minute}},
		Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{AWSWAFRule{Limit: 11400, Window: time.Minute}, AWSWAFRule{Limit: 6552, Window: 10 * time.Minute}}}}}
}

// What Write writes, Read reads back, by a header and by address; it
// holds to the wafv2 API reference's shapes and values, and the check
// can fail.
func TestAWSWAFWriteRead(t *testing.T) {
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := wafPolicy(t, k)
		text, err := AWSWAF{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := wafAPICheck([]byte(text)); err != nil {
			t.Errorf("--key %s: %v\n%s", k, err, text)
		}
		r, err := AWSWAF{}.Read([]byte(text), "aws-waf.json", p.Key)
		if err != nil {
			t.Fatalf("--key %s: %v\n%s", k, err, text)
		}
		if len(r.Notes) != 0 || !sameRules(r.RulesOf("203.0.113.9"), p.Rules) {
			t.Errorf("--key %s: every key's %v, notes %q\n%s", k, r.RulesOf("203.0.113.9"), r.Notes, text)
		}
		for _, key := range p.Tiers[0].Keys {
			if !sameRules(r.RulesOf(key), p.Tiers[0].Rules) {
				t.Errorf("--key %s: %s's %v; want %v", k, key, r.RulesOf(key), p.Tiers[0].Rules)
			}
		}
	}
	text, _ := AWSWAF{}.Write(wafPolicy(t, "header:X-Api-Key"))
	for _, bad := range []struct{ from, to string }{
		{`"Limit": 2280`, `"Limit": 5`},
		{`"EvaluationWindowSec": 60`, `"EvaluationWindowSec": 30`},
		{`"PositionalConstraint": "EXACTLY"`, `"PositionalConstraint": "SOMEWHERE"`},
	} {
		if wafAPICheck([]byte(strings.Replace(text, bad.from, bad.to, 1))) == nil {
			t.Errorf("the API check passed %s", bad.to)
		}
	}
	if _, err := (AWSWAF{}).Read([]byte(strings.Replace(text, `"Limit": 2280`, `"Limit": 5`, 1)), "aws-waf.json", accesslog.KeySpec{}); err == nil || !strings.Contains(err.Error(), "Limit 5") {
		t.Errorf("a limit of 5 read: %v; want an error saying so", err)
	}
	if _, err := (AWSWAF{}).Read([]byte("{\n  \"Rules\": [\n    {,}\n  ]\n}\n"), "aws-waf.json", accesslog.KeySpec{}); err == nil || !strings.Contains(err.Error(), "aws-waf.json:3:") {
		t.Errorf("a file that is not JSON: %v; want its line", err)
	}
}

// wafAPICheck checks aws-waf.json against the wafv2 API reference
// (API_Rule, API_RateBasedStatement, API_RateBasedStatementCustomKey,
// API_ByteMatchStatement, API_VisibilityConfig, API_CustomResponse,
// API_CreateIPSet): every field it holds known, names and metric names
// of their patterns and lengths, priorities apart, a limit of 10 to
// 2,000,000,000, a window of 60, 120, 300 or 600, the aggregate key and
// positional constraint among their values, a header name of 1 to 64, a
// search string of 1 to 200 bytes, a response code of 200 to 599, IP
// sets of CIDR addresses of their version.
func wafAPICheck(text []byte) error {
	var f wafFile
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return err
	}
	name := regexp.MustCompile(`^[\w\-]{1,128}$`)
	metric := regexp.MustCompile(`^[\w#:\.\-/]{1,255}$`)
	priorities := map[int]bool{}
	for _, r := range f.Rules {
		if !name.MatchString(r.Name) || !metric.MatchString(r.VisibilityConfig.MetricName) || priorities[r.Priority] || r.Priority < 0 {
			return fmt.Errorf("rule %q: its name, metric name or priority", r.Name)
		}
		priorities[r.Priority] = true
		if r.Action == nil || r.Action.Block == nil || r.Action.Block.CustomResponse == nil || r.Action.Block.CustomResponse.ResponseCode < 200 || r.Action.Block.CustomResponse.ResponseCode > 599 {
			return fmt.Errorf("rule %s: its action", r.Name)
		}
		rb := r.Statement.RateBasedStatement
		if rb == nil || rb.Limit < 10 || rb.Limit > 2_000_000_000 || !containsString([]string{"60", "120", "300", "600"}, fmt.Sprint(rb.EvaluationWindowSec)) {
			return fmt.Errorf("rule %s: its rate-based statement", r.Name)
		}
		switch rb.AggregateKeyType {
		case "IP", "FORWARDED_IP", "CONSTANT":
			if len(rb.CustomKeys) > 0 {
				return fmt.Errorf("rule %s: CustomKeys without CUSTOM_KEYS", r.Name)
			}
		case "CUSTOM_KEYS":
			if len(rb.CustomKeys) == 0 || len(rb.CustomKeys) > 5 {
				return fmt.Errorf("rule %s: 1 to 5 custom keys", r.Name)
			}
			for _, c := range rb.CustomKeys {
				if c.Header != nil && (len(c.Header.Name) < 1 || len(c.Header.Name) > 64 || len(c.Header.TextTransformations) == 0) {
					return fmt.Errorf("rule %s: a header key's name or transformations", r.Name)
				}
			}
		default:
			return fmt.Errorf("rule %s: AggregateKeyType %q", r.Name, rb.AggregateKeyType)
		}
		if err := wafStatementCheck(rb.ScopeDownStatement); err != nil {
			return fmt.Errorf("rule %s: %w", r.Name, err)
		}
	}
	for _, s := range f.IPSets {
		if !name.MatchString(s.Name) || !containsString([]string{"REGIONAL", "CLOUDFRONT"}, s.Scope) || !containsString([]string{"IPV4", "IPV6"}, s.IPAddressVersion) {
			return fmt.Errorf("IP set %q: its name, scope or version", s.Name)
		}
		for _, a := range s.Addresses {
			ip, _, err := net.ParseCIDR(a)
			if err != nil || (ip.To4() != nil) != (s.IPAddressVersion == "IPV4") {
				return fmt.Errorf("IP set %s: %q is not an %s CIDR", s.Name, a, s.IPAddressVersion)
			}
		}
	}
	return nil
}

func wafStatementCheck(s *wafStatement) error {
	switch {
	case s == nil:
		return nil
	case s.NotStatement != nil:
		return wafStatementCheck(&s.NotStatement.Statement)
	case s.OrStatement != nil:
		if len(s.OrStatement.Statements) < 2 {
			return fmt.Errorf("an OrStatement of fewer than 2")
		}
		for _, c := range s.OrStatement.Statements {
			if err := wafStatementCheck(&c); err != nil {
				return err
			}
		}
	case s.ByteMatchStatement != nil:
		b := s.ByteMatchStatement
		if len(b.SearchString) < 1 || len(b.SearchString) > 200 || b.FieldToMatch.SingleHeader == nil || len(b.TextTransformations) == 0 ||
			!containsString([]string{"EXACTLY", "STARTS_WITH", "ENDS_WITH", "CONTAINS", "CONTAINS_WORD"}, b.PositionalConstraint) {
			return fmt.Errorf("a byte match: %+v", *b)
		}
	case s.IPSetReferenceStatement != nil:
		if !strings.HasPrefix(s.IPSetReferenceStatement.ARN, "arn:aws:wafv2:") {
			return fmt.Errorf("an IP set ARN %q", s.IPSetReferenceStatement.ARN)
		}
	}
	return nil
}
