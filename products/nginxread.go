package products

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes nginx's limit_req lines.
func (Nginx) Recognizes(text []byte) bool { return bytes.Contains(text, []byte("limit_req")) }

// nginxZoneLine is a limit_req_zone: its key (a variable) and its rate.
type nginxZoneLine struct {
	key  string
	rate int64
	per  time.Duration
	line int
}

// nginxMap is a map block: the variable it reads, and its value for each
// literal key (default's for any other).
type nginxMap struct {
	from    string
	values  map[string]string
	def     string
	hasDef  bool
	regexps bool
}

// nginxUse is a limit_req line: its zone, burst and delay.
type nginxUse struct {
	zone    string
	burst   int
	delay   int
	nodelay bool
}

var nginxRate = regexp.MustCompile(`^rate=(\d+)r/(s|m)$`)

// nginxConf is what a configuration says of its limits: its zones, its
// maps (by the variable each sets), and its limit_req lines in order.
type nginxConf struct {
	name  string
	zones map[string]nginxZoneLine
	maps  map[string]*nginxMap
	uses  []nginxUse
	cur   *nginxMap // the map block being read
}

// Read reads the limit_req lines of an nginx configuration, and the
// zones and maps they use. Every limit_req line is taken to apply to
// every request (a location's own lines are not told apart); a zone
// applies to a key whose key variable is not empty, through the maps
// the file has (literal keys only), as nginx counts no request with an
// empty key. The keys a map names whose zones are not the default's are
// tiers, named by their zones ("ratelab_pollers"). Errors name the line.
func (n Nginx) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	conf := nginxConf{name: name, zones: map[string]nginxZoneLine{}, maps: map[string]*nginxMap{}}
	for _, st := range nginxStatements(text) {
		if err := conf.line(st.text, st.line); err != nil {
			return Read{}, err
		}
	}
	if len(conf.uses) == 0 {
		return Read{}, errorf(n, name, 0, "no limit_req line")
	}
	rules := make([]Rule, len(conf.uses))
	var said []string
	for i, u := range conf.uses {
		z, ok := conf.zones[u.zone]
		if !ok {
			return Read{}, errorf(n, name, 0, "limit_req zone=%s, but no limit_req_zone names it", u.zone)
		}
		r := nginxRule(z.rate, z.per, u.burst+1)
		r.Delay, r.NoDelay = u.delay, u.nodelay
		rules[i] = r
		said = append(said, u.zone+" "+r.String())
	}
	out := Read{Name: name + ": " + strings.Join(said, "; ")}
	mine := map[string]bool{"$binary_remote_addr": key.Field == "", "$remote_addr": key.Field == "", "$" + key.Field: key.Field != ""}
	// The variables nginx.conf as ratelab writes it keys on (a field of
	// the log as a header of its name).
	if kn := nginxKeyOf(key); kn.route == 0 {
		mine[kn.zone], mine[kn.text] = true, true
	}
	var zoneNames []string
	for _, u := range conf.uses {
		zoneNames = append(zoneNames, u.zone)
	}
	for _, zone := range slices.Compact(slices.Sorted(slices.Values(zoneNames))) {
		v := conf.zones[zone].key
		if _, ok := conf.value(v, "probe", mine, 0); !ok {
			out.Notes = append(out.Notes, fmt.Sprintf("the zone %s is keyed by %s, taken here for the plan's key (%s)", zone, v, key))
		}
	}
	for _, m := range conf.maps {
		if m.regexps {
			out.Notes = append(out.Notes, "a map's regular expressions are not followed (its literal keys and default are)")
			break
		}
	}
	conf.tiers(&out, rules, mine)
	return out, nil
}

// tiers sets out's every key's rules and tiers: each key's zones through
// the maps, a key no map names getting the default's, as any key not
// written in them does; the keys a map of the key's own variable names
// whose zones are not the default's are tiers, named by their zones.
func (conf *nginxConf) tiers(out *Read, rules []Rule, mine map[string]bool) {
	zonesOf := func(k string) (in []string, rs []Rule) {
		for i, u := range conf.uses {
			if slices.Contains(in, u.zone) {
				continue
			}
			if v, _ := conf.value(conf.zones[u.zone].key, k, mine, 0); v != "" {
				in, rs = append(in, u.zone), append(rs, rules[i])
			}
		}
		return in, rs
	}
	def, defRules := zonesOf("\x00")
	out.Rules = defRules
	var literal []string // the keys a map of the key's own variable names
	for _, m := range conf.maps {
		if mine[m.from] {
			for k := range m.values {
				literal = append(literal, k)
			}
		}
	}
	tiers := map[string]int{}
	for _, k := range slices.Compact(slices.Sorted(slices.Values(literal))) {
		in, rs := zonesOf(k)
		if slices.Equal(in, def) {
			continue
		}
		name := strings.Join(in, "+")
		if name == "" {
			name = "no zone"
		}
		i, ok := tiers[name]
		if !ok {
			i = len(out.Tiers)
			tiers[name] = i
			out.Tiers = append(out.Tiers, Tier{Name: name, Rules: rs})
		}
		out.Tiers[i].Keys = append(out.Tiers[i].Keys, k)
	}
}

// nginxStatement is a statement of the configuration and its line: a
// directive and its ";", a block's head and its "{", or a "}".
type nginxStatement struct {
	text string
	line int
}

