package products

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxStickCounters is how many counters a request can track at once
// (tune.stick-counters' default).
const maxStickCounters = 3

// Write is a whole haproxy.cfg that keeps p: a frontend on p.Listen that
// tracks each key in a table of each rule (a tier's keys, named in an
// acl, in tables of their own), denies with 429 a request whose rate is
// above a rule's limit, and sends the rest to p.Backend, named once.
func (h HAProxy) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("haproxy: no rule to write")
	}
	for _, rs := range append([][]Rule{p.Rules}, tierRules(p.Tiers)...) {
		if len(rs) > maxStickCounters {
			return "", fmt.Errorf("haproxy: %d rules on one key; a request tracks at most %d counters (tune.stick-counters)", len(rs), maxStickCounters)
		}
	}
	fetch, table, note := haKey(p.Key)
	var b strings.Builder
	for _, n := range append(p.Notes, note+".") {
		hashComment(&b, n)
	}
	listen, backend := or(p.Listen, "127.0.0.1:8000"), or(p.Backend, "127.0.0.1:8080")
	fmt.Fprintf(&b, "\nglobal\n    maxconn 4096\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\n")
	fmt.Fprintf(&b, "frontend ratelab\n    bind %s\n", listen)
	match := "-m str"
	if p.Key.Header == "" && p.Key.Field == "" {
		match = ""
	}
	for _, t := range p.Tiers {
		// Lines of ten keys: acls of one name are one acl, any of them.
		for keys := range slices.Chunk(t.Keys, 10) {
			fmt.Fprintf(&b, "    acl ratelab_%s %s %s%s\n", t.Name, fetch, strings.TrimPrefix(match+" ", " "), strings.Join(keys, " "))
		}
	}
	users := ""
	for i, t := range p.Tiers {
		if i > 0 {
			users += " "
		}
		users += "!ratelab_" + t.Name
	}
	groups := []group{{name: "users", cond: users, rules: p.Rules}}
	for _, t := range p.Tiers {
		groups = append(groups, group{name: t.Name, cond: "ratelab_" + t.Name, rules: t.Rules})
	}
	for _, g := range groups {
		for i, r := range g.rules {
			fmt.Fprintf(&b, "    http-request track-sc%d %s table %s%s\n", i, fetch, g.table(r.(HAProxyRule)), ifCond(g.cond))
		}
	}
	for _, g := range groups {
		for i, r := range g.rules {
			fmt.Fprintf(&b, "    http-request deny deny_status 429 if %s{ sc_http_req_rate(%d) gt %d }\n", strings.TrimPrefix(g.cond+" ", " "), i, r.(HAProxyRule).Limit)
		}
	}
	fmt.Fprintf(&b, "    default_backend ratelab_app\n\nbackend ratelab_app\n    server app %s\n", backend)
	size := fmt.Sprintf("%dk", max(1, (2*p.Clients+999)/1000))
	for _, g := range groups {
		for _, r := range g.rules {
			r := r.(HAProxyRule)
			// Kept two periods after its last request: a key idle for
			// longer starts again as HAProxy's counters would anyway.
			expire := configDuration(max(2*r.Period, time.Second).Round(time.Second))
			fmt.Fprintf(&b, "\nbackend %s\n    stick-table type %s size %s expire %s store http_req_rate(%s)\n", g.table(r), table, size, expire, configDuration(r.Period))
		}
	}
	return b.String(), nil
}

// group is the rules of some keys: every key's but the tiers' (users),
// or a tier's, and the acl condition that says a request is of them.
type group struct {
	name, cond string
	rules      []Rule
}

// table names the stick table of the group's rule r: by its period, and
// its place where another rule of the group has the same period.
func (g group) table(r HAProxyRule) string {
	name := fmt.Sprintf("ratelab_%s_%s", g.name, configDuration(r.Period))
	same := 0
	for _, o := range g.rules {
		if o.(HAProxyRule).Period == r.Period {
			same++
		}
	}
	if same > 1 {
		name += fmt.Sprintf("_%d", slices.Index(g.rules, Rule(r)))
	}
	return name
}

func tierRules(ts []Tier) [][]Rule {
	var out [][]Rule
	for _, t := range ts {
		out = append(out, t.Rules)
	}
	return out
}

func ifCond(cond string) string {
	if cond == "" {
		return ""
	}
	return " if " + cond
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hashComment writes text as # comments of at most 78 columns.
func hashComment(b *strings.Builder, text string) {
	line := "#"
	for w := range strings.FieldsSeq(text) {
		if len(line)+1+len(w) > 78 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}
