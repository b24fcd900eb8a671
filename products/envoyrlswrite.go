package products

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is the rate limit service's configuration (ratelimit.yaml, the
// domain ratelab) that keeps p, and, in its comment, the route's
// rate_limits Envoy sends it. Each unit a rule of any group has is a
// descriptor ratelab of that value, holding every key's limit for it (the
// key's value left out: each key its own counter) and each tier key's of
// its own (a tier key with no limit of that unit, unlimited).
func (EnvoyRLS) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("envoy-rls: no rule to write")
	}
	action, entry, note := envoyKeyOf(p.Key)
	if p.Key.Header == "" && p.Key.Field == "" {
		note = "The client's address is the downstream's as the connection manager trusts it (use_remote_address, xff_num_trusted_hops behind a proxy); the counts are the service's, in Redis, one for every Envoy"
	}
	byUnit := func(rules []Rule) map[string]EnvoyRLSRule {
		m := map[string]EnvoyRLSRule{}
		for _, r := range (EnvoyRLS{}).Merge(rules) {
			m[r.(EnvoyRLSRule).Unit] = r.(EnvoyRLSRule)
		}
		return m
	}
	users := byUnit(p.Rules)
	tiers := make([]map[string]EnvoyRLSRule, len(p.Tiers))
	var units []string
	for _, u := range rlsUnits {
		used := users[u.name].Unit != ""
		for i, t := range p.Tiers {
			tiers[i] = byUnit(t.Rules)
			used = used || tiers[i][u.name].Unit != ""
		}
		if used {
			units = append(units, u.name)
		}
	}
	var b strings.Builder
	for _, n := range append(slices.Clone(p.Notes), note+".") {
		hashComment(&b, n)
	}
	hashComment(&b, "In Envoy: envoy.filters.http.ratelimit with domain ratelab, the service its rate_limit_service, and on the route:")
	b.WriteString("#   rate_limits:\n")
	for _, u := range units {
		fmt.Fprintf(&b, "#   - actions: [{generic_key: {descriptor_key: ratelab, descriptor_value: %s}}, {%s}]\n", u, action)
	}
	b.WriteString("\ndomain: ratelab\ndescriptors:\n")
	for _, u := range units {
		fmt.Fprintf(&b, "- key: ratelab\n  value: %s\n  descriptors:\n", u)
		if r, ok := users[u]; ok {
			fmt.Fprintf(&b, "  - key: %s\n    rate_limit: {unit: %s, requests_per_unit: %d}\n", entry, r.Unit, r.RequestsPerUnit)
		}
		for i, t := range p.Tiers {
			for _, k := range t.Keys {
				if r, ok := tiers[i][u]; ok {
					fmt.Fprintf(&b, "  - key: %s\n    value: %s\n    rate_limit: {unit: %s, requests_per_unit: %d}\n", entry, strconv.Quote(k), r.Unit, r.RequestsPerUnit)
				} else if _, ok := users[u]; ok {
					fmt.Fprintf(&b, "  - key: %s\n    value: %s\n    rate_limit: {unlimited: true}\n", entry, strconv.Quote(k))
				}
			}
		}
	}
	return b.String(), nil
}

// Recognizes the rate limit service's configuration.
func (EnvoyRLS) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("domain:")) && bytes.Contains(text, []byte("requests_per_unit"))
}

// rlsLeaf is a descriptor with a rate_limit: the entries on its path.
type rlsLeaf struct {
	keys, values []string
	rule         EnvoyRLSRule
	unlimited    bool
}

// Read reads the rate limit service's configuration: every descriptor
// with a rate_limit, by the entries on its path. The entry whose value is
// left out is the key (each value its own counter): a limit there is
// every key's; one with a value, that key's in its place (unlimited:
// none). Errors name the line.
func (e EnvoyRLS) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return Read{}, errorf(e, name, 0, "%v", err)
	}
	root := &doc
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	var leaves []rlsLeaf
	var walk func(list *yaml.Node, keys, values []string) error
	walk = func(list *yaml.Node, keys, values []string) error {
		for _, d := range seq(list) {
			k, v := scalar(d, "key"), scalar(d, "value")
			if k == "" {
				return errorf(e, name, d.Line, "a descriptor without a key")
			}
			ks, vs := append(slices.Clone(keys), k), append(slices.Clone(values), v)
			if rl := mapValue(d, "rate_limit"); rl != nil {
				leaf, err := e.leaf(rl, name)
				if err != nil {
					return err
				}
				leaf.keys, leaf.values = ks, vs
				leaves = append(leaves, leaf)
			}
			if err := walk(mapValue(d, "descriptors"), ks, vs); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(mapValue(root, "descriptors"), nil, nil); err != nil {
		return Read{}, err
	}
	if len(leaves) == 0 {
		return Read{}, errorf(e, name, 0, "no descriptor with a rate_limit")
	}
	return rlsRead(name, leaves), nil
}

// leaf reads a rate_limit: its unit and requests, or unlimited.
func (e EnvoyRLS) leaf(rl *yaml.Node, name string) (rlsLeaf, error) {
	if scalar(rl, "unlimited") == "true" {
		return rlsLeaf{unlimited: true}, nil
	}
	r := EnvoyRLSRule{Unit: strings.ToLower(scalar(rl, "unit"))}
	n, err := strconv.ParseUint(scalar(rl, "requests_per_unit"), 10, 32)
	if err != nil {
		return rlsLeaf{}, errorf(e, name, rl.Line, "requests_per_unit %q: want a whole number", scalar(rl, "requests_per_unit"))
	}
	r.RequestsPerUnit = int(n)
	if r.length() == 0 {
		return rlsLeaf{}, errorf(e, name, rl.Line, "unit %q: the service takes second, minute, hour, day, week, month or year", r.Unit)
	}
	return rlsLeaf{rule: r}, nil
}

// rlsRead is the leaves as every key's rules and tiers: the key entry is
// the one some leaf leaves without a value.
func rlsRead(name string, leaves []rlsLeaf) Read {
	keyEntry := ""
	for _, l := range leaves {
		for i, v := range l.values {
			if v == "" && keyEntry == "" {
				keyEntry = l.keys[i]
			}
		}
	}
	signature := func(l rlsLeaf) (sig, value string) {
		var parts []string
		for i, k := range l.keys {
			if k == keyEntry {
				value = l.values[i]
				continue
			}
			parts = append(parts, k+"="+l.values[i])
		}
		return strings.Join(parts, ","), value
	}
	var sigs, said []string
	every := map[string]rlsLeaf{}
	own := map[string]map[string]rlsLeaf{}
	for _, l := range leaves {
		sig, value := signature(l)
		if !slices.Contains(sigs, sig) {
			sigs = append(sigs, sig)
		}
		if value == "" {
			every[sig] = l
			continue
		}
		if own[value] == nil {
			own[value] = map[string]rlsLeaf{}
		}
		own[value][sig] = l
	}
	out := Read{}
	for _, sig := range sigs {
		if l, ok := every[sig]; ok && !l.unlimited {
			out.Rules, said = append(out.Rules, l.rule), append(said, l.rule.String())
		}
	}
	out.Name = name + ": " + strings.Join(said, "; ")
	out.Tiers = keyedTiers(sigs, every, own, func(l rlsLeaf) (Rule, bool) { return l.rule, !l.unlimited })
	return out
}