// nginxStatements splits a configuration into statements, wherever they
// stand ("location / { limit_req zone=one burst=5; }" on one line is
// three), comments left out and quoted strings kept whole.
func nginxStatements(text []byte) []nginxStatement {
	var out []nginxStatement
	var cur strings.Builder
	line, start := 1, 1
	var quote byte
	emit := func(end string) {
		if t := strings.TrimSpace(cur.String()); t != "" || end == "}" {
			out = append(out, nginxStatement{strings.TrimSpace(t + end), start})
		}
		cur.Reset()
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			cur.WriteByte(c)
			if c == quote && text[i-1] != '\\' {
				quote = 0
			}
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			i--
		case c == '"' || c == '\'':
			quote = c
			cur.WriteByte(c)
		case c == ';', c == '{', c == '}':
			emit(string(c))
		default:
			if strings.TrimSpace(cur.String()) == "" {
				start = line
			}
			cur.WriteByte(c)
		}
		if c == '\n' {
			line++
		}
	}
	emit("")
	return out
}

// line reads one statement of the configuration, at line n.
func (conf *nginxConf) line(raw string, n int) error {
	if c := strings.IndexByte(raw, '#'); c >= 0 {
		raw = raw[:c]
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil
	}
	fields := strings.Fields(strings.TrimSuffix(strings.TrimSuffix(raw, "{"), ";"))
	switch {
	case conf.cur != nil && raw == "}":
		conf.cur = nil
	case conf.cur != nil:
		return conf.mapEntry(fields, n)
	case fields[0] == "map" && len(fields) == 3 && strings.HasSuffix(raw, "{"):
		conf.cur = &nginxMap{from: fields[1], values: map[string]string{}}
		conf.maps[fields[2]] = conf.cur
	case fields[0] == "limit_req_zone":
		return conf.zone(fields, n)
	case fields[0] == "limit_req":
		return conf.limitReq(fields, n)
	}
	return nil
}

// mapEntry reads a line of a map block: a key and a value.
func (conf *nginxConf) mapEntry(fields []string, n int) error {
	if len(fields) != 2 {
		return errorf(Nginx{}, conf.name, n, "a map entry of a key and a value, as \"key\" value;")
	}
	k, v := unquote(fields[0]), unquote(fields[1])
	switch {
	case fields[0] == "default":
		conf.cur.def, conf.cur.hasDef = v, true
	case strings.HasPrefix(fields[0], "~"):
		conf.cur.regexps = true
	default:
		conf.cur.values[k] = v
	}
	return nil
}

// zone reads a limit_req_zone line: its key, zone= and rate=.
func (conf *nginxConf) zone(fields []string, n int) error {
	z := nginxZoneLine{line: n}
	var zone string
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "zone="):
			zone, _, _ = strings.Cut(strings.TrimPrefix(f, "zone="), ":")
		case strings.HasPrefix(f, "rate="):
			m := nginxRate.FindStringSubmatch(f)
			if m == nil {
				return errorf(Nginx{}, conf.name, n, "%s: want rate=Nr/s or rate=Nr/m", f)
			}
			z.rate, _ = strconv.ParseInt(m[1], 10, 64)
			z.per = map[string]time.Duration{"s": time.Second, "m": time.Minute}[m[2]]
		case z.key == "":
			z.key = f
		}
	}
	if zone == "" || z.rate == 0 || z.key == "" {
		return errorf(Nginx{}, conf.name, n, "limit_req_zone wants a key, zone=NAME:SIZE and rate=")
	}
	conf.zones[zone] = z
	return nil
}

// limitReq reads a limit_req line: its zone=, burst=, and nodelay or
// delay=.
func (conf *nginxConf) limitReq(fields []string, n int) error {
	var u nginxUse
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "zone="):
			u.zone = strings.TrimPrefix(f, "zone=")
		case strings.HasPrefix(f, "burst="), strings.HasPrefix(f, "delay="):
			name, v, _ := strings.Cut(f, "=")
			b, err := strconv.Atoi(v)
			if err != nil || b < 0 {
				return errorf(Nginx{}, conf.name, n, "%s: want a whole %s", f, name)
			}
			if name == "burst" {
				u.burst = b
			} else {
				u.delay = b
			}
		case f == "nodelay":
			u.nodelay = true
		}
	}
	if u.zone == "" {
		return errorf(Nginx{}, conf.name, n, "limit_req names no zone")
	}
	conf.uses = append(conf.uses, u)
	return nil
}

// value is what variable v holds for a request of key k, through the
// maps: a literal as it is, a variable the plan's key is (mine) as k, a
// map's value for what its variable holds (empty for a value it does not
// hold and has no default for); false for a variable of another key.
func (conf *nginxConf) value(v, k string, mine map[string]bool, depth int) (string, bool) {
	if !strings.HasPrefix(v, "$") {
		return v, true
	}
	if m, ok := conf.maps[v]; ok && depth < 8 {
		from, ok := conf.value(m.from, k, mine, depth+1)
		if !ok {
			return "", false
		}
		out, found := m.values[from]
		if !found {
			out, found = m.def, m.hasDef
		}
		if !found {
			return "", true // nginx's map is empty for a value it does not hold
		}
		return conf.value(out, k, mine, depth+1)
	}
	return k, mine[v]
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return strings.Trim(s, "'")
}
