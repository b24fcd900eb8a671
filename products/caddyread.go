package products

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes a Caddyfile with a rate_limit zone.
func (Caddy) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("rate_limit")) && bytes.Contains(text, []byte("zone "))
}

// caddyConf is a Caddyfile as the reader goes through it: the blocks
// open, the named matchers (the keys each matches, and whether it is
// negated), and each rate_limit's matcher and zones.
type caddyConf struct {
	name     string
	blocks   []string // the open blocks' first words
	matchers map[string]*caddyMatcher
	matcher  *caddyMatcher // the one being defined
	limits   []*caddyLimit
	zone     *caddyZone
}

type caddyMatcher struct {
	keys []string
	not  bool
}

type caddyLimit struct {
	matcher string
	zones   []*caddyZone
}

type caddyZone struct {
	name          string
	events        int
	window        time.Duration
	line          int
	key           string
	events0, win0 bool
}

// Read reads a Caddyfile's rate_limit handlers: one with no matcher, or
// one whose matcher excludes keys, is every key's; one whose matcher
// names keys (header, remote_ip) a tier of them. Errors name the line.
func (c Caddy) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	conf := &caddyConf{name: name, matchers: map[string]*caddyMatcher{}}
	for i, raw := range strings.Split(string(text), "\n") {
		if err := conf.line(raw, i+1); err != nil {
			return Read{}, err
		}
	}
	r := Read{Name: name}
	for _, l := range conf.limits {
		var rules []Rule
		for _, z := range l.zones {
			if !z.events0 || !z.win0 {
				return Read{}, errorf(c, name, z.line, "zone %s: want events and window", z.name)
			}
			rules = append(rules, CaddyRule{Events: z.events, Window: z.window})
			if want, _, _ := caddyKeyOf(key); z.key != want {
				r.Notes = append(r.Notes, "zone "+z.name+" keys on "+z.key+", not the plan's "+want+": read as if it did")
			}
		}
		m := conf.matchers[l.matcher]
		if l.matcher == "" || m == nil || m.not || len(m.keys) == 0 {
			if r.Rules == nil {
				r.Rules = rules
			}
			continue
		}
		r.Tiers = append(r.Tiers, Tier{Name: strings.TrimPrefix(l.matcher, "@"), Keys: m.keys, Rules: rules})
	}
	if r.Rules == nil && r.Tiers == nil {
		return Read{}, errorf(c, name, 0, "no rate_limit zone")
	}
	var says []string
	for _, rule := range r.Rules {
		says = append(says, rule.String())
	}
	r.Name = name + ": " + strings.Join(says, "; ")
	return r, nil
}

// line reads line n.
func (c *caddyConf) line(raw string, n int) error {
	if i := strings.Index(raw, "#"); i == 0 || i > 0 && (raw[i-1] == ' ' || raw[i-1] == '\t') {
		raw = raw[:i]
	}
	f := strings.Fields(raw)
	if len(f) == 0 {
		return nil
	}
	if f[0] == "}" {
		if len(c.blocks) > 0 {
			switch c.blocks[len(c.blocks)-1] {
			case "zone":
				c.zone = nil
			case "matcher":
				c.matcher = nil
			}
			c.blocks = c.blocks[:len(c.blocks)-1]
		}
		return nil
	}
	opens := f[len(f)-1] == "{"
	if opens {
		f = f[:len(f)-1]
	}
	kind := c.kind(f, n)
	if err := c.take(f, kind, n); err != nil {
		return err
	}
	if opens {
		c.blocks = append(c.blocks, kind)
	}
	return nil
}

// kind is what a line's block is, as the reader tells them apart.
func (c *caddyConf) kind(f []string, n int) string {
	switch {
	case len(f) == 0:
		return "other"
	case strings.HasPrefix(f[0], "@"):
		return "matcher"
	case f[0] == "not" && c.matcher != nil:
		return "not"
	case f[0] == "rate_limit":
		return "rate_limit"
	case f[0] == "zone" && c.inside("rate_limit"):
		return "zone"
	}
	return "other"
}

// inside says whether the innermost block is of kind.
func (c *caddyConf) inside(kind string) bool {
	return len(c.blocks) > 0 && c.blocks[len(c.blocks)-1] == kind
}

// take keeps what a line of kind says.
func (c *caddyConf) take(f []string, kind string, n int) error {
	switch kind {
	case "matcher":
		m := &caddyMatcher{}
		c.matchers[f[0]] = m
		c.matcher = m
		c.matchLine(f[1:])
		if len(f) > 1 {
			c.matcher = nil // a matcher of one line
		}
	case "not":
		c.matcher.not = true
		c.matchLine(f[1:])
	case "rate_limit":
		l := &caddyLimit{}
		if len(f) > 1 {
			l.matcher = f[1]
		}
		c.limits = append(c.limits, l)
	case "zone":
		if len(f) < 2 || len(c.limits) == 0 {
			return errorf(Caddy{}, c.name, n, "a zone wants a name")
		}
		c.zone = &caddyZone{name: f[1], line: n}
		l := c.limits[len(c.limits)-1]
		l.zones = append(l.zones, c.zone)
	default:
		if c.matcher != nil && len(c.blocks) > 0 && (c.inside("matcher") || c.inside("not")) {
			c.matchLine(f)
			if c.inside("not") {
				c.matcher.not = true
			}
		}
		if c.zone != nil && c.inside("zone") {
			return c.zoneLine(f, n)
		}
	}
	return nil
}

// matchLine keeps the keys a matcher line names: header NAME value,
// remote_ip addresses.
func (c *caddyConf) matchLine(f []string) {
	if len(f) == 0 || c.matcher == nil {
		return
	}
	switch {
	case f[0] == "header" && len(f) >= 3:
		c.matcher.keys = append(c.matcher.keys, f[2:]...)
	case f[0] == "remote_ip" || f[0] == "client_ip":
		c.matcher.keys = append(c.matcher.keys, f[1:]...)
	}
}

// zoneLine reads a zone's key, events and window.
func (c *caddyConf) zoneLine(f []string, n int) error {
	z := c.zone
	if len(f) != 2 {
		return nil
	}
	switch f[0] {
	case "key":
		z.key = f[1]
	case "events":
		v, err := strconv.Atoi(f[1])
		if err != nil || v < 1 {
			return errorf(Caddy{}, c.name, n, "zone %s: events %s: want a whole number, 1 or more", z.name, f[1])
		}
		z.events, z.events0 = v, true
	case "window":
		d, err := caddyDuration(f[1])
		if err != nil || d <= 0 {
			return errorf(Caddy{}, c.name, n, "zone %s: window %s: want a duration above 0 (10s, 1m, 1d)", z.name, f[1])
		}
		z.window, z.win0 = d, true
	}
	return nil
}

// caddyDuration reads a duration as Caddy does: Go's, and days (1d).
func caddyDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		return time.Duration(n * float64(24*time.Hour)), err
	}
	return time.ParseDuration(s)
}
