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

// The compute API's SecurityPolicy as ratelab writes and reads it
// (gcloud compute security-policies import --file-format=json), its
// fields as the API names them.
type (
	caPolicy struct {
		Name        string   `json:"name"`
		Description string   `json:"description,omitempty"`
		Type        string   `json:"type,omitempty"`
		Rules       []caRule `json:"rules"`
	}
	caRule struct {
		Priority         int64      `json:"priority"`
		Description      string     `json:"description,omitempty"`
		Match            caMatch    `json:"match"`
		Action           string     `json:"action"`
		RateLimitOptions *caOptions `json:"rateLimitOptions,omitempty"`
		Preview          bool       `json:"preview,omitempty"`
	}
	caMatch struct {
		Expr          *caExpr   `json:"expr,omitempty"`
		VersionedExpr string    `json:"versionedExpr,omitempty"`
		Config        *caConfig `json:"config,omitempty"`
	}
	caExpr struct {
		Expression string `json:"expression"`
	}
	caConfig struct {
		SrcIPRanges []string `json:"srcIpRanges"`
	}
	caOptions struct {
		ConformAction      string       `json:"conformAction"`
		ExceedAction       string       `json:"exceedAction"`
		EnforceOnKey       string       `json:"enforceOnKey,omitempty"`
		EnforceOnKeyName   string       `json:"enforceOnKeyName,omitempty"`
		RateLimitThreshold *caThreshold `json:"rateLimitThreshold"`
		BanDurationSec     int          `json:"banDurationSec,omitempty"`
		BanThreshold       *caThreshold `json:"banThreshold,omitempty"`
	}
	caThreshold struct {
		Count       int `json:"count"`
		IntervalSec int `json:"intervalSec"`
	}
)

// caDefaultPriority is the default rule's, which every policy has.
const caDefaultPriority = 2147483647

// Write is cloud-armor.json: a security policy (gcloud compute
// security-policies import) that keeps p: a throttle each tier, matching
// its keys (inIpRange of each address, or the header's values), then
// every key's, matching all, each refusing with 429 over its threshold,
// then the default rule; its description the notes. A request matches
// the first rule by priority, so a tier's keys are decided by theirs.
func (c CloudArmor) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("cloud-armor: no rule to write")
	}
	key, keyName, note := cloudArmorKeyOf(p.Key)
	pol := caPolicy{Name: "ratelab", Type: "CLOUD_ARMOR", Description: strings.Join(append(slices.Clone(p.Notes), note+"."), " ")}
	all := caMatch{VersionedExpr: "SRC_IPS_V1", Config: &caConfig{SrcIPRanges: []string{"*"}}}
	add := func(group string, rules []Rule, match caMatch) {
		for _, r := range (CloudArmor{}).Merge(rules) {
			cr := r.(CloudArmorRule)
			rule := caRule{Priority: int64(1000 * (len(pol.Rules) + 1)), Description: "ratelab: " + group, Match: match, Action: "throttle",
				RateLimitOptions: &caOptions{ConformAction: "allow", ExceedAction: "deny(429)", EnforceOnKey: key, EnforceOnKeyName: keyName,
					RateLimitThreshold: &caThreshold{Count: cr.Count, IntervalSec: int(cr.Interval / time.Second)}}}
			if cr.Ban > 0 {
				rule.Action, rule.RateLimitOptions.BanDurationSec = "rate_based_ban", int(cr.Ban/time.Second)
			}
			pol.Rules = append(pol.Rules, rule)
		}
	}
	for _, t := range p.Tiers {
		add(t.Name, t.Rules, caMatch{Expr: &caExpr{Expression: cloudArmorExpression(p.Key, t.Keys)}})
	}
	add("every key", p.Rules, all)
	pol.Rules = append(pol.Rules, caRule{Priority: caDefaultPriority, Description: "default rule", Match: all, Action: "allow"})
	text, err := json.MarshalIndent(pol, "", "  ")
	if err != nil {
		return "", err
	}
	return string(text) + "\n", nil
}

// cloudArmorKeyOf is the enforce_on_key the plan's key is, its name, and
// what a person must know.
func cloudArmorKeyOf(key accesslog.KeySpec) (enforce, name, note string) {
	switch {
	case key.Header != "":
		return "HTTP_HEADER", key.Header, "Requests without the " + key.Header + " header are counted together, as one key (Cloud Armor's ALL); thresholds are each region's"
	case key.Field == "":
		return "IP", "", "The client's address is the one the load balancer sees (XFF_IP takes it from X-Forwarded-For); thresholds are each region's"
	default:
		return "HTTP_HEADER", key.Field, fmt.Sprintf("The log's field %s is the key, which Cloud Armor does not see: these rules count by a request header of its name", key.Field)
	}
}

// cloudArmorExpression is the CEL expression that matches keys: each
// address's range, or each of the header's values.
func cloudArmorExpression(key accesslog.KeySpec, keys []string) string {
	quote := func(s string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
	}
	var parts []string
	for _, k := range keys {
		if key.Header == "" && key.Field == "" {
			cidr := k + "/32"
			if ip := net.ParseIP(k); ip != nil && ip.To4() == nil {
				cidr = k + "/128"
			}
			parts = append(parts, fmt.Sprintf("inIpRange(origin.ip, %s)", quote(cidr)))
			continue
		}
		parts = append(parts, fmt.Sprintf("request.headers[%s] == %s", quote(strings.ToLower(or(key.Header, key.Field))), quote(k)))
	}
	return strings.Join(parts, " || ")
}
