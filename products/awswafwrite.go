package products

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// The wafv2 API's shapes ratelab writes and reads (API_Rule,
// API_RateBasedStatement, API_ByteMatchStatement, API_IPSetReference-
// Statement, API_CreateIPSet), their fields as the API names them.
type (
	wafFile struct {
		// Comment is ratelab's, not AWS's: what the file is for.
		Comment []string   `json:"Comment,omitempty"`
		Rules   []wafRule  `json:"Rules"`
		IPSets  []wafIPSet `json:"IPSets,omitempty"`
	}
	wafRule struct {
		Name             string        `json:"Name"`
		Priority         int           `json:"Priority"`
		Statement        wafStatement  `json:"Statement"`
		Action           *wafAction    `json:"Action,omitempty"`
		VisibilityConfig wafVisibility `json:"VisibilityConfig"`
	}
	wafStatement struct {
		RateBasedStatement      *wafRateBased `json:"RateBasedStatement,omitempty"`
		NotStatement            *wafNot       `json:"NotStatement,omitempty"`
		OrStatement             *wafOr        `json:"OrStatement,omitempty"`
		ByteMatchStatement      *wafByteMatch `json:"ByteMatchStatement,omitempty"`
		IPSetReferenceStatement *wafIPSetRef  `json:"IPSetReferenceStatement,omitempty"`
	}
	wafRateBased struct {
		Limit               int           `json:"Limit"`
		EvaluationWindowSec int           `json:"EvaluationWindowSec,omitempty"`
		AggregateKeyType    string        `json:"AggregateKeyType"`
		CustomKeys          []wafKeyPart  `json:"CustomKeys,omitempty"`
		ForwardedIPConfig   *wafForwarded `json:"ForwardedIPConfig,omitempty"`
		ScopeDownStatement  *wafStatement `json:"ScopeDownStatement,omitempty"`
	}
	wafForwarded struct {
		HeaderName       string `json:"HeaderName"`
		FallbackBehavior string `json:"FallbackBehavior"`
	}
	wafKeyPart struct {
		Header *wafNamed `json:"Header,omitempty"`
		IP     *struct{} `json:"IP,omitempty"`
	}
	wafNamed struct {
		Name                string         `json:"Name"`
		TextTransformations []wafTransform `json:"TextTransformations,omitempty"`
	}
	wafTransform struct {
		Priority int    `json:"Priority"`
		Type     string `json:"Type"`
	}
	wafNot struct {
		Statement wafStatement `json:"Statement"`
	}
	wafOr struct {
		Statements []wafStatement `json:"Statements"`
	}
	wafByteMatch struct {
		SearchString         string         `json:"SearchString"`
		FieldToMatch         wafField       `json:"FieldToMatch"`
		TextTransformations  []wafTransform `json:"TextTransformations"`
		PositionalConstraint string         `json:"PositionalConstraint"`
	}
	wafField struct {
		SingleHeader *struct {
			Name string `json:"Name"`
		} `json:"SingleHeader,omitempty"`
	}
	wafIPSetRef struct {
		ARN string `json:"ARN"`
	}
	wafAction struct {
		Block *struct {
			CustomResponse *struct {
				ResponseCode int `json:"ResponseCode"`
			} `json:"CustomResponse,omitempty"`
		} `json:"Block,omitempty"`
		Count *struct{} `json:"Count,omitempty"`
	}
	wafVisibility struct {
		SampledRequestsEnabled   bool   `json:"SampledRequestsEnabled"`
		CloudWatchMetricsEnabled bool   `json:"CloudWatchMetricsEnabled"`
		MetricName               string `json:"MetricName"`
	}
	wafIPSet struct {
		Name             string   `json:"Name"`
		Scope            string   `json:"Scope"`
		IPAddressVersion string   `json:"IPAddressVersion"`
		Addresses        []string `json:"Addresses"`
	}
)

// wafIPSetARN is the ARN a rule names an IP set of ratelab's by, its
// region, account and id left for the person to put in.
const wafIPSetARN = "arn:aws:wafv2:REGION:ACCOUNT:regional/ipset/%s/ID"

