package products

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes a security policy with a rate limiting rule.
func (CloudArmor) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte(`"rateLimitOptions"`))
}

var (
	cloudArmorRange  = regexp.MustCompile(`inIpRange\(origin\.ip,\s*'([^']*)'\)`)
	cloudArmorHeader = regexp.MustCompile(`request\.headers\['[^']*'\]\s*==\s*'((?:[^'\\]|\\.)*)'`)
)

// Read reads cloud-armor.json, a security policy as gcloud exports it:
// its rules by priority, a key decided by the first that matches it. A
// throttle or rate-based ban that matches every request is every key's;
// one before it that matches keys (inIpRange of addresses, the header's
// values) is a tier of them. What Cloud Armor decides otherwise (a rule
// in preview, a rule no request reaches, another key) is said in the
// notes. Errors name the rule, or the line of a file that is not JSON.
func (c CloudArmor) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var pol caPolicy
	if err := json.Unmarshal(text, &pol); err != nil {
		return Read{}, errorf(c, name, jsonLine(text, err), "%v", err)
	}
	rules := slices.Clone(pol.Rules)
	slices.SortStableFunc(rules, func(a, b caRule) int { return cmp.Compare(a.Priority, b.Priority) })
	out := Read{Name: name}
	every := false
	enforce, keyName, _ := cloudArmorKeyOf(key)
	for _, r := range rules {
		if r.Action != "throttle" && r.Action != "rate_based_ban" {
			continue
		}
		rule, err := c.rule(r, name)
		if err != nil {
			return Read{}, err
		}
		switch o := r.RateLimitOptions; {
		case r.Preview:
			out.Notes = append(out.Notes, fmt.Sprintf("the rule of priority %d is in preview: it refuses nothing", r.Priority))
			continue
		case every:
			out.Notes = append(out.Notes, fmt.Sprintf("the rule of priority %d comes after one that matches every request: none reaches it", r.Priority))
			continue
		case cmp.Or(o.EnforceOnKey, "ALL") != enforce || !strings.EqualFold(o.EnforceOnKeyName, keyName):
			out.Notes = append(out.Notes, fmt.Sprintf("the rule of priority %d counts by %s, taken here for the plan's key (%s)", r.Priority, strings.TrimSpace(cmp.Or(o.EnforceOnKey, "ALL")+" "+o.EnforceOnKeyName), key))
		}
		keys := cloudArmorKeys(r.Match)
		if keys == nil {
			every, out.Rules = true, []Rule{rule}
			out.Name = name + ": " + rule.String()
			continue
		}
		out.Tiers = append(out.Tiers, Tier{Name: fmt.Sprintf("priority %d", r.Priority), Keys: keys, Rules: []Rule{rule}})
	}
	if len(out.Rules)+len(out.Tiers) == 0 && len(out.Notes) == 0 {
		return Read{}, errorf(c, name, 0, "no throttle or rate_based_ban rule")
	}
	return out, nil
}

// rule reads a rule's threshold, and its ban, as the API allows them.
func (c CloudArmor) rule(r caRule, name string) (CloudArmorRule, error) {
	o := r.RateLimitOptions
	if o == nil || o.RateLimitThreshold == nil {
		return CloudArmorRule{}, errorf(c, name, 0, "the rule of priority %d: %s without rateLimitOptions.rateLimitThreshold", r.Priority, r.Action)
	}
	th := o.RateLimitThreshold
	cr := CloudArmorRule{Count: th.Count, Interval: time.Duration(th.IntervalSec) * time.Second, Ban: time.Duration(o.BanDurationSec) * time.Second}
	most := cloudArmorMaxCount
	if r.Action == "rate_based_ban" {
		most = cloudArmorMaxBanCount
		if !slices.Contains(cloudArmorBans, cr.Ban) {
			return CloudArmorRule{}, errorf(c, name, 0, "the rule of priority %d: banDurationSec %d: the API takes 60 to 3600, of a set", r.Priority, o.BanDurationSec)
		}
	}
	switch {
	case !slices.Contains(cloudArmorIntervals, cr.Interval):
		return CloudArmorRule{}, errorf(c, name, 0, "the rule of priority %d: intervalSec %d: the API takes 10, 30, 60, 120, 180, 240, 300, 600, 900, 1200, 1800, 2700 or 3600", r.Priority, th.IntervalSec)
	case cr.Count < 1 || cr.Count > most:
		return CloudArmorRule{}, errorf(c, name, 0, "the rule of priority %d: count %d: the API takes 1 to %d", r.Priority, th.Count, most)
	}
	return cr, nil
}

// cloudArmorKeys are the keys a rule's match names (addresses by
// inIpRange, the header's values); nil for one that matches every
// request.
func cloudArmorKeys(m caMatch) []string {
	if m.Expr == nil {
		if m.Config != nil && !slices.Contains(m.Config.SrcIPRanges, "*") {
			var keys []string
			for _, r := range m.Config.SrcIPRanges {
				keys = append(keys, strings.TrimSuffix(strings.TrimSuffix(r, "/32"), "/128"))
			}
			return keys
		}
		return nil
	}
	var keys []string
	for _, g := range cloudArmorRange.FindAllStringSubmatch(m.Expr.Expression, -1) {
		keys = append(keys, strings.TrimSuffix(strings.TrimSuffix(g[1], "/32"), "/128"))
	}
	for _, g := range cloudArmorHeader.FindAllStringSubmatch(m.Expr.Expression, -1) {
		keys = append(keys, strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(g[1]))
	}
	return keys
}
