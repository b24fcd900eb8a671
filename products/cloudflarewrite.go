package products

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// The Rulesets API's shapes ratelab writes and reads (a ruleset of the
// phase http_ratelimit, its rules' ratelimit), their fields as the API
// names them.
type (
	cfRuleset struct {
		// Comment is ratelab's, not Cloudflare's: what the file is for.
		Comment     []string `json:"comment,omitempty"`
		Name        string   `json:"name"`
		Kind        string   `json:"kind"`
		Phase       string   `json:"phase"`
		Description string   `json:"description,omitempty"`
		Rules       []cfRule `json:"rules"`
	}
	cfRule struct {
		Ref         string       `json:"ref"`
		Description string       `json:"description,omitempty"`
		Expression  string       `json:"expression"`
		Action      string       `json:"action"`
		Enabled     *bool        `json:"enabled,omitempty"`
		RateLimit   *cfRateLimit `json:"ratelimit"`
	}
	cfRateLimit struct {
		Characteristics   []string `json:"characteristics"`
		Period            int      `json:"period"`
		RequestsPerPeriod int      `json:"requests_per_period"`
		MitigationTimeout int      `json:"mitigation_timeout"`
	}
)

// Write is cloudflare.json: a ruleset of the phase http_ratelimit (the
// body of PUT /zones/{zone_id}/rulesets/phases/http_ratelimit/
// entrypoint; the same fields as Terraform's cloudflare_ruleset) that
// keeps p, a rule each rule, blocking; a tier's keys matched by its rules'
// expression (ip.src in {...}, or the header's value in {...}), every
// key's rules by the keys of no tier. comment holds the notes.
func (c Cloudflare) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("cloudflare: no rule to write")
	}
	characteristic, field, note := cloudflareKeyOf(p.Key)
	rs := cfRuleset{Comment: append(slices.Clone(p.Notes), note+"."), Name: "ratelab", Kind: "zone", Phase: "http_ratelimit",
		Description: "ratelab plan's policy"}
	var tierSets []string
	for _, t := range p.Tiers {
		tierSets = append(tierSets, cloudflareSet(field, p.Key, t.Keys))
	}
	add := func(group, expression string, rules []Rule) {
		for i, r := range rules {
			cr := r.(CloudflareRule)
			ref := fmt.Sprintf("ratelab_%s_%ds", group, int(cr.Period/time.Second))
			if i > 0 && rules[i-1].(CloudflareRule).Period == cr.Period {
				ref += fmt.Sprintf("_%d", i+1)
			}
			rs.Rules = append(rs.Rules, cfRule{Ref: ref, Description: "ratelab: " + group, Expression: expression, Action: "block",
				RateLimit: &cfRateLimit{Characteristics: []string{"cf.colo.id", characteristic}, Period: int(cr.Period / time.Second),
					RequestsPerPeriod: cr.RequestsPerPeriod, MitigationTimeout: int(cr.Timeout / time.Second)}})
		}
	}
	users := "true"
	if p.Key.Header != "" || p.Key.Field != "" {
		// A request without the header has a counter of its own.
		users = fmt.Sprintf("len(%s) > 0", field)
	}
	if len(tierSets) > 0 {
		users += " and not (" + strings.Join(tierSets, " or ") + ")"
	}
	add("users", users, p.Rules)
	for i, t := range p.Tiers {
		add(t.Name, tierSets[i], t.Rules)
	}
	text, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return "", err
	}
	return string(text) + "\n", nil
}

// cloudflareKeyOf is the characteristic the plan's key is, the field an
// expression reads it from, and what a person must know.
func cloudflareKeyOf(key accesslog.KeySpec) (characteristic, field, note string) {
	header := func(name string) string {
		return fmt.Sprintf("http.request.headers[%s]", strconv.Quote(strings.ToLower(name)))
	}
	switch {
	case key.Header != "":
		h := header(key.Header)
		return h, h, "Counting by a header needs Enterprise with Advanced Rate Limiting; the counters are each data center's"
	case key.Field == "":
		return "ip.src", "ip.src", "The client's address is the one Cloudflare sees (ip.src); the counters are each data center's"
	default:
		h := header(key.Field)
		return h, h, fmt.Sprintf("The log's field %s is the key, which Cloudflare does not see: these rules count by a request header of its name (Enterprise)", key.Field)
	}
}

// cloudflareSet is the expression that matches keys: ip.src in {...}, or
// any of the header's values in {...}.
func cloudflareSet(field string, key accesslog.KeySpec, keys []string) string {
	var items []string
	for _, k := range keys {
		if key.Header == "" && key.Field == "" {
			items = append(items, k)
		} else {
			items = append(items, strconv.Quote(k))
		}
	}
	if key.Header == "" && key.Field == "" {
		return fmt.Sprintf("ip.src in {%s}", strings.Join(items, " "))
	}
	return fmt.Sprintf("any(%s[*] in {%s})", field, strings.Join(items, " "))
}
