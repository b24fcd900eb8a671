package products

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// The API's shapes ratelab writes and reads: each usage plan as
// create-usage-plan takes it (API_CreateUsagePlan), and, ratelab's, the
// API keys to give it.
type (
	agFile struct {
		// Comment is ratelab's, not AWS's: what the file is for.
		Comment    []string `json:"comment,omitempty"`
		UsagePlans []agPlan `json:"usagePlans"`
	}
	agPlan struct {
		UsagePlan agUsagePlan `json:"usagePlan"`
		// APIKeys are the API keys' values of the plan (create-api-key
		// --value, then create-usage-plan-key); none: every other key.
		APIKeys []string `json:"apiKeys,omitempty"`
	}
	agUsagePlan struct {
		Name        string            `json:"name"`
		Description string            `json:"description,omitempty"`
		APIStages   []agStage         `json:"apiStages,omitempty"`
		Throttle    *agThrottle       `json:"throttle,omitempty"`
		Quota       *agQuota          `json:"quota,omitempty"`
		Tags        map[string]string `json:"tags,omitempty"`
	}
	agStage struct {
		APIID string `json:"apiId"`
		Stage string `json:"stage"`
	}
	agThrottle struct {
		RateLimit  float64 `json:"rateLimit"`
		BurstLimit int     `json:"burstLimit"`
	}
	agQuota struct {
		Limit  int    `json:"limit"`
		Offset int    `json:"offset,omitempty"`
		Period string `json:"period"`
	}
)

// Write is apigateway.json: a usage plan (create-usage-plan
// --cli-input-json) for every key, and one for each tier with its keys'
// values, each with its throttle; the API and stage left for the person
// to put in. comment holds the notes.
func (a APIGateway) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("apigateway: no rule to write")
	}
	if err := a.Keys(p.Key); err != nil {
		return "", fmt.Errorf("apigateway: %w", err)
	}
	f := agFile{Comment: append(slices.Clone(p.Notes), apiGatewayKeyNote(p.Key)+".",
		"Put the API's id and stage in each plan's apiStages; create each plan with aws apigateway create-usage-plan --cli-input-json, each of its API keys with create-api-key --value and create-usage-plan-key; every API key of no tier's plan goes in ratelab-users'.")}
	add := func(group string, rules []Rule, keys []string) {
		r := (APIGateway{}).Merge(rules)[0].(APIGatewayRule)
		f.UsagePlans = append(f.UsagePlans, agPlan{APIKeys: keys, UsagePlan: agUsagePlan{Name: "ratelab-" + group, Description: "ratelab: " + group,
			APIStages: []agStage{{APIID: "API_ID", Stage: "STAGE"}}, Throttle: &agThrottle{RateLimit: r.RateLimit, BurstLimit: r.BurstLimit}}})
	}
	add("users", p.Rules, nil)
	for _, t := range p.Tiers {
		add(t.Name, t.Rules, t.Keys)
	}
	text, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	return string(text) + "\n", nil
}

// Recognizes usage plans with a throttle.
func (APIGateway) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte(`"throttle"`)) && bytes.Contains(text, []byte(`"burstLimit"`))
}

// Read reads apigateway.json, or one usage plan as create-usage-plan
// takes it: the plan without API keys is every key's, each with keys a
// tier of them. A quota is said in the notes, not decided.
func (a APIGateway) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var f agFile
	var err error
	if bytes.Contains(text, []byte(`"usagePlans"`)) {
		err = json.Unmarshal(text, &f)
	} else {
		var plan agUsagePlan
		err = json.Unmarshal(text, &plan)
		f.UsagePlans = []agPlan{{UsagePlan: plan}}
	}
	if err != nil {
		return Read{}, errorf(a, name, jsonLine(text, err), "%v", err)
	}
	out := Read{Name: name}
	if err := a.Keys(key); err != nil {
		out.Notes = append(out.Notes, err.Error()+": each key taken here for an API key")
	}
	for _, pl := range f.UsagePlans {
		u := pl.UsagePlan
		if u.Quota != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("the plan %s's quota (%d a %s) is not decided", u.Name, u.Quota.Limit, strings.ToLower(u.Quota.Period)))
		}
		if u.Throttle == nil {
			continue
		}
		if u.Throttle.RateLimit <= 0 || u.Throttle.BurstLimit < 1 {
			return Read{}, errorf(a, name, 0, "the plan %s: rateLimit %g, burstLimit %d: a rate above 0 and a burst of 1 at least pass a request", u.Name, u.Throttle.RateLimit, u.Throttle.BurstLimit)
		}
		rule := APIGatewayRule{RateLimit: u.Throttle.RateLimit, BurstLimit: u.Throttle.BurstLimit}
		if len(pl.APIKeys) == 0 {
			out.Rules, out.Name = []Rule{rule}, name+": "+rule.String()
			continue
		}
		out.Tiers = append(out.Tiers, Tier{Name: u.Name, Keys: pl.APIKeys, Rules: []Rule{rule}})
	}
	if len(out.Rules)+len(out.Tiers) == 0 {
		return Read{}, errorf(a, name, 0, "no usage plan with a throttle")
	}
	return out, nil
}
