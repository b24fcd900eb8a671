package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// What the plan says of its policy in a product's terms: the product's
// configuration, the verdict's sentence and the policy table's words.

// ProductConfig is the configuration of the plan's policy for product
// prod (one of Config.Products), keyed by key, with the keys that look
// like many users, and the pollers, in tiers of their own, the product's
// rules scaled as the plan's tiers are; backend is the user's
// application. Empty when the plan wrote nothing for prod.
func (p *Plan) ProductConfig(prod products.Product, key accesslog.KeySpec, log, backend string) (string, error) {
	i := slices.IndexFunc(p.Products, func(pp products.Choice) bool { return pp.Product == prod })
	if i < 0 {
		return "", nil
	}
	pp := p.Products[i]
	if pp.Cannot != "" {
		return "", nil
	}
	pol := products.Policy{Key: key, Rules: pp.Rules, Clients: p.Clients, Backend: backend}
	pol.Notes = append(pol.Notes, fmt.Sprintf("ratelab plan's %s for %s, keyed by %s: %s.", pp.Of, log, key, productSays(pp)))
	if w := p.Windows; pp.Of == "windows" && len(pp.Rules) == 1 && w.Short.N > 0 {
		pol.Notes = append(pol.Notes, fmt.Sprintf("Of the plan's two windows (%s and %s), %s keeps one rule.", w.Short, w.Long, prod.Title()))
	}
	for _, r := range pp.Rules {
		if ch := r.Changes(); ch != "" {
			pol.Notes = append(pol.Notes, fmt.Sprintf("%s keeps %s: %s.", prod.Title(), r, ch))
		}
	}
	pol.Notes = append(pol.Notes, productDecided(pp))
	var expect []string
	for _, r := range pp.Rules {
		expect = append(expect, r.Expect())
	}
	probeKey := "source"
	if key.Header != "" {
		probeKey = "header:" + key.Header
	}
	pol.Notes = append(pol.Notes, fmt.Sprintf("Running, it is checked from outside with ratelab probe --key %s --expect '%s' URL.", probeKey, strings.Join(expect, ", ")))
	pol.Tiers = pp.Tiers
	return prod.Write(pol)
}

// productSays is pp's rules in the product's words, and what they were
// written for: "http_req_rate(15m) gt 739; http_req_rate(1h) gt 2220
// (the windows 739/15min and 2220/h)".
func productSays(pp products.Choice) string {
	var rules, meant string
	for i, r := range pp.Rules {
		if i > 0 {
			rules, meant = rules+"; ", meant+" and "
		}
		rules, meant = rules+r.String(), meant+r.Meant().String()
	}
	s := fmt.Sprintf("%s (%s %s", rules, map[string]string{"bucket": "the bucket", "windows": "the windows", "window": "a window that spares every key the bucket spares:"}[pp.Of], meant)
	switch {
	case pp.Scale > 1:
		s += fmt.Sprintf(", raised ×%g to spare the keys the plan spares", pp.Scale)
	case pp.Scale < 1:
		s += fmt.Sprintf(", lowered ×%g to refuse more of the keys the plan refuses", pp.Scale)
	}
	s += ")"
	for i, t := range pp.Tiers {
		if pp.TierScales[i] != 1 {
			s += fmt.Sprintf("; the %s tier raised ×%g more to spare its keys", t.Name, pp.TierScales[i])
		}
	}
	return s
}

// productNamed says whether name is a product's (a policy row's).
func productNamed(name string) bool {
	ps, _ := products.Parse(name)
	return len(ps) == 1
}

// choiceRules are pp's rules in the product's words, joined.
func choiceRules(pp products.Choice) string {
	var s []string
	for _, r := range pp.Rules {
		s = append(s, r.String())
	}
	return strings.Join(s, "; ")
}

// productVerdict is the verdict's sentence of pp: what the product keeps
// and refuses beside the plan's policy.
func productVerdict(pp products.Choice, bucket int64) string {
	if pp.Cannot != "" {
		return fmt.Sprintf(" %s cannot keep it: %s.", pp.Product.Title(), pp.Cannot)
	}
	s := fmt.Sprintf(" As %s keeps it: %s", pp.Product.Title(), choiceRules(pp))
	if pp.Scale != 1 {
		s += fmt.Sprintf(" (×%g)", pp.Scale)
	}
	if pp.Refused < 0 {
		return s + "."
	}
	switch {
	case pp.Strays == 0 && pp.Missed == 0:
		s += fmt.Sprintf(", refusing the same %s", plural(pp.Clients, "key"))
	default:
		s += fmt.Sprintf(", refusing %s (%d the plan spares, sparing %d it refuses)", plural(pp.Clients, "key"), pp.Strays, pp.Missed)
	}
	s += fmt.Sprintf(" and %s", plural(pp.Refused, "request"))
	if pp.Banned > 0 {
		s += fmt.Sprintf(" (%s of them by a ban)", results.Count(pp.Banned))
	}
	if bucket >= 0 {
		s += fmt.Sprintf(", where the bucket refuses %s", results.Count(bucket))
	}
	return s + "."
}

// productDecided says what the product, replayed over the log, refuses
// beside the plan's policy.
func productDecided(pp products.Choice) string {
	if pp.Refused < 0 {
		return "Not replayed over the log: a merged plan, or one that kept too few of its requests, decides no request."
	}
	s := fmt.Sprintf("Replayed over the log through %s's own decisions, it refuses %s and %s", pp.Product.Title(), plural(pp.Clients, "key"), plural(pp.Refused, "request"))
	if pp.Banned > 0 {
		s += fmt.Sprintf(" (%s of them by a ban)", results.Count(pp.Banned))
	}
	switch {
	case pp.Strays == 0 && pp.Missed == 0:
		s += ": the keys the plan's policy refuses, no other."
	default:
		if pp.Strays > 0 {
			s += fmt.Sprintf("; %s the plan's policy spares (%s)", plural(int64(pp.Strays), "key"), strings.Join(pp.StrayKeys, ", "))
		}
		if pp.Missed > 0 {
			s += fmt.Sprintf("; it spares %s the plan's policy refuses (%s)", plural(int64(pp.Missed), "key"), strings.Join(pp.MissedKeys, ", "))
		}
		s += "."
	}
	return s
}
