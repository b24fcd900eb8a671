package products

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// haConf is what a haproxy.cfg says of its limits: each table's period
// (by the section that declares it), the acls on the key, the counters
// tracked, and the denies on a rate.
type haConf struct {
	name    string
	section string
	tables  map[string]time.Duration
	acls    map[string][]string // acl name: its values (acls of one name add up)
	aclOn   map[string]string   // acl name: its fetch
	tracks  []haTrack
	denies  []haDeny
}

// haTrack is an http-request track-scN line.
type haTrack struct {
	sc           int
	fetch, table string
	cond         haCond
	line         int
}

// haDeny is an http-request deny line's rates, each under its terms'
// acls: any term whose acls hold and whose rate is above its limit
// denies.
type haDeny struct {
	terms []haTerm
	line  int
}

// haTerm is one term of a condition (those joined by ||): its acls, and
// the rates it compares.
type haTerm struct {
	acls  haCond
	rates []haRate
}

// haCond is acls that must all hold, each maybe negated (!name).
type haCond []string

// haRate is a rate compared: counter sc (its table, if named), above
// limit.
type haRate struct {
	sc    int
	table string
	limit int
}

var (
	haStore = regexp.MustCompile(`http_req_rate\(([^)]+)\)`)
	// { sc_http_req_rate(0) gt 100 }, { sc0_http_req_rate gt 100 },
	// { sc_http_req_rate(0,t) ge 101 }.
	haRateRe = regexp.MustCompile(`^sc(\d?)_http_req_rate(?:\((\d*)(?:,\s*([^)\s]+))?\))?$`)
)

// Read reads a haproxy.cfg's limits: the stick tables that store
// http_req_rate, the http-request track-scN lines, and the http-request
// deny lines that compare a tracked rate (gt or ge a limit), under acls
// that list keys (a tier each). key is the plan's: a counter tracking
// another fetch is taken for it, and said so.
// Recognizes a configuration that stores an http_req_rate in a stick
// table.
func (HAProxy) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("http_req_rate(")) && bytes.Contains(text, []byte("stick-table"))
}

func (h HAProxy) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	c := haConf{name: name, tables: map[string]time.Duration{}, acls: map[string][]string{}, aclOn: map[string]string{}}
	for i, raw := range strings.Split(string(text), "\n") {
		if err := c.line(raw, i+1); err != nil {
			return Read{}, err
		}
	}
	if len(c.denies) == 0 {
		return Read{}, errorf(h, name, 0, "no http-request deny on a tracked http_req_rate")
	}
	return c.read(key)
}

// line reads line n.
func (c *haConf) line(raw string, n int) error {
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	fields := strings.Fields(raw)
	if len(fields) == 0 {
		return nil
	}
	if raw[0] != ' ' && raw[0] != '\t' {
		c.section = ""
		if len(fields) > 1 {
			c.section = fields[1]
		}
		return nil
	}
	switch {
	case fields[0] == "stick-table":
		m := haStore.FindStringSubmatch(raw)
		if m == nil {
			return nil // a table of other counters
		}
		d, err := haParseDuration(m[1])
		if err != nil {
			return errorf(HAProxy{}, c.name, n, "http_req_rate(%s): %v", m[1], err)
		}
		c.tables[c.section] = d
	case fields[0] == "acl" && len(fields) >= 3:
		var vals []string
		for i := 3; i < len(fields); i++ {
			switch v := fields[i]; {
			case v == "-m" || v == "-f" || v == "-M":
				i++ // the flag's argument
			case strings.HasPrefix(v, "-"):
			default:
				vals = append(vals, v)
			}
		}
		c.acls[fields[1]] = append(c.acls[fields[1]], vals...)
		c.aclOn[fields[1]] = fields[2]
	case fields[0] == "http-request" && len(fields) >= 3 && strings.HasPrefix(fields[1], "track-sc"):
		return c.track(fields, n)
	case fields[0] == "http-request" && len(fields) >= 2 && fields[1] == "deny":
		return c.deny(raw, n)
	}
	return nil
}

