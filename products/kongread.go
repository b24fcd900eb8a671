package products

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes Kong's declarative configuration with a rate-limiting
// plugin.
func (Kong) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("_format_version")) && bytes.Contains(text, []byte("rate-limiting"))
}

var kongSourceIP = regexp.MustCompile(`net\.src\.ip\s*==\s*([^\s|&()]+)`)

// Read reads Kong's declarative configuration: each route's
// rate-limiting plugin (its own, else its service's, else a global one).
// A route that matches the plan's header by its values, or client
// addresses in an expression (net.src.ip ==), is a tier of those keys;
// the route that matches neither is every key's. What Kong decides
// otherwise (limit_by another key, a redis or cluster policy shared by
// the nodes) is said in the notes. Errors name the line.
func (k Kong) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return Read{}, errorf(k, name, 0, "%v", err)
	}
	root := &doc
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	global := kongPlugin(mapValue(root, "plugins"))
	out := Read{Name: name}
	found, every := false, false
	for _, svc := range seq(mapValue(root, "services")) {
		byService := kongPlugin(mapValue(svc, "plugins"))
		for _, route := range seq(mapValue(svc, "routes")) {
			plugin := kongPlugin(mapValue(route, "plugins"))
			for _, p := range []*yaml.Node{byService, global} {
				if plugin == nil {
					plugin = p
				}
			}
			var rules []Rule
			if plugin != nil {
				found = true
				rs, notes, err := k.config(plugin, name, key)
				if err != nil {
					return Read{}, err
				}
				rules, out.Notes = rs, append(out.Notes, notes...)
			}
			keys := kongRouteKeys(route, key)
			switch {
			case len(keys) > 0:
				out.Tiers = append(out.Tiers, Tier{Name: or(scalar(route, "name"), fmt.Sprintf("line %d", route.Line)), Keys: keys, Rules: rules})
			case !every:
				every, out.Rules = true, rules
				var said []string
				for _, r := range rules {
					said = append(said, r.String())
				}
				out.Name = name + ": " + strings.Join(said, ", ")
			default:
				out.Notes = append(out.Notes, fmt.Sprintf("the route at line %d matches every key too: the first such route is taken", route.Line))
			}
		}
	}
	if !found {
		return Read{}, errorf(k, name, 0, "no route with a rate-limiting plugin")
	}
	return out, nil
}

// config reads a rate-limiting plugin's config: a rule for each period
// it limits, and notes of how it keys and counts.
func (k Kong) config(plugin *yaml.Node, name string, key accesslog.KeySpec) ([]Rule, []string, error) {
	c := mapValue(plugin, "config")
	var rules []Rule
	for _, p := range kongPeriods {
		v := mapValue(c, p.name)
		if v == nil || v.Value == "null" {
			continue
		}
		n, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || n <= 0 {
			return nil, nil, errorf(k, name, v.Line, "%s: %q: want a number above 0", p.name, v.Value)
		}
		// A limit of 2.5 refuses at a count of 3: as 3.
		rules = append(rules, KongRule{Period: p.name, Limit: int(n + 0.999999)})
	}
	if len(rules) == 0 {
		return nil, nil, errorf(k, name, plugin.Line, "a rate-limiting plugin with no limit (second, minute, hour, day, month or year)")
	}
	var notes []string
	switch by, header := or(scalar(c, "limit_by"), "consumer"), scalar(c, "header_name"); {
	case by == "ip" && key.Header == "" && key.Field == "":
	case by == "header" && key.Header != "" && strings.EqualFold(header, key.Header):
	case by == "header" && key.Field != "" && strings.EqualFold(header, key.Field):
	default:
		notes = append(notes, fmt.Sprintf("the plugin at line %d limits by %s, taken here for the plan's key (%s)", plugin.Line, strings.TrimSpace(by+" "+header), key))
	}
	if policy := or(scalar(c, "policy"), "local"); policy != "local" {
		notes = append(notes, fmt.Sprintf("the plugin at line %d counts in %s, which every node shares: decided here as one node", plugin.Line, policy))
	}
	return rules, notes, nil
}

// kongPlugin is the rate-limiting plugin of a plugins list, nil if none.
func kongPlugin(list *yaml.Node) *yaml.Node {
	for _, p := range seq(list) {
		if scalar(p, "name") == "rate-limiting" && scalar(p, "enabled") != "false" {
			return p
		}
	}
	return nil
}

// kongRouteKeys are the keys a route matches: its header's values, the
// plan's header; or the addresses of its expression.
func kongRouteKeys(route *yaml.Node, key accesslog.KeySpec) []string {
	if e := scalar(route, "expression"); e != "" && key.Header == "" && key.Field == "" {
		var keys []string
		for _, m := range kongSourceIP.FindAllStringSubmatch(e, -1) {
			keys = append(keys, m[1])
		}
		return keys
	}
	headers := mapValue(route, "headers")
	for i := 0; headers != nil && i+1 < len(headers.Content); i += 2 {
		if want := or(key.Header, key.Field); want != "" && strings.EqualFold(headers.Content[i].Value, want) {
			var keys []string
			for _, v := range seq(headers.Content[i+1]) {
				keys = append(keys, v.Value)
			}
			return keys
		}
	}
	return nil
}

// seq is a sequence node's items; nil for another node.
func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}
