package products

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes a ruleset with a rate limiting rule.
func (Cloudflare) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte(`"requests_per_period"`))
}

var cloudflareIn = regexp.MustCompile(`in \{([^}]*)\}`)

// Read reads cloudflare.json, a ruleset as the Rulesets API returns it
// ({"result": ...}) or its rules alone: each rule with a ratelimit that
// blocks. One whose expression matches keys (ip.src in {...}, the
// header's value in {...}) is a tier of them; one that matches no key or
// excludes them, every key's. Rules that challenge or log, or count by
// another key, are said in the notes. Errors name the rule, or the line
// of a file that is not JSON.
func (c Cloudflare) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var rs cfRuleset
	trimmed := bytes.TrimSpace(text)
	var err error
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		err = json.Unmarshal(trimmed, &rs.Rules)
	case bytes.Contains(trimmed, []byte(`"result"`)):
		var wrapped struct {
			Result cfRuleset `json:"result"`
		}
		err = json.Unmarshal(trimmed, &wrapped)
		rs = wrapped.Result
	default:
		err = json.Unmarshal(trimmed, &rs)
	}
	if err != nil {
		return Read{}, errorf(c, name, jsonLine(text, err), "%v", err)
	}
	out := Read{Name: name}
	var said []string
	_, field, _ := cloudflareKeyOf(key)
	for _, r := range rs.Rules {
		if r.RateLimit == nil || (r.Enabled != nil && !*r.Enabled) {
			continue
		}
		rule, err := c.rule(r, name)
		if err != nil {
			return Read{}, err
		}
		if r.Action != "block" {
			out.Notes = append(out.Notes, fmt.Sprintf("the rule %s's action is %s, not block: not decided", r.Ref, r.Action))
			continue
		}
		if !slices.Contains(r.RateLimit.Characteristics, field) {
			out.Notes = append(out.Notes, fmt.Sprintf("the rule %s counts by %s, taken here for the plan's key (%s)", r.Ref, strings.Join(r.RateLimit.Characteristics, ", "), key))
		}
		keys := cloudflareKeys(r.Expression)
		if keys == nil {
			out.Rules, said = append(out.Rules, rule), append(said, rule.String())
			continue
		}
		out.addToTier(rule, keys, r.Ref)
	}
	if len(out.Rules)+len(out.Tiers) == 0 && len(out.Notes) == 0 {
		return Read{}, errorf(c, name, 0, "no rule with a ratelimit")
	}
	out.Name = name + ": " + strings.Join(said, "; ")
	return out, nil
}

// rule reads a rule's ratelimit, as the API allows it.
func (c Cloudflare) rule(r cfRule, name string) (CloudflareRule, error) {
	rl := r.RateLimit
	p, to := time.Duration(rl.Period)*time.Second, time.Duration(rl.MitigationTimeout)*time.Second
	switch {
	case !slices.Contains(cloudflarePeriods, p):
		return CloudflareRule{}, errorf(c, name, 0, "rule %s: period %d: the API takes 10, 60, 120, 300, 600 or 3600", r.Ref, rl.Period)
	case !slices.Contains(cloudflareTimeouts, to):
		return CloudflareRule{}, errorf(c, name, 0, "rule %s: mitigation_timeout %d: the API takes 0, 10, 60, 120, 300, 600, 3600 or 86400", r.Ref, rl.MitigationTimeout)
	case rl.RequestsPerPeriod < 1:
		return CloudflareRule{}, errorf(c, name, 0, "rule %s: requests_per_period %d: at least 1", r.Ref, rl.RequestsPerPeriod)
	case !slices.Contains(rl.Characteristics, "cf.colo.id"):
		return CloudflareRule{}, errorf(c, name, 0, "rule %s: characteristics without cf.colo.id, which the API requires", r.Ref)
	}
	return CloudflareRule{RequestsPerPeriod: rl.RequestsPerPeriod, Period: p, Timeout: to}, nil
}

// cloudflareKeys are the keys an expression matches by a set (ip.src in
// {...}, a header's value in {...}); nil for one that matches every key,
// or every key but a set's ("not (...)").
func cloudflareKeys(expression string) []string {
	if strings.Contains(expression, "not (") || strings.HasPrefix(strings.TrimSpace(expression), "not ") {
		return nil
	}
	var keys []string
	for _, m := range cloudflareIn.FindAllStringSubmatch(expression, -1) {
		keys = append(keys, cloudflareItems(m[1])...)
	}
	return keys
}

// cloudflareItems are a set's items, quoted strings unquoted.
func cloudflareItems(set string) []string {
	var items []string
	for rest := strings.TrimSpace(set); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			s, _ := strconv.Unquote(q)
			items, rest = append(items, s), rest[len(q):]
			continue
		}
		item, after, _ := strings.Cut(rest, " ")
		items, rest = append(items, item), after
	}
	return items
}
