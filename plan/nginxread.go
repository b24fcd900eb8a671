package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// nginx's configuration, read as the limit a user runs today (--current):
// its limit_req lines, and the zones and maps they use.

// nginxZone is a limit_req_zone: its key (a variable) and its bucket.
type nginxZone struct {
	key   string
	limit limiters.Limit
	line  int
}

// nginxMap is a map block: the variable it reads, and its value for
// each literal key (default's for any other).
type nginxMap struct {
	from    string
	values  map[string]string
	def     string
	hasDef  bool
	regexps bool
}

var nginxRate = regexp.MustCompile(`^rate=(\d+)r/(s|m)$`)

// nginxConf is what a configuration says of its limits: its zones, its
// maps (by the variable each sets), and its limit_req lines (each zone
// and burst, in their order).
type nginxConf struct {
	name   string
	zones  map[string]nginxZone
	maps   map[string]*nginxMap
	uses   []string
	bursts []int
	cur    *nginxMap // the map block being read
}

// parseNginx reads the limit_req lines of an nginx configuration, and the
// zones and maps they use. Every limit_req line is taken to apply to
// every request (a location's own lines are not told apart); a zone
// applies to a key whose key variable is not empty, through the maps
// the file has (literal keys only), as nginx counts no request with an
// empty key. A limit_req admits its burst and one more at once, and
// refuses the same requests with or without nodelay or delay= (which
// only say whether it waits): a bucket of the zone's rate and burst+1.
func parseNginx(text []byte, name string, key accesslog.KeySpec) (Current, error) {
	conf := nginxConf{name: name, zones: map[string]nginxZone{}, maps: map[string]*nginxMap{}}
	for i, raw := range strings.Split(string(text), "\n") {
		if err := conf.line(raw, i+1); err != nil {
			return Current{}, err
		}
	}
	if len(conf.uses) == 0 {
		return Current{}, fmt.Errorf("plan: --current %s: no limit_req line", name)
	}
	return conf.current(key)
}

// line reads one line of the configuration, numbered n.
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
		return fmt.Errorf("plan: --current %s:%d: a map entry of a key and a value, as \"key\" value;", conf.name, n)
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
	z := nginxZone{line: n}
	var zone string
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "zone="):
			zone, _, _ = strings.Cut(strings.TrimPrefix(f, "zone="), ":")
		case strings.HasPrefix(f, "rate="):
			m := nginxRate.FindStringSubmatch(f)
			if m == nil {
				return fmt.Errorf("plan: --current %s:%d: %s: want rate=Nr/s or rate=Nr/m", conf.name, n, f)
			}
			r, _ := strconv.Atoi(m[1])
			z.limit = limiters.Limit{N: r, Per: map[string]time.Duration{"s": time.Second, "m": time.Minute}[m[2]]}
		case z.key == "":
			z.key = f
		}
	}
	if zone == "" || z.limit.N == 0 || z.key == "" {
		return fmt.Errorf("plan: --current %s:%d: limit_req_zone wants a key, zone=NAME:SIZE and rate=", conf.name, n)
	}
	conf.zones[zone] = z
	return nil
}

// limitReq reads a limit_req line: its zone= and burst=.
func (conf *nginxConf) limitReq(fields []string, n int) error {
	zone, burst := "", 0
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "zone="):
			zone = strings.TrimPrefix(f, "zone=")
		case strings.HasPrefix(f, "burst="):
			b, err := strconv.Atoi(strings.TrimPrefix(f, "burst="))
			if err != nil || b < 0 {
				return fmt.Errorf("plan: --current %s:%d: %s: want a whole burst", conf.name, n, f)
			}
			burst = b
		}
	}
	if zone == "" {
		return fmt.Errorf("plan: --current %s:%d: limit_req names no zone", conf.name, n)
	}
	conf.uses, conf.bursts = append(conf.uses, zone), append(conf.bursts, burst)
	return nil
}

// current is the configuration as the limit run today: each key's tier
// the zones whose key is not empty for it (through the maps), each tier
// the zones' buckets, and notes of what is read otherwise than nginx
// would.
func (conf *nginxConf) current(key accesslog.KeySpec) (Current, error) {
	c := Current{Tiers: tiers.Config{Algorithm: limiters.GCRA, Tiers: map[string][]limiters.Limit{}}}
	var said []string
	limits := make([]limiters.Limit, len(conf.uses))
	for i, zone := range conf.uses {
		z, ok := conf.zones[zone]
		if !ok {
			return Current{}, fmt.Errorf("plan: --current %s: limit_req zone=%s, but no limit_req_zone names it", conf.name, zone)
		}
		limits[i] = limiters.Limit{N: z.limit.N, Per: z.limit.Per, Burst: conf.bursts[i] + 1}
		said = append(said, fmt.Sprintf("%s rate=%dr/%s burst=%d", zone, z.limit.N, map[time.Duration]string{time.Second: "s", time.Minute: "m"}[z.limit.Per], conf.bursts[i]))
	}
	c.Name = conf.name + ": " + strings.Join(said, "; ")
	mine := map[string]bool{"$binary_remote_addr": key.Field == "", "$remote_addr": key.Field == "", "$" + key.Field: key.Field != ""}
	for _, zone := range slices.Compact(slices.Sorted(slices.Values(conf.uses))) {
		v := conf.zones[zone].key
		if _, ok := conf.value(v, "probe", mine, 0); !ok {
			c.Notes = append(c.Notes, fmt.Sprintf("the zone %s is keyed by %s, taken here for the plan's key (%s)", zone, v, key))
		}
	}
	for _, m := range conf.maps {
		if m.regexps {
			c.Notes = append(c.Notes, "a map's regular expressions are not followed (its literal keys and default are)")
			break
		}
	}
	c.tierOf = func(k string) string {
		var in []string
		for _, zone := range conf.uses {
			if v, _ := conf.value(conf.zones[zone].key, k, mine, 0); v != "" {
				in = append(in, zone)
			}
		}
		return strings.Join(slices.Compact(in), "+")
	}
	conf.tiers(&c, limits)
	return c, nil
}

// value is what variable v holds for a request of key k, through the
// maps: a literal as it is, a variable the plan's key is (mine) as k, a
// map's value for what its variable holds (empty for a value it does
// not hold, and has no default for); false for a variable of another
// key.
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

// tiers fills c's tiers: each set of the zones a key may be in, its
// zones' buckets (two zones of one bucket on one key keep the same state:
// one of them decides as both do), the default all of them.
func (conf *nginxConf) tiers(c *Current, limits []limiters.Limit) {
	for mask := range 1 << len(conf.uses) {
		var in []string
		var ls []limiters.Limit
		for i, zone := range conf.uses {
			if mask&(1<<i) != 0 && !slices.Contains(in, zone) {
				in = append(in, zone)
				if !slices.Contains(ls, limits[i]) {
					ls = append(ls, limits[i])
				}
			}
		}
		if len(ls) > 0 {
			c.Tiers.Tiers[strings.Join(in, "+")] = ls
		}
	}
	c.Tiers.Default = strings.Join(slices.Compact(slices.Clone(conf.uses)), "+")
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return strings.Trim(s, "'")
}