// Write is aws-waf.json: the Rules of a web ACL (aws wafv2
// update-web-acl --rules) that keep p, a rate-based rule each rule of
// every key and of each tier, blocking with 429; a tier's keys matched
// by its rules' scope-down statement (the header's values; an IP set of
// the addresses, in IPSets, for aws wafv2 create-ip-set), every key's
// rules scoped down to the keys of no tier. Comment holds the notes.
func (w AWSWAF) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("aws-waf: no rule to write")
	}
	agg, note := wafKeyOf(p.Key)
	f := wafFile{Comment: append(slices.Clone(p.Notes), note+".")}
	var tierMatch []wafStatement
	for _, t := range p.Tiers {
		m, sets := wafMatch(p.Key, t)
		f.IPSets = append(f.IPSets, sets...)
		tierMatch = append(tierMatch, m)
	}
	if len(f.IPSets) > 0 {
		f.Comment = append(f.Comment, "Create each of IPSets with aws wafv2 create-ip-set, and put its ARN in the rules that name it.")
	}
	add := func(group string, rules []Rule, scope *wafStatement) {
		for i, r := range rules {
			wr := r.(AWSWAFRule)
			name := fmt.Sprintf("ratelab-%s-%ds", group, int(wr.Window/time.Second))
			if len(rules) > 1 && i > 0 && rules[i-1].(AWSWAFRule).Window == wr.Window {
				name += fmt.Sprintf("-%d", i+1)
			}
			rb := agg
			rb.Limit, rb.EvaluationWindowSec, rb.ScopeDownStatement = wr.Limit, int(wr.Window/time.Second), scope
			action := &wafAction{}
			action.Block = &struct {
				CustomResponse *struct {
					ResponseCode int `json:"ResponseCode"`
				} `json:"CustomResponse,omitempty"`
			}{CustomResponse: &struct {
				ResponseCode int `json:"ResponseCode"`
			}{ResponseCode: 429}}
			f.Rules = append(f.Rules, wafRule{Name: name, Priority: len(f.Rules), Statement: wafStatement{RateBasedStatement: &rb}, Action: action,
				VisibilityConfig: wafVisibility{SampledRequestsEnabled: true, CloudWatchMetricsEnabled: true, MetricName: strings.ReplaceAll(name, "-", "_")}})
		}
	}
	var users *wafStatement
	switch len(tierMatch) {
	case 0:
	case 1:
		users = &wafStatement{NotStatement: &wafNot{Statement: tierMatch[0]}}
	default:
		users = &wafStatement{NotStatement: &wafNot{Statement: wafStatement{OrStatement: &wafOr{Statements: tierMatch}}}}
	}
	add("users", p.Rules, users)
	for i, t := range p.Tiers {
		add(t.Name, t.Rules, &tierMatch[i])
	}
	text, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	return string(text) + "\n", nil
}

// wafKeyOf is the aggregation of the plan's key, and what a person must
// know.
func wafKeyOf(key accesslog.KeySpec) (wafRateBased, string) {
	header := func(name string) wafRateBased {
		return wafRateBased{AggregateKeyType: "CUSTOM_KEYS", CustomKeys: []wafKeyPart{{Header: &wafNamed{Name: strings.ToLower(name), TextTransformations: []wafTransform{{0, "NONE"}}}}}}
	}
	switch {
	case key.Header != "":
		return header(key.Header), "AWS WAF leaves a request without the " + key.Header + " header out of the rule: it is not limited"
	case key.Field == "":
		return wafRateBased{AggregateKeyType: "IP"}, "The client's address is the one AWS WAF sees; behind a proxy or CDN, FORWARDED_IP with ForwardedIPConfig takes it from a header"
	default:
		return header(key.Field), fmt.Sprintf("The log's field %s is the key, which AWS WAF does not see: these rules aggregate on a request header of its name", key.Field)
	}
}

// wafMatch is the statement that matches tier t's keys: a byte match of
// the header's value, or the IP sets of its addresses (one of each
// version, returned to be written beside the rules).
func wafMatch(key accesslog.KeySpec, t Tier) (wafStatement, []wafIPSet) {
	if key.Header == "" && key.Field == "" {
		v4 := wafIPSet{Name: "ratelab-" + t.Name, Scope: "REGIONAL", IPAddressVersion: "IPV4"}
		v6 := wafIPSet{Name: "ratelab-" + t.Name + "-v6", Scope: "REGIONAL", IPAddressVersion: "IPV6"}
		for _, k := range t.Keys {
			switch ip := net.ParseIP(k); {
			case ip == nil:
				// Not an address (a test's key): kept as it is, which
				// AWS refuses.
				v4.Addresses = append(v4.Addresses, k)
			case ip.To4() == nil:
				v6.Addresses = append(v6.Addresses, k+"/128")
			default:
				v4.Addresses = append(v4.Addresses, k+"/32")
			}
		}
		var sets []wafIPSet
		var refs []wafStatement
		for _, set := range []wafIPSet{v4, v6} {
			if len(set.Addresses) > 0 {
				sets = append(sets, set)
				refs = append(refs, wafStatement{IPSetReferenceStatement: &wafIPSetRef{ARN: fmt.Sprintf(wafIPSetARN, set.Name)}})
			}
		}
		if len(refs) == 1 {
			return refs[0], sets
		}
		return wafStatement{OrStatement: &wafOr{Statements: refs}}, sets
	}
	name := strings.ToLower(or(key.Header, key.Field))
	var ms []wafStatement
	for _, k := range t.Keys {
		bm := &wafByteMatch{SearchString: k, TextTransformations: []wafTransform{{0, "NONE"}}, PositionalConstraint: "EXACTLY"}
		bm.FieldToMatch.SingleHeader = &struct {
			Name string `json:"Name"`
		}{Name: name}
		ms = append(ms, wafStatement{ByteMatchStatement: bm})
	}
	if len(ms) == 1 {
		return ms[0], nil
	}
	return wafStatement{OrStatement: &wafOr{Statements: ms}}, nil
}
