package products

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is a dynamic configuration file (the file provider's YAML) that
// keeps p: a router for every path with a rateLimit middleware a rule
// (chained: a request passes each in turn), keyed by the header or the
// client's address; a router of its own, of a higher priority, for each
// tier's keys (matched by Header or ClientIP, Traefik v3's matchers);
// and the service, p.Backend, named once.
func (t Traefik) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("traefik: no rule to write")
	}
	criterion, matcher, note := traefikKeyOf(p.Key)
	var b strings.Builder
	for _, n := range append(p.Notes, note+".") {
		hashComment(&b, n)
	}
	backend := "http://" + or(p.Backend, "127.0.0.1:8080")
	b.WriteString("\nhttp:\n  routers:\n")
	writeRouter(&b, "ratelab", "PathPrefix(`/`)", 1, "ratelab-users", len(p.Rules))
	for i, tier := range p.Tiers {
		var terms []string
		for _, k := range tier.Keys {
			if strings.ContainsAny(k, "`\n") {
				return "", fmt.Errorf("traefik: the %s tier's key %q: a rule cannot quote it", tier.Name, k)
			}
			terms = append(terms, fmt.Sprintf(matcher, k))
		}
		rule := "PathPrefix(`/`) && (" + strings.Join(terms, " || ") + ")"
		writeRouter(&b, "ratelab-"+tier.Name, rule, 2+i, "ratelab-"+tier.Name, len(tier.Rules))
	}
	b.WriteString("  middlewares:\n")
	writeMiddlewares(&b, "ratelab-users", p.Rules, criterion)
	for _, tier := range p.Tiers {
		writeMiddlewares(&b, "ratelab-"+tier.Name, tier.Rules, criterion)
	}
	fmt.Fprintf(&b, "  services:\n    ratelab-app:\n      loadBalancer:\n        servers:\n          - url: %s\n", strconv.Quote(backend))
	return b.String(), nil
}

// writeRouter writes a router of rule, at priority, through the
// middlewares named prefix-0 to prefix-(n-1).
func writeRouter(b *strings.Builder, name, rule string, priority int, prefix string, n int) {
	var mws []string
	for i := range n {
		mws = append(mws, fmt.Sprintf("%s-%d", prefix, i))
	}
	fmt.Fprintf(b, "    %s:\n      rule: %s\n      priority: %d\n      middlewares: [%s]\n      service: ratelab-app\n",
		name, strconv.Quote(rule), priority, strings.Join(mws, ", "))
}

// writeMiddlewares writes a rateLimit middleware a rule, named prefix-i.
func writeMiddlewares(b *strings.Builder, prefix string, rules []Rule, criterion string) {
	for i, r := range rules {
		tr := r.(TraefikRule)
		fmt.Fprintf(b, "    %s-%d:\n      rateLimit:\n        average: %d\n        period: %s\n        burst: %d\n        sourceCriterion:\n%s",
			prefix, i, tr.Average, traefikDuration(tr.Period), tr.Burst, criterion)
	}
}

// traefikKeyOf is how Traefik tells the plan's keys apart: the
// sourceCriterion's lines, the rule matcher of one key (a format of it),
// and what to say of it.
func traefikKeyOf(key accesslog.KeySpec) (criterion, matcher, note string) {
	const indent = "          "
	switch {
	case key.Header != "":
		return indent + "requestHeaderName: " + key.Header + "\n", "Header(`" + key.Header + "`, `%s`)",
			"Requests without the " + key.Header + " header share one bucket (Traefik keys them by the empty string)"
	case key.Field == "":
		return indent + "ipStrategy: {}\n", "ClientIP(`%s`)",
			"The client's address is the connection's: behind a proxy, ipStrategy's depth takes it from X-Forwarded-For"
	default:
		return indent + "requestHeaderName: " + key.Field + "\n", "Header(`" + key.Field + "`, `%s`)",
			fmt.Sprintf("The log's field %s is the key, which Traefik does not see: these lines key on a request header of its name; put the header that holds it in its place", key.Field)
	}
}