// track reads http-request track-scN FETCH [table T] [if|unless COND].
func (c *haConf) track(fields []string, n int) error {
	sc, err := strconv.Atoi(strings.TrimPrefix(fields[1], "track-sc"))
	if err != nil {
		return errorf(HAProxy{}, c.name, n, "%s: want track-sc0, track-sc1 or track-sc2", fields[1])
	}
	t := haTrack{sc: sc, fetch: fields[2], table: c.section, line: n}
	rest := fields[3:]
	if len(rest) >= 2 && rest[0] == "table" {
		t.table, rest = rest[1], rest[2:]
	}
	if len(rest) > 0 {
		if rest[0] != "if" && rest[0] != "unless" {
			return errorf(HAProxy{}, c.name, n, "after the fetch and its table want if or unless, not %s", rest[0])
		}
		terms, err := c.condition(strings.Join(rest[1:], " "), n)
		if err != nil {
			return err
		}
		if len(terms) != 1 || len(terms[0].rates) > 0 || (rest[0] == "unless" && len(terms[0].acls) != 1) {
			return errorf(HAProxy{}, c.name, n, "a track's condition is read as acls that all hold (if), or one that does not (unless)")
		}
		t.cond = terms[0].acls
		if rest[0] == "unless" {
			name, neg := strings.CutPrefix(t.cond[0], "!")
			if !neg {
				name = "!" + name
			}
			t.cond = haCond{name}
		}
	}
	c.tracks = append(c.tracks, t)
	return nil
}

// deny reads an http-request deny line's condition; a deny on no rate
// is not a limit, and is passed over.
func (c *haConf) deny(raw string, n int) error {
	_, cond, ok := strings.Cut(raw, " if ")
	if !ok {
		if strings.Contains(raw, " unless ") {
			return errorf(HAProxy{}, c.name, n, "a deny unless is not read: write it as if")
		}
		return nil
	}
	terms, err := c.condition(cond, n)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(terms, func(t haTerm) bool { return len(t.rates) > 0 }) {
		c.denies = append(c.denies, haDeny{terms: terms, line: n})
	}
	return nil
}

