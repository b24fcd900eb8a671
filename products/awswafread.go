package products

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes a web ACL's rules with a rate-based rule.
func (AWSWAF) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte(`"RateBasedStatement"`))
}

// Read reads aws-waf.json, or any list of a web ACL's rules (the Rules of
// aws wafv2 get-web-acl, or the array alone): each rate-based rule that
// blocks. One whose scope-down statement matches keys (a header's value,
// an IP set of the file's IPSets) is a tier of them; one with none, or
// one that excludes them, every key's. What AWS WAF decides otherwise (a
// rule that counts, another key) is said in the notes. Errors name the
// rule, or the line of a file that is not JSON.
func (w AWSWAF) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var f wafFile
	trimmed := bytes.TrimSpace(text)
	var err error
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(trimmed, &f.Rules)
	} else {
		err = json.Unmarshal(trimmed, &f)
	}
	if err != nil {
		return Read{}, errorf(w, name, jsonLine(text, err), "%v", err)
	}
	sets := map[string][]string{}
	for _, s := range f.IPSets {
		for _, a := range s.Addresses {
			sets[s.Name] = append(sets[s.Name], strings.TrimSuffix(strings.TrimSuffix(a, "/32"), "/128"))
		}
	}
	out := Read{Name: name}
	var said []string
	for _, r := range f.Rules {
		rb := r.Statement.RateBasedStatement
		if rb == nil {
			continue
		}
		rule, err := w.rule(r, name)
		if err != nil {
			return Read{}, err
		}
		if r.Action == nil || r.Action.Block == nil {
			out.Notes = append(out.Notes, fmt.Sprintf("the rule %s does not block (its action is not Block): not decided", r.Name))
			continue
		}
		if n := wafKeyNote(rb, key); n != "" {
			out.Notes = append(out.Notes, fmt.Sprintf("the rule %s %s, taken here for the plan's key (%s)", r.Name, n, key))
		}
		keys, every := wafScoped(rb.ScopeDownStatement, sets)
		if every {
			out.Rules, said = append(out.Rules, rule), append(said, rule.String())
			continue
		}
		out.addToTier(rule, keys, r.Name)
	}
	if len(out.Rules)+len(out.Tiers) == 0 && len(out.Notes) == 0 {
		return Read{}, errorf(w, name, 0, "no rate-based rule")
	}
	out.Name = name + ": " + strings.Join(said, "; ")
	return out, nil
}

// rule reads a rate-based rule's limit and window, as the API allows
// them.
func (w AWSWAF) rule(r wafRule, name string) (AWSWAFRule, error) {
	rb := r.Statement.RateBasedStatement
	sec := rb.EvaluationWindowSec
	if sec == 0 {
		sec = 300 // the API's default
	}
	win := time.Duration(sec) * time.Second
	if !slices.Contains(wafWindows, win) {
		return AWSWAFRule{}, errorf(w, name, 0, "rule %s: EvaluationWindowSec %d: AWS WAF takes 60, 120, 300 or 600", r.Name, sec)
	}
	if rb.Limit < wafMinLimit || rb.Limit > wafMaxLimit {
		return AWSWAFRule{}, errorf(w, name, 0, "rule %s: Limit %d: AWS WAF takes 10 to 2,000,000,000", r.Name, rb.Limit)
	}
	return AWSWAFRule{Limit: rb.Limit, Window: win}, nil
}

// wafKeyNote says how a rule aggregates otherwise than by the plan's key,
// "" where it is the plan's.
func wafKeyNote(rb *wafRateBased, key accesslog.KeySpec) string {
	switch {
	case rb.AggregateKeyType == "IP" && key.Header == "" && key.Field == "":
		return ""
	case rb.AggregateKeyType == "CUSTOM_KEYS" && len(rb.CustomKeys) == 1 && rb.CustomKeys[0].Header != nil &&
		strings.EqualFold(rb.CustomKeys[0].Header.Name, or(key.Header, key.Field)) && or(key.Header, key.Field) != "":
		return ""
	}
	return "aggregates by " + strings.ToLower(rb.AggregateKeyType)
}

// wafScoped are the keys a scope-down statement matches (a header's
// exact value, an IP set's addresses, any of them), or every key: no
// statement, or one that excludes keys.
func wafScoped(s *wafStatement, sets map[string][]string) ([]string, bool) {
	if s == nil || s.NotStatement != nil {
		return nil, true
	}
	var keys []string
	var walk func(s wafStatement)
	walk = func(s wafStatement) {
		switch {
		case s.ByteMatchStatement != nil:
			keys = append(keys, s.ByteMatchStatement.SearchString)
		case s.IPSetReferenceStatement != nil:
			arn := s.IPSetReferenceStatement.ARN
			if i := strings.Index(arn, "/ipset/"); i >= 0 {
				setName, _, _ := strings.Cut(arn[i+len("/ipset/"):], "/")
				keys = append(keys, sets[setName]...)
			}
		case s.OrStatement != nil:
			for _, c := range s.OrStatement.Statements {
				walk(c)
			}
		}
	}
	walk(*s)
	if len(keys) == 0 {
		return nil, true
	}
	return keys, false
}

// jsonLine is the line of text where a JSON error is, 0 if it does not
// say.
func jsonLine(text []byte, err error) int {
	var off int64
	switch e := err.(type) {
	case *json.SyntaxError:
		off = e.Offset
	case *json.UnmarshalTypeError:
		off = e.Offset
	default:
		return 0
	}
	return 1 + bytes.Count(text[:min(int(off), len(text))], []byte("\n"))
}
