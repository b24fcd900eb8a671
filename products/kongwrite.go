package products

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is Kong's declarative configuration (kong.yaml, format 3.0) that
// keeps p: the service app at p.Backend, named once; a route for every
// key with a rate-limiting plugin of every key's limits; and a route of
// each tier's keys with a plugin of its own. By a header, a tier's route
// matches the header's values (Kong takes the route of more conditions
// first); by address, routes are expressions (net.src.ip), which need
// router_flavor = expressions in kong.conf.
func (k Kong) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("kong: no rule to write")
	}
	var b strings.Builder
	limitBy, note := kongKeyOf(p.Key)
	byAddress := p.Key.Header == "" && p.Key.Field == ""
	notes := append(p.Notes, note+".")
	if byAddress && len(p.Tiers) > 0 {
		notes = append(notes, "Kong's routes match no client address but as expressions: these need router_flavor = expressions in kong.conf.")
	}
	for _, n := range notes {
		hashComment(&b, n)
	}
	fmt.Fprintf(&b, "\n_format_version: \"3.0\"\nservices:\n- name: ratelab_app\n  url: http://%s\n  routes:\n", or(p.Backend, "127.0.0.1:8080"))
	route := func(name, match string, priority int, rules []Rule) error {
		config, err := kongConfig(rules)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  - name: ratelab_%s\n", name)
		switch {
		case byAddress && len(p.Tiers) > 0:
			fmt.Fprintf(&b, "    expression: %s\n    priority: %d\n", strconv.Quote(match), priority)
		default:
			b.WriteString("    paths: [\"/\"]\n")
			if match != "" {
				fmt.Fprintf(&b, "    headers:\n      %s: [%s]\n", or(p.Key.Header, p.Key.Field), match)
			}
		}
		fmt.Fprintf(&b, "    plugins:\n    - name: rate-limiting\n      config: {%s, %s, policy: local}\n", config, limitBy)
		return nil
	}
	users := ""
	if byAddress && len(p.Tiers) > 0 {
		users = `http.path ^= "/"`
	}
	if err := route("users", users, 0, p.Rules); err != nil {
		return "", err
	}
	for _, t := range p.Tiers {
		var match []string
		for _, key := range t.Keys {
			if byAddress {
				match = append(match, "net.src.ip == "+key)
			} else {
				match = append(match, strconv.Quote(key))
			}
		}
		sep := ", "
		if byAddress {
			sep = " || "
		}
		if err := route(t.Name, strings.Join(match, sep), 1, t.Rules); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// kongConfig is rules as the plugin's config, merged (Kong.Merge): a
// limit a period.
func kongConfig(rules []Rule) (string, error) {
	var parts []string
	for _, r := range rules {
		if _, ok := r.(KongRule); !ok {
			return "", fmt.Errorf("kong: %v is not Kong's", r)
		}
	}
	for _, r := range (Kong{}).Merge(rules) {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ", "), nil
}

// kongKeyOf is how the plugin limits by the plan's key, and what a
// person must know.
func kongKeyOf(key accesslog.KeySpec) (limitBy, note string) {
	switch {
	case key.Header != "":
		return "limit_by: header, header_name: " + key.Header, "A request without the " + key.Header + " header is counted by its client's address (Kong falls back to the IP)"
	case key.Field == "":
		return "limit_by: ip", "The client's address is the one Kong trusts (trusted_ips and real_ip_header in kong.conf behind a proxy)"
	default:
		return "limit_by: header, header_name: " + key.Field, fmt.Sprintf("The log's field %s is the key, which Kong does not see: the plugin limits by a request header of its name (limit_by: consumer, if the field is Kong's consumer)", key.Field)
	}
}
