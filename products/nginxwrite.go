package products

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is the lines of nginx's configuration that keep p, keyed as p.Key
// says: those of the http block (the maps, a limit_req_zone per rule,
// limit_req_status), then, after "# In the server or location:", the
// limit_req lines. A tier's keys are sent to zones of their own by a map
// (nginx counts no request whose key is empty: each zone's key is empty
// for the keys of another group). nginx has no backend of ours to name:
// the lines go where the person's proxy_pass is.
func (Nginx) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("nginx: no rule to write")
	}
	k := nginxKeyOf(p.Key)
	var b strings.Builder
	for _, n := range p.Notes {
		hashComment(&b, n)
	}
	if k.note != "" {
		hashComment(&b, k.note+".")
	}
	b.WriteString("\n")
	k.routeMap(&b)
	type zoneLine struct {
		key, name, size string
		rule            NginxRule
	}
	var zones []zoneLine
	add := func(key, group, size string, rules []Rule) {
		for i, r := range rules {
			name := "ratelab_" + group
			if len(rules) > 1 {
				name += "_" + zoneSuffix(rules, i)
			}
			zones = append(zones, zoneLine{key, name, size, r.(NginxRule)})
		}
	}
	users := k.zone
	switch len(p.Tiers) {
	case 0:
	case 1:
		// One tier: a map says whether a key is in it, and two more key
		// the users' zones and the tier's by it.
		t := p.Tiers[0]
		fmt.Fprintf(&b, "map %s $ratelab_%s {\n    default 0;\n", k.text, t.Name)
		for _, key := range t.Keys {
			fmt.Fprintf(&b, "    %s 1;\n", strconv.Quote(key))
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "map $ratelab_%s $ratelab_users {\n    1 \"\";\n    default %s;\n}\n", t.Name, k.zone)
		fmt.Fprintf(&b, "map $ratelab_%[1]s $ratelab_%[1]s_key {\n    1 %[2]s;\n    default \"\";\n}\n", t.Name, k.zone)
		users = "$ratelab_users"
	default:
		// Tiers: one map names each key's tier, and one per group keys
		// its zones where the tier is the group's.
		fmt.Fprintf(&b, "map %s $ratelab_tier {\n    default \"\";\n", k.text)
		for _, t := range p.Tiers {
			for _, key := range t.Keys {
				fmt.Fprintf(&b, "    %s %s;\n", strconv.Quote(key), t.Name)
			}
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "map $ratelab_tier $ratelab_users {\n    \"\" %s;\n    default \"\";\n}\n", k.zone)
		for _, t := range p.Tiers {
			fmt.Fprintf(&b, "map $ratelab_tier $ratelab_%[1]s_key {\n    %[1]s %[2]s;\n    default \"\";\n}\n", t.Name, k.zone)
		}
		users = "$ratelab_users"
	}
	add(users, "users", zoneSize(p.Clients), p.Rules)
	for _, t := range p.Tiers {
		add("$ratelab_"+t.Name+"_key", t.Name, zoneSize(len(t.Keys)), t.Rules)
	}
	for _, z := range zones {
		fmt.Fprintf(&b, "limit_req_zone %s zone=%s:%s rate=%s;\n", z.key, z.name, z.size, z.rule.Rate)
	}
	b.WriteString("limit_req_status 429;\n\n# In the server or location:\n")
	for _, z := range zones {
		fmt.Fprintf(&b, "limit_req zone=%s%s%s;\n", z.name, burstOf(z.rule), delayOf(z.rule))
	}
	return b.String(), nil
}

// zoneSuffix tells rules[i]'s zone apart from the others' of its group:
// its period ("15m"), or its place where two share one.
func zoneSuffix(rules []Rule, i int) string {
	per := func(r Rule) string { return configDuration(r.Meant().Per) }
	for j, r := range rules {
		if j != i && per(r) == per(rules[i]) {
			return strconv.Itoa(i + 1)
		}
	}
	return per(rules[i])
}

func burstOf(r NginxRule) string {
	if r.Burst == 0 {
		return ""
	}
	return fmt.Sprintf(" burst=%d", r.Burst)
}

func delayOf(r NginxRule) string {
	switch {
	case r.NoDelay:
		return " nodelay"
	case r.Delay > 0:
		return fmt.Sprintf(" delay=%d", r.Delay)
	}
	return ""
}

// zoneSize is a zone that holds n keys twice over: nginx keeps about
// 16,000 keys of 64 bytes a megabyte.
func zoneSize(n int) string {
	return fmt.Sprintf("%dm", max(1, (2*n+15_999)/16_000))
}

// nginxKey names a key the plan counted by as nginx can: the variable a
// zone keys on (compact), the one a map matches a logged key against (as
// logged), and a line saying what a person must check, if any.
type nginxKeyName struct {
	zone, text, note string
	// route is the path's first segments (+path:N), 0 without.
	route int
}

// nginxKeyOf is key as nginx can key on it (read by accesslog.ParseKey: a
// header's field is http_ and its name, as nginx's variable is).
func nginxKeyOf(key accesslog.KeySpec) nginxKeyName {
	k := nginxKeyName{route: key.PathSegments}
	switch {
	case key.Field == "":
		k.zone, k.text = "$binary_remote_addr", "$remote_addr"
		k.note = "Behind a proxy or load balancer, set_real_ip_from and real_ip_header make $remote_addr the client's"
	case strings.HasPrefix(key.Field, "http_"):
		k.zone, k.text = "$"+key.Field, "$"+key.Field
	default:
		// A field of the log nginx does not have: keyed here on a header
		// of its name, which the person replaces.
		v := "$http_" + strings.Map(func(r rune) rune {
			if r == '.' || r == '-' {
				return '_'
			}
			return unicode.ToLower(r)
		}, key.Field)
		k.zone, k.text = v, v
		k.note = fmt.Sprintf("The log's field %s is the key, which nginx does not see: these lines key on %s, a request header of its name; put the variable that holds it in its place (a cookie's $cookie_..., an auth module's $jwt_claim_sub)", key.Field, v)
	}
	if k.route > 0 {
		// The plan's key is the client's, a space, and the route.
		k.zone += "$ratelab_route"
		k.text = "\"" + k.text + " $ratelab_route\""
	}
	return k
}

// routeMap writes the map of the path's first segments a +path:N key
// needs.
func (k nginxKeyName) routeMap(b *strings.Builder) {
	if k.route > 0 {
		fmt.Fprintf(b, "map $uri $ratelab_route {\n    \"~^(?<route>(/[^/]*){1,%d})\" $route;\n    default $uri;\n}\n", k.route)
	}
}
