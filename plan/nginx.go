package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// NginxLimit is a bucket as nginx's limit_req writes it: a rate in whole
// requests a second or a minute, and a burst of what it admits at once
// beyond the first request (nginx admits burst+1 at once).
type NginxLimit struct {
	// Want is the bucket meant: its rate, and its capacity as Burst.
	Want limiters.Limit
	// Rate is the rate as written ("30r/m"), Burst the burst.
	Rate  string
	Burst int
	// Enforced is the bucket nginx keeps: the rate written, at the
	// thousandths of a request a second nginx counts in (82r/m is 1.366
	// a second), and Want's capacity; Rounded says it is not Want.
	Enforced limiters.Limit
	Rounded  bool
}

// nginxLimit writes the bucket want (Burst its capacity) as nginx can:
// a whole rate a second, else a whole rate a minute, else the rate a
// minute rounded up (nginx's least is 1r/m), so that nginx refuses no
// client the plan's bucket spares for its rate.
func nginxLimit(want limiters.Limit) NginxLimit {
	n, per := int64(want.N), int64(want.Per)
	l := NginxLimit{Want: want, Burst: max(want.Burst-1, 0)}
	switch {
	case n*int64(time.Second)%per == 0:
		r := n * int64(time.Second) / per
		l.Rate, l.Enforced = fmt.Sprintf("%dr/s", r), limiters.Limit{N: int(r), Per: time.Second}
	default:
		r := max((n*int64(time.Minute)+per-1)/per, 1)
		l.Rate = fmt.Sprintf("%dr/m", r)
		// nginx keeps a rate as thousandths a second, truncated.
		if milli := r * 1000 / 60; milli*60 == r*1000 {
			l.Enforced = limiters.Limit{N: int(r), Per: time.Minute}
		} else {
			l.Enforced = limiters.Limit{N: int(milli), Per: 1000 * time.Second}
		}
	}
	l.Enforced.Burst = want.Burst
	l.Rounded = int64(l.Enforced.N)*per != n*int64(l.Enforced.Per)
	return l
}

// NginxPolicy is the plan's policies as nginx enforces them, decided
// over the log as the plan's are: the bucket, the keys that look like
// many users' tier, and the two windows, which nginx can only write as
// two buckets (each window's N at once, refilled at N a period).
type NginxPolicy struct {
	Bucket, Shared NginxLimit
	// Pollers is the steady pollers' tier, where the bucket does not
	// spare them as it is.
	Pollers NginxLimit
	// Clients and Refused are what the enforced bucket refuses of the
	// users, decided (the plan's bucket's when not rounded).
	Clients, Refused int64
	// Short and Long are the windows as buckets; PairClients and
	// PairRefused what the two refuse together, decided.
	Short, Long              NginxLimit
	PairClients, PairRefused int64
}

// nginxKey is how nginx names a key the plan counted by: the variable it
// is kept under (compact), the one a map matches a logged key against
// (as logged), and a line saying what a person must check, if any.
type nginxKey struct {
	zone, text, note string
	// route is the path's first segments (+path:N), 0 without.
	route int
}