// condition reads "acl !acl { sc_http_req_rate(0) gt 10 } || ..." into
// its terms.
func (c *haConf) condition(s string, n int) ([]haTerm, error) {
	var terms []haTerm
	for part := range strings.SplitSeq(strings.ReplaceAll(s, " or ", " || "), "||") {
		var t haTerm
		rest := strings.TrimSpace(part)
		for rest != "" {
			if strings.HasPrefix(rest, "{") {
				end := strings.IndexByte(rest, '}')
				if end < 0 {
					return nil, errorf(HAProxy{}, c.name, n, "an anonymous acl's { has no }")
				}
				f := strings.Fields(rest[1:end])
				if r, ok := haRateOf(f); ok {
					t.rates = append(t.rates, r)
				} else if len(f) > 0 && haRateRe.MatchString(f[0]) {
					return nil, errorf(HAProxy{}, c.name, n, "{ %s }: want a tracked rate, gt or ge, and a whole number, as in { sc_http_req_rate(0) gt 100 }", strings.Join(f, " "))
				}
				rest = strings.TrimSpace(rest[end+1:])
				continue
			}
			word, after, _ := strings.Cut(rest, " ")
			t.acls = append(t.acls, word)
			rest = strings.TrimSpace(after)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// haRateOf reads "sc_http_req_rate(0) gt 100" (or ge).
func haRateOf(f []string) (haRate, bool) {
	if len(f) != 3 || (f[1] != "gt" && f[1] != "ge") {
		return haRate{}, false
	}
	m := haRateRe.FindStringSubmatch(f[0])
	limit, err := strconv.Atoi(f[2])
	if m == nil || err != nil {
		return haRate{}, false
	}
	r := haRate{limit: limit, table: m[3]}
	if f[1] == "ge" {
		r.limit--
	}
	idx := m[1]
	if idx == "" {
		idx = m[2]
	}
	r.sc, _ = strconv.Atoi(idx)
	return r, true
}

// haParseDuration reads HAProxy's time: a number, then us, ms, s, m, h
// or d (milliseconds without).
func haParseDuration(s string) (time.Duration, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, "ms"
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	v, err := strconv.ParseInt(num, 10, 64)
	u, ok := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[unit]
	if err != nil || !ok || v <= 0 {
		return 0, strconv.ErrSyntax
	}
	return time.Duration(v) * u, nil
}

// read is the configuration as each key's rules: every key's (no acl on
// the key holds for it), and, for each acl on the key that lists keys,
// its keys' (a tier). Acls on anything else are taken to hold, and said
// so.
func (c *haConf) read(key accesslog.KeySpec) (Read, error) {
	fetch, _, _ := haKey(key)
	onKey := map[string]bool{}
	for _, t := range c.tracks {
		for a, f := range c.aclOn {
			if f == t.fetch {
				onKey[a] = true
			}
		}
	}
	var r Read
	others := false
	rulesFor := func(tier string) ([]Rule, error) {
		holds := func(cond haCond) bool {
			for _, a := range cond {
				name, neg := strings.CutPrefix(a, "!")
				v := true
				if onKey[name] {
					v = name == tier
				} else {
					others = true
				}
				if v == neg {
					return false
				}
			}
			return true
		}
		return c.rules(holds)
	}
	var err error
	if r.Rules, err = rulesFor(""); err != nil {
		return Read{}, err
	}
	var said []string
	for _, rule := range r.Rules {
		said = append(said, rule.String())
	}
	for _, a := range slices.Sorted(func(yield func(string) bool) {
		for a := range onKey {
			if !yield(a) {
				return
			}
		}
	}) {
		rules, err := rulesFor(a)
		if err != nil {
			return Read{}, err
		}
		if !slices.Equal(rules, r.Rules) {
			r.Tiers = append(r.Tiers, Tier{Name: a, Keys: c.acls[a], Rules: rules})
			var ts []string
			for _, rule := range rules {
				ts = append(ts, rule.String())
			}
			said = append(said, a+": "+or(strings.Join(ts, ", "), "none"))
		}
	}
	if len(r.Rules) == 0 && len(r.Tiers) == 0 {
		return Read{}, errorf(HAProxy{}, c.name, 0, "no http-request deny on a tracked http_req_rate")
	}
	r.Name = c.name + ": " + strings.Join(said, "; ")
	for _, t := range c.tracks {
		if !strings.EqualFold(t.fetch, fetch) {
			r.Notes = append(r.Notes, "the counters track "+t.fetch+", taken here for the plan's key ("+key.String()+")")
			break
		}
	}
	if others {
		r.Notes = append(r.Notes, "acls on anything but the key are taken to hold")
	}
	return r, nil
}

// rules are the rules of a request for which holds says which acls hold:
// each counter tracked (the first track-scN that applies), and each
// deny term that applies, its rates on their tables.
func (c *haConf) rules(holds func(haCond) bool) ([]Rule, error) {
	tracked := map[int]string{}
	for _, t := range c.tracks {
		if _, ok := tracked[t.sc]; !ok && holds(t.cond) {
			tracked[t.sc] = t.table
		}
	}
	var out []Rule
	for _, d := range c.denies {
		for _, term := range d.terms {
			if !holds(term.acls) {
				continue
			}
			for _, rate := range term.rates {
				table := rate.table
				if table == "" {
					table = tracked[rate.sc]
				}
				if table == "" {
					continue // not tracked for this key: the rate is 0
				}
				period, ok := c.tables[table]
				if !ok {
					return nil, errorf(HAProxy{}, c.name, d.line, "the table %s stores no http_req_rate", table)
				}
				rule := Rule(HAProxyRule{Period: period, Limit: rate.limit})
				if !slices.Contains(out, rule) {
					out = append(out, rule)
				}
			}
		}
	}
	return out, nil
}
