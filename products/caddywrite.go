package products

import (
	"fmt"
	"net"
	"strings"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is a whole Caddyfile that keeps p: the order of rate_limit (a
// handler of a plugin, unordered otherwise), a site on p.Listen's port
// bound to its host, a rate_limit for every key with a zone a rule
// (zones named apart: Caddy keeps a zone's state by its name), a
// rate_limit of each tier for its keys (a named matcher), the others'
// excluding them; and the reverse proxy to p.Backend, named once.
func (c Caddy) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("caddy: no rule to write")
	}
	placeholder, match, note := caddyKeyOf(p.Key)
	var b strings.Builder
	for _, n := range append(p.Notes, note+".") {
		hashComment(&b, n)
	}
	host, port, err := net.SplitHostPort(or(p.Listen, "127.0.0.1:8000"))
	if err != nil {
		return "", fmt.Errorf("caddy: listen %q: %w", p.Listen, err)
	}
	fmt.Fprintf(&b, "\n{\n\torder rate_limit before basic_auth\n}\n\nhttp://:%s {\n", port)
	if host != "" {
		fmt.Fprintf(&b, "\tbind %s\n", host)
	}
	users := ""
	if len(p.Tiers) > 0 {
		var all []string
		for _, t := range p.Tiers {
			fmt.Fprintf(&b, "\t@ratelab_%s {\n", t.Name)
			for _, k := range t.Keys {
				if strings.ContainsAny(k, " \t\n{}\"") {
					return "", fmt.Errorf("caddy: the %s tier's key %q: a matcher cannot hold it", t.Name, k)
				}
				fmt.Fprintf(&b, "\t\t%s\n", fmt.Sprintf(match, k))
				all = append(all, k)
			}
			b.WriteString("\t}\n")
		}
		b.WriteString("\t@ratelab_users {\n\t\tnot {\n")
		for _, k := range all {
			fmt.Fprintf(&b, "\t\t\t%s\n", fmt.Sprintf(match, k))
		}
		b.WriteString("\t\t}\n\t}\n")
		users = " @ratelab_users"
	}
	writeZones(&b, users, "ratelab_users", p.Rules, placeholder)
	for _, t := range p.Tiers {
		writeZones(&b, " @ratelab_"+t.Name, "ratelab_"+t.Name, t.Rules, placeholder)
	}
	fmt.Fprintf(&b, "\treverse_proxy %s\n}\n", or(p.Backend, "127.0.0.1:8080"))
	return b.String(), nil
}

// writeZones writes a rate_limit of matcher with a zone a rule, named
// prefix_i.
func writeZones(b *strings.Builder, matcher, prefix string, rules []Rule, placeholder string) {
	fmt.Fprintf(b, "\trate_limit%s {\n", matcher)
	for i, r := range rules {
		cr := r.(CaddyRule)
		fmt.Fprintf(b, "\t\tzone %s_%d {\n\t\t\tkey %s\n\t\t\tevents %d\n\t\t\twindow %s\n\t\t}\n", prefix, i, placeholder, cr.Events, configDuration(cr.Window))
	}
	b.WriteString("\t}\n")
}

// caddyKeyOf is how Caddy tells the plan's keys apart: the zone's key
// placeholder, a matcher line of one key (a format of it), and what to
// say of it.
func caddyKeyOf(key accesslog.KeySpec) (placeholder, match, note string) {
	switch {
	case key.Header != "":
		return "{http.request.header." + key.Header + "}", "header " + key.Header + " %s",
			"Requests without the " + key.Header + " header share one key (the placeholder is empty)"
	case key.Field == "":
		return "{http.request.remote.host}", "remote_ip %s",
			"The client's address is the connection's: behind a proxy, trusted_proxies and {http.request.client_ip} take it from X-Forwarded-For"
	default:
		return "{http.request.header." + key.Field + "}", "header " + key.Field + " %s",
			fmt.Sprintf("The log's field %s is the key, which Caddy does not see: these lines key on a request header of its name; put the placeholder that holds it in its place", key.Field)
	}
}