// nginxKeyOf is key as nginx can key on it (read by accesslog.ParseKey:
// a header's field is http_ and its name, as nginx's variable is).
func nginxKeyOf(key accesslog.KeySpec) nginxKey {
	k := nginxKey{route: key.PathSegments}
	switch {
	case key.Field == "":
		k.zone, k.text = "$binary_remote_addr", "$remote_addr"
		k.note = "Behind a proxy or load balancer, set_real_ip_from and real_ip_header make $remote_addr the client's"
	case strings.HasPrefix(key.Field, "http_"):
		k.zone, k.text = "$"+key.Field, "$"+key.Field
	default:
		// A field of the log nginx does not have: keyed here on a
		// header of its name, which the person replaces.
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

// routeMap writes the map of the path's first segments a +path:N key needs.
func (k nginxKey) routeMap(b *strings.Builder) {
	if k.route > 0 {
		fmt.Fprintf(b, "map $uri $ratelab_route {\n    \"~^(?<route>(/[^/]*){1,%d})\" $route;\n    default $uri;\n}\n", k.route)
	}
}

// Nginx is the plan's bucket as nginx's configuration, keyed as the plan
// was (key, as --key says it): a limit_req_zone for every client, one for
// the keys that look like many users if the plan has such a tier (a map
// sends each key to one of the two: nginx does not count a request whose
// key is empty), and the limit_req lines. log names the log in the
// comment. Empty when the plan suggested no bucket.
func (p *Plan) Nginx(key accesslog.KeySpec, log string) string {
	n := p.NginxPolicy
	if n.Bucket.Rate == "" {
		return ""
	}
	k := nginxKeyOf(key)
	var b strings.Builder
	comment(&b, fmt.Sprintf("ratelab plan's bucket for %s, keyed by %s: the lines of the http block, then limit_req in each server or location to limit.", log, key))
	if k.note != "" {
		comment(&b, k.note+".")
	}
	what := fmt.Sprintf("Every client: %s.", nginxSays(n.Bucket))
	switch {
	case n.Bucket.Rounded && p.decidesNone() != "":
		what += fmt.Sprintf(" Not decided over the log (%s); the bucket planned refuses %d clients.", p.decidesNone(), p.Bucket.Clients)
	case n.Bucket.Rounded:
		what += fmt.Sprintf(" Decided over the log, it refuses %d clients and %d requests; the bucket planned, %d and %d.", n.Clients, n.Refused, p.Bucket.Clients, p.Bucket.Refused)
	}
	comment(&b, what)
	tiers := p.tiers()
	tier := p.SharedTier.Keys > 0 && len(p.Shared) > 0
	users, shared := k.zone, ""
	if t := p.SharedTier; tier {
		comment(&b, fmt.Sprintf("The %d keys that look like many users (%.1f%% of the requests): %s.", t.Keys, 100*t.Share, nginxSays(n.Shared)))
	}
	if t := p.PollerTier; n.Pollers.Rate != "" {
		comment(&b, fmt.Sprintf("The %d steady pollers (monitors, health checks; %.1f%% of the requests), which the bucket would refuse: %s.", t.Keys, 100*t.Share, nginxSays(n.Pollers)))
	}
	b.WriteString("\n")
	k.routeMap(&b)
	if n.Pollers.Rate != "" {
		return p.nginxTiers(&b, k, tiers)
	}
	if tier {
		fmt.Fprintf(&b, "map %s $ratelab_shared {\n    default 0;\n", k.text)
		for _, c := range p.Shared {
			fmt.Fprintf(&b, "    %s 1;\n", strconv.Quote(c.Key))
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "map $ratelab_shared $ratelab_users {\n    1 \"\";\n    default %s;\n}\n", k.zone)
		fmt.Fprintf(&b, "map $ratelab_shared $ratelab_shared_key {\n    1 %s;\n    default \"\";\n}\n", k.zone)
		users, shared = "$ratelab_users", "$ratelab_shared_key"
	}
	size := zoneSize(p.Clients)
	fmt.Fprintf(&b, "limit_req_zone %s zone=ratelab_users:%s rate=%s;\n", users, size, n.Bucket.Rate)
	if shared != "" {
		fmt.Fprintf(&b, "limit_req_zone %s zone=ratelab_shared:1m rate=%s;\n", shared, n.Shared.Rate)
	}
	b.WriteString("limit_req_status 429;\n\n# In the server or location:\n")
	fmt.Fprintf(&b, "limit_req zone=ratelab_users%s nodelay;\n", burstOf(n.Bucket))
	if shared != "" {
		fmt.Fprintf(&b, "limit_req zone=ratelab_shared%s nodelay;\n", burstOf(n.Shared))
	}
	return b.String()
}

// NginxWindows is the plan's two windows as nginx can say them: nginx has
// no window limit, and each becomes a bucket of N at once refilled at N a
// period, two zones on one key (nginx refuses a request either refuses).
// Empty when the plan suggested no pair.
func (p *Plan) NginxWindows(key accesslog.KeySpec, log string) string {
	n := p.NginxPolicy
	if n.Short.Rate == "" {
		return ""
	}
	k := nginxKeyOf(key)
	var b strings.Builder
	w := p.Windows
	comment(&b, fmt.Sprintf("ratelab plan's two windows for %s (%s, %s), keyed by %s, as nginx can say them: nginx has no window, and each is a bucket of N at once refilled at N a period, which admits up to twice N in a period after a quiet one.", log, w.Short, w.Long, key))
	comment(&b, fmt.Sprintf("The short: %s. The long: %s.", nginxSays(n.Short), nginxSays(n.Long)))
	if p.decidesNone() != "" {
		comment(&b, fmt.Sprintf("Not decided over the log (%s); the windows refuse %d clients.", p.decidesNone(), w.Clients))
	} else {
		comment(&b, fmt.Sprintf("Decided over the log, the two buckets refuse %d clients and %d requests; the windows, %d clients and %d requests.", n.PairClients, n.PairRefused, w.Clients, w.Refused))
	}
	if k.note != "" {
		comment(&b, k.note+".")
	}
	b.WriteString("\n")
	k.routeMap(&b)
	size := zoneSize(p.Clients)
	fmt.Fprintf(&b, "limit_req_zone %s zone=ratelab_short:%s rate=%s;\n", k.zone, size, n.Short.Rate)
	fmt.Fprintf(&b, "limit_req_zone %s zone=ratelab_long:%s rate=%s;\n", k.zone, size, n.Long.Rate)
	b.WriteString("limit_req_status 429;\n\n# In the server or location:\n")
	fmt.Fprintf(&b, "limit_req zone=ratelab_short%s nodelay;\n", burstOf(n.Short))
	fmt.Fprintf(&b, "limit_req zone=ratelab_long%s nodelay;\n", burstOf(n.Long))
	return b.String()
}

// comment writes text as nginx comments of at most 78 columns.
func comment(b *strings.Builder, text string) {
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

// nginxSays is what l's lines mean, in words, and where nginx differs.
func nginxSays(l NginxLimit) string {
	s := fmt.Sprintf("%s, %d at once (rate=%s burst=%d: nginx admits the burst and one more)", rateWords(l.Want), l.Want.Burst, l.Rate, l.Burst)
	if !l.Rounded {
		return s
	}
	want := perSecond(l.Want)
	if strings.HasSuffix(l.Rate, "r/m") && float64(l.Enforced.N)/l.Enforced.Per.Seconds() < want {
		// Written exactly, kept truncated.
		if r, _ := strconv.Atoi(strings.TrimSuffix(l.Rate, "r/m")); float64(r) == math.Round(want*60) && math.Abs(float64(r)-want*60) < 1e-9 {
			return s + fmt.Sprintf("; nginx keeps %s as %.3f a second, not %.5g (in thousandths)", l.Rate, perSecond(l.Enforced), want)
		}
	}
	return s + fmt.Sprintf("; nginx has no rate of %s (%.4g a minute): %s, rounded up, kept as %.3f a second", rateWords(l.Want), want*60, l.Rate, perSecond(l.Enforced))
}

// rateWords says a bucket's rate: "1 every 2s", "10 a second".
func rateWords(l limiters.Limit) string {
	if l.N == 1 && l.Per == time.Second {
		return "1 a second"
	}
	if l.N == 1 {
		return "1 every " + l.Per.String()
	}
	return limiters.Limit{N: l.N, Per: l.Per}.String()
}

func burstOf(l NginxLimit) string {
	if l.Burst == 0 {
		return ""
	}
	return fmt.Sprintf(" burst=%d", l.Burst)
}

// zoneSize is a zone that holds the log's clients twice over: nginx keeps
// about 16,000 keys of 64 bytes a megabyte.
func zoneSize(clients int) string {
	return fmt.Sprintf("%dm", max(1, (2*clients+15_999)/16_000))
}

// nginxPolicy writes the plan's bucket, tier and windows as nginx's and
// decides those nginx enforces otherwise, with decide (refusedBy over the
// users).
func (p *Plan) nginxPolicy(decide func(limits ...limiters.Limit) (requests, clients int64)) {
	b := p.Bucket
	if b.Rate.N == 0 {
		return
	}
	n := &p.NginxPolicy
	n.Bucket = nginxLimit(b.Policy())
	n.Clients, n.Refused = b.Clients, b.Refused
	if n.Bucket.Rounded {
		n.Refused, n.Clients = decide(n.Bucket.Enforced)
	}
	if p.SharedTier.Keys > 0 {
		n.Shared = nginxLimit(p.SharedTier.Policy)
	}
	if t := p.PollerTier; t.Keys > 0 && t.Scale > 1 {
		n.Pollers = nginxLimit(t.Policy)
	}
	if w := p.Windows; w.Short.N > 0 {
		n.Short = nginxLimit(limiters.Limit{N: w.Short.N, Per: w.Short.Per, Burst: w.Short.N})
		n.Long = nginxLimit(limiters.Limit{N: w.Long.N, Per: w.Long.Per, Burst: w.Long.N})
		n.PairRefused, n.PairClients = decide(n.Short.Enforced, n.Long.Enforced)
	}
}

// nginxLine is l in limit_req's words: "rate=30r/m burst=46".
func nginxLine(l NginxLimit) string {
	s := "rate=" + l.Rate + burstOf(l)
	if l.Rounded {
		s += " (rounded)"
	}
	return s
}

// Go is the plan's policy as Go that builds it with ratelab's library,
// ready to paste: the bucket (gcra.New), or with the keys that look like
// many users, tiers.New with a tier of their own; then the two windows
// (composite.New). Empty when the plan suggested no bucket.
func (p *Plan) Go(log string) string {
	b := p.Bucket
	if b.Rate.N == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "// ratelab plan's policy for %s, with the library\n", log)
	s.WriteString("// (github.com/ratelab/ratelab/limiters and its gcra, tiers and composite).\n")
	if tiers := p.tiers(); len(tiers) > 0 {
		var names []string
		for _, t := range tiers {
			names = append(names, map[string]string{"shared": "the keys that look like many users", "pollers": "the steady pollers"}[t.name])
		}
		fmt.Fprintf(&s, "// A bucket for every key; %s in a tier of their own.\n", strings.Join(names, " and "))
		s.WriteString("limiter, err := tiers.New(tiers.Config{\n\tAlgorithm: limiters.GCRA,\n\tDefault:   \"users\",\n")
		width := len(`"users":`)
		for _, t := range tiers {
			width = max(width, len(t.name)+3)
		}
		fmt.Fprintf(&s, "\tTiers: map[string][]limiters.Limit{\n\t\t%-*s {%s},\n", width, `"users":`, goLimit(b.Policy()))
		for _, t := range tiers {
			fmt.Fprintf(&s, "\t\t%-*s {%s},\n", width, strconv.Quote(t.name)+":", goLimit(t.policy))
		}
		s.WriteString("\t},\n\tUsers: map[string]string{\n")
		for _, t := range tiers {
			for _, c := range t.keys {
				fmt.Fprintf(&s, "\t\t%s: %q,\n", strconv.Quote(c.Key), t.name)
			}
		}
		s.WriteString("\t},\n})\n")
	} else {
		s.WriteString("// A bucket for every key.\n")
		fmt.Fprintf(&s, "limiter, err := gcra.New(%s)\n", goLimit(b.Policy()))
	}
	if w := p.Windows; w.Short.N > 0 {
		s.WriteString("\n// Or two windows together, a short and a long: a request is admitted\n// only if both admit it.\n")
		fmt.Fprintf(&s, "windows, err := composite.New(limiters.SlidingLog, []limiters.Limit{\n\t%s,\n\t%s,\n})\n", goLimit(w.Short), goLimit(w.Long))
	}
	return s.String()
}

// goLimit is l as a Go composite literal.
func goLimit(l limiters.Limit) string {
	s := fmt.Sprintf("{N: %d, Per: %s", l.N, goDuration(l.Per))
	if l.Burst > 0 {
		s += fmt.Sprintf(", Burst: %d", l.Burst)
	}
	return s + "}"
}

// goDuration is d as Go writes it: time.Second, 2 * time.Minute.
func goDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"}} {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d", int64(d))
}

