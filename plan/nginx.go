package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// NginxPolicy is the plan's policies as nginx enforces them, decided
// over the log through nginx's own model (products.Nginx): the bucket,
// the keys that look like many users' tier, and the two windows, which
// nginx can only write as two buckets (each window's N at once, refilled
// at N a period).
type NginxPolicy struct {
	Bucket, Shared products.NginxRule
	// Pollers is the steady pollers' tier, where the bucket does not
	// spare them as it is.
	Pollers products.NginxRule
	// Clients and Refused are what the bucket, as nginx keeps it,
	// refuses of the users, decided.
	Clients, Refused int64
	// Short and Long are the windows as buckets; PairClients and
	// PairRefused what the two refuse together, decided.
	Short, Long              products.NginxRule
	PairClients, PairRefused int64
}

// Nginx is the plan's bucket as nginx's configuration, keyed as the plan
// was (key, as --key says it): a limit_req_zone for every client, one for
// each tier the plan has (the keys that look like many users, the steady
// pollers; a map sends each key to its zone: nginx does not count a
// request whose key is empty), and the limit_req lines. log names the
// log in the comment. Empty when the plan suggested no bucket.
func (p *Plan) Nginx(key accesslog.KeySpec, log string) string {
	n := p.NginxPolicy
	if n.Bucket.Rate == "" {
		return ""
	}
	notes := []string{fmt.Sprintf("ratelab plan's bucket for %s, keyed by %s: the lines of the http block, then limit_req in each server or location to limit.", log, key)}
	what := fmt.Sprintf("Every client: %s.", n.Bucket.Says())
	switch {
	case n.Bucket.Rounded && p.decidesNone() != "":
		what += fmt.Sprintf(" Not decided over the log (%s); the bucket planned refuses %d clients.", p.decidesNone(), p.Bucket.Clients)
	case n.Bucket.Rounded:
		what += fmt.Sprintf(" Decided over the log, it refuses %d clients and %d requests; the bucket planned, %d and %d.", n.Clients, n.Refused, p.Bucket.Clients, p.Bucket.Refused)
	}
	notes = append(notes, what)
	pol := products.Policy{Key: key, Rules: []products.Rule{n.Bucket}, Clients: p.Clients}
	for _, t := range p.tiers() {
		rule, says := n.Shared, fmt.Sprintf("The %d keys that look like many users (%.1f%% of the requests): %s.", p.SharedTier.Keys, 100*t.share, n.Shared.Says())
		if t.name == "pollers" {
			rule, says = n.Pollers, fmt.Sprintf("The %d steady pollers (monitors, health checks; %.1f%% of the requests), which the bucket would refuse: %s.", p.PollerTier.Keys, 100*t.share, n.Pollers.Says())
		}
		notes = append(notes, says)
		tier := products.Tier{Name: t.name, Rules: []products.Rule{rule}}
		for _, c := range t.keys {
			tier.Keys = append(tier.Keys, c.Key)
		}
		pol.Tiers = append(pol.Tiers, tier)
	}
	pol.Notes = notes
	conf, err := products.Nginx{}.Write(pol)
	if err != nil {
		return ""
	}
	return conf
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
	w := p.Windows
	notes := []string{
		fmt.Sprintf("ratelab plan's two windows for %s (%s, %s), keyed by %s, as nginx can say them: nginx has no window, and each is a bucket of N at once refilled at N a period, which admits up to twice N in a period after a quiet one.", log, w.Short, w.Long, key),
		fmt.Sprintf("The short: %s. The long: %s.", n.Short.Says(), n.Long.Says()),
	}
	if p.decidesNone() != "" {
		notes = append(notes, fmt.Sprintf("Not decided over the log (%s); the windows refuse %d clients.", p.decidesNone(), w.Clients))
	} else {
		notes = append(notes, fmt.Sprintf("Decided over the log, the two buckets refuse %d clients and %d requests; the windows, %d clients and %d requests.", n.PairClients, n.PairRefused, w.Clients, w.Refused))
	}
	conf, err := products.Nginx{}.Write(products.Policy{Key: key, Notes: notes, Rules: []products.Rule{n.Short, n.Long}, Clients: p.Clients})
	if err != nil {
		return ""
	}
	return conf
}

// nginxPolicy writes the plan's bucket, tiers and windows as nginx's,
// and decides the bucket and the windows' two as nginx keeps them, with
// decide (each key's requests through nginx's model, over the users).
func (p *Plan) nginxPolicy(decide func(rules ...products.NginxRule) (requests, clients int64)) {
	b := p.Bucket
	if b.Rate.N == 0 {
		return
	}
	n := &p.NginxPolicy
	n.Bucket = products.NginxExpress(b.Policy())
	n.Clients, n.Refused = b.Clients, b.Refused
	if p.decidesNone() == "" {
		n.Refused, n.Clients = decide(n.Bucket)
	}
	if p.SharedTier.Keys > 0 {
		n.Shared = products.NginxExpress(p.SharedTier.Policy)
	}
	if t := p.PollerTier; t.Keys > 0 && t.Scale > 1 {
		n.Pollers = products.NginxExpress(t.Policy)
	}
	if w := p.Windows; w.Short.N > 0 {
		short, _ := products.Nginx{}.Express(w.Short)
		long, _ := products.Nginx{}.Express(w.Long)
		n.Short, n.Long = short.(products.NginxRule), long.(products.NginxRule)
		n.PairRefused, n.PairClients = decide(n.Short, n.Long)
	}
}

// nginxLine is r in limit_req's words: "rate=30r/m burst=46".
func nginxLine(r products.NginxRule) string {
	s := r.String()
	if r.Rounded {
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