// nginxTiers writes the rest of Nginx's configuration where the steady
// pollers have a tier (the shared keys too, maybe): a map of each tier's
// keys to its name, a zone a tier keyed by the key where the tier is the
// key's (and empty elsewhere: nginx counts no request of an empty key),
// and the bucket's zone keyed where the key is in no tier.
func (p *Plan) nginxTiers(b *strings.Builder, k nginxKey, tiers []aTier) string {
	n := p.NginxPolicy
	fmt.Fprintf(b, "map %s $ratelab_tier {\n    default \"\";\n", k.text)
	for _, t := range tiers {
		for _, c := range t.keys {
			fmt.Fprintf(b, "    %s %s;\n", strconv.Quote(c.Key), t.name)
		}
	}
	b.WriteString("}\n")
	fmt.Fprintf(b, "map $ratelab_tier $ratelab_users {\n    \"\" %s;\n    default \"\";\n}\n", k.zone)
	for _, t := range tiers {
		fmt.Fprintf(b, "map $ratelab_tier $ratelab_%s_key {\n    %s %s;\n    default \"\";\n}\n", t.name, t.name, k.zone)
	}
	limit := map[string]NginxLimit{"shared": n.Shared, "pollers": n.Pollers}
	fmt.Fprintf(b, "limit_req_zone $ratelab_users zone=ratelab_users:%s rate=%s;\n", zoneSize(p.Clients), n.Bucket.Rate)
	for _, t := range tiers {
		fmt.Fprintf(b, "limit_req_zone $ratelab_%s_key zone=ratelab_%s:1m rate=%s;\n", t.name, t.name, limit[t.name].Rate)
	}
	b.WriteString("limit_req_status 429;\n\n# In the server or location:\n")
	fmt.Fprintf(b, "limit_req zone=ratelab_users%s nodelay;\n", burstOf(n.Bucket))
	for _, t := range tiers {
		fmt.Fprintf(b, "limit_req zone=ratelab_%s%s nodelay;\n", t.name, burstOf(limit[t.name]))
	}
	return b.String()
}
