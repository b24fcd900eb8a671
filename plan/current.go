package plan

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Current is the limit a user runs today, to decide the log with beside
// the policy suggested: whom it refuses, of which class ("your limit
// today refuses 150 integrations"). It is read from ratelab's own words
// (a limit, "100/min" or "gcra 10/s burst 20", several with commas; a
// tier file) or from nginx's limit_req_zone and limit_req lines.
type Current struct {
	// Name says it as the tables do: "100/min (sliding log)",
	// "nginx.conf: rate=5r/s burst=10".
	Name string
	// Tiers are its limits: every key in the default tier but those Users
	// names (nginx's zones, which a map applies to some keys only, are
	// tiers of the zones that apply).
	Tiers tiers.Config
	// Notes say what was read otherwise than nginx would (a key it does
	// not see, a variable taken for the plan's key).
	Notes []string
	// tierOf, if set, names each key's tier (nginx's maps): "" for a key
	// no zone applies to.
	tierOf func(key string) string
}

// ParseCurrent reads a limit a user runs: a limit in ratelab's words
// ("100/min", "sliding-log 5/s, 40/min", "gcra 10/s burst 20"; a window
// with no algorithm named is a sliding log, a bucket GCRA), or, for
// text read from a file named name, a tier file (ratelab serve --config)
// or nginx's configuration (its limit_req_zone and limit_req lines, and
// the maps their keys go through). key is what the plan counts requests
// under: the variable nginx keys on that is the same.
func ParseCurrent(s string, file []byte, name string, key accesslog.KeySpec) (Current, error) {
	if file == nil {
		return parseLimits(s)
	}
	if bytes.Contains(file, []byte("limit_req")) {
		return parseNginx(file, name, key)
	}
	c, err := config.Parse(file)
	if err != nil {
		return Current{}, fmt.Errorf("plan: --current %s: neither nginx's limit_req lines nor a tier file: %w", name, err)
	}
	return Current{Name: name, Tiers: c.Tiers}, nil
}

// parseLimits reads limits in ratelab's words, an algorithm's name first
// or not.
func parseLimits(s string) (Current, error) {
	rest := strings.TrimSpace(s)
	var a limiters.Algorithm
	if name, limits, ok := strings.Cut(rest, " "); ok && !strings.Contains(name, "/") {
		alg, err := limiters.ParseAlgorithm(name)
		if err != nil {
			return Current{}, fmt.Errorf("plan: --current %q: %w", s, err)
		}
		a, rest = alg, limits
	}
	var ls []limiters.Limit
	for part := range strings.SplitSeq(rest, ",") {
		l, err := limiters.ParseLimit(strings.TrimSpace(part))
		if err != nil {
			return Current{}, fmt.Errorf("plan: --current %q: %w (a limit as 100/min, 10/s burst 20, several with commas; or a file: nginx.conf, a tier file)", s, err)
		}
		ls = append(ls, l)
	}
	if a == "" {
		a = limiters.SlidingLog
		if slices.ContainsFunc(ls, func(l limiters.Limit) bool { return l.Burst > 0 }) {
			a = limiters.GCRA
		}
	}
	var names []string
	for _, l := range ls {
		if err := l.Validate(a); err != nil {
			return Current{}, fmt.Errorf("plan: --current %q: %w", s, err)
		}
		names = append(names, l.String())
	}
	return Current{Name: fmt.Sprintf("%s (%s)", strings.Join(names, ", "), a), Tiers: tiers.Config{Algorithm: a, Default: "current", Tiers: map[string][]limiters.Limit{"current": ls}}}, nil
}

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

// parseNginx reads the limit_req lines of an nginx configuration, and the
// zones and maps they use. Every limit_req line is taken to apply to
// every request (a location's own lines are not told apart); a zone
// applies to a key whose key variable is not empty, through the maps
// the file has (literal keys only), as nginx counts no request with an
// empty key. A limit_req admits its burst and one more at once, and
// refuses the same requests with or without nodelay or delay= (which
// only say whether it waits): a bucket of the zone's rate and burst+1.
func parseNginx(text []byte, name string, key accesslog.KeySpec) (Current, error) {
	zones := map[string]nginxZone{}
	maps_ := map[string]*nginxMap{}
	var uses []string // zone names, in limit_req's order
	var bursts []int
	var cur *nginxMap
	for i, raw := range strings.Split(string(text), "\n") {
		line := i + 1
		if c := strings.IndexByte(raw, '#'); c >= 0 {
			raw = raw[:c]
		}
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		fields := strings.Fields(strings.TrimSuffix(strings.TrimSuffix(raw, "{"), ";"))
		switch {
		case cur != nil && raw == "}":
			cur = nil
		case cur != nil:
			if len(fields) != 2 {
				return Current{}, fmt.Errorf("plan: --current %s:%d: a map entry of a key and a value, as \"key\" value;", name, line)
			}
			k, v := unquote(fields[0]), unquote(fields[1])
			switch {
			case fields[0] == "default":
				cur.def, cur.hasDef = v, true
			case strings.HasPrefix(fields[0], "~"):
				cur.regexps = true
			default:
				cur.values[k] = v
			}
		case fields[0] == "map" && len(fields) == 3 && strings.HasSuffix(raw, "{"):
			cur = &nginxMap{from: fields[1], values: map[string]string{}}
			maps_[fields[2]] = cur
		case fields[0] == "limit_req_zone":
			var z nginxZone
			var zone string
			z.line = line
			for _, f := range fields[1:] {
				switch {
				case strings.HasPrefix(f, "zone="):
					zone, _, _ = strings.Cut(strings.TrimPrefix(f, "zone="), ":")
				case strings.HasPrefix(f, "rate="):
					m := nginxRate.FindStringSubmatch(f)
					if m == nil {
						return Current{}, fmt.Errorf("plan: --current %s:%d: %s: want rate=Nr/s or rate=Nr/m", name, line, f)
					}
					n, _ := strconv.Atoi(m[1])
					z.limit = limiters.Limit{N: n, Per: map[string]time.Duration{"s": time.Second, "m": time.Minute}[m[2]]}
				case z.key == "":
					z.key = f
				}
			}
			if zone == "" || z.limit.N == 0 || z.key == "" {
				return Current{}, fmt.Errorf("plan: --current %s:%d: limit_req_zone wants a key, zone=NAME:SIZE and rate=", name, line)
			}
			zones[zone] = z
		case fields[0] == "limit_req":
			zone, burst := "", 0
			for _, f := range fields[1:] {
				switch {
				case strings.HasPrefix(f, "zone="):
					zone = strings.TrimPrefix(f, "zone=")
				case strings.HasPrefix(f, "burst="):
					b, err := strconv.Atoi(strings.TrimPrefix(f, "burst="))
					if err != nil || b < 0 {
						return Current{}, fmt.Errorf("plan: --current %s:%d: %s: want a whole burst", name, line, f)
					}
					burst = b
				}
			}
			if zone == "" {
				return Current{}, fmt.Errorf("plan: --current %s:%d: limit_req names no zone", name, line)
			}
			uses, bursts = append(uses, zone), append(bursts, burst)
		}
	}
	if len(uses) == 0 {
		return Current{}, fmt.Errorf("plan: --current %s: no limit_req line", name)
	}
	c := Current{Tiers: tiers.Config{Algorithm: limiters.GCRA, Tiers: map[string][]limiters.Limit{}}}
	var said []string
	limits := make([]limiters.Limit, len(uses))
	for i, zone := range uses {
		z, ok := zones[zone]
		if !ok {
			return Current{}, fmt.Errorf("plan: --current %s: limit_req zone=%s, but no limit_req_zone names it", name, zone)
		}
		limits[i] = limiters.Limit{N: z.limit.N, Per: z.limit.Per, Burst: bursts[i] + 1}
		said = append(said, fmt.Sprintf("%s rate=%dr/%s burst=%d", zone, z.limit.N, map[time.Duration]string{time.Second: "s", time.Minute: "m"}[z.limit.Per], bursts[i]))
	}
	c.Name = name + ": " + strings.Join(said, "; ")
	// Each key's zones: a tier of the zones whose key is not empty for it.
	mine := map[string]bool{"$binary_remote_addr": key.Field == "", "$remote_addr": key.Field == "", "$" + key.Field: key.Field != ""}
	var value func(v, k string, depth int) (string, bool)
	value = func(v, k string, depth int) (string, bool) {
		if !strings.HasPrefix(v, "$") {
			return v, true
		}
		if m, ok := maps_[v]; ok && depth < 8 {
			from, ok := value(m.from, k, depth+1)
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
			return value(out, k, depth+1)
		}
		return k, mine[v]
	}
	for _, zone := range slices.Compact(slices.Sorted(slices.Values(uses))) {
		v := zones[zone].key
		if _, ok := value(v, "probe", 0); !ok {
			c.Notes = append(c.Notes, fmt.Sprintf("the zone %s is keyed by %s, taken here for the plan's key (%s)", zone, v, key))
		}
	}
	for _, m := range maps_ {
		if m.regexps {
			c.Notes = append(c.Notes, "a map's regular expressions are not followed (its literal keys and default are)")
			break
		}
	}
	c.tierOf = func(k string) string {
		var in []string
		for _, zone := range uses {
			if v, _ := value(zones[zone].key, k, 0); v != "" {
				in = append(in, zone)
			}
		}
		return strings.Join(slices.Compact(in), "+")
	}
	for mask := range 1 << len(uses) {
		var in []string
		var ls []limiters.Limit
		for i, zone := range uses {
			if mask&(1<<i) != 0 && !slices.Contains(in, zone) {
				in = append(in, zone)
				// Two zones of one bucket on one key keep the same state:
				// one of them decides as both do.
				if !slices.Contains(ls, limits[i]) {
					ls = append(ls, limits[i])
				}
			}
		}
		if len(ls) > 0 {
			c.Tiers.Tiers[strings.Join(in, "+")] = ls
		}
	}
	c.Tiers.Default = strings.Join(slices.Compact(slices.Clone(uses)), "+")
	return c, nil
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return strings.Trim(s, "'")
}

// CurrentResult is what the limit run today refuses of the log: keys and
// requests, and of each class (Plan.Classes, then the keys that look
// like many users) how many keys.
type CurrentResult struct {
	Name             string
	Notes            []string
	Clients, Refused int64
	// ByClass are the keys refused of each class, in Plan.Classes' order;
	// Shared of the keys that look like many users.
	ByClass []int
	Shared  int
	// Caught are the first keys it refuses, the most refused first.
	Caught []string
	// Nodes, where the log is a fleet's, is how many; NodeClients and
	// NodeRefused what the limit refuses kept on each node apart (the
	// counts above are of one limit the fleet shares).
	Nodes                    int
	NodeClients, NodeRefused int64
}

// decideCurrent decides the log's requests with the limit run today:
// each key's across the log's sources, as one limit the fleet shares
// counts them; and, where the log is a fleet's (several sources), on each
// node apart too, as a limit each node keeps (nginx on each host)
// counts them.
func (p *Plan) decideCurrent(cs *clients, decided kept, users []int32) error {
	cur := p.Config.Current
	keys := cs.keys()
	r := CurrentResult{Name: cur.Name, Notes: cur.Notes}
	refused, err := refusedToday(cur, keys, decided, nil)
	if err != nil {
		return err
	}
	r.count(p, refused, users, keys)
	if node := p.nodeOf(decided); node != nil {
		perNode, err := refusedToday(cur, keys, decided, node)
		if err != nil {
			return err
		}
		each := CurrentResult{}
		each.count(p, perNode, users, keys)
		r.Nodes, r.NodeClients, r.NodeRefused = len(p.Sources), each.Clients, each.Refused
	}
	p.Current = &r
	return nil
}

// nodeOf is each input's source (a node of the fleet) by index, where the
// log has several and each request's input was kept; nil otherwise.
func (p *Plan) nodeOf(decided kept) []int {
	if len(p.Sources) < 2 || len(decided.inputs) == 0 {
		return nil
	}
	var node []int
	for s, src := range p.Sources {
		for _, in := range src.Inputs {
			if in >= maxInputs {
				return nil // more inputs than a request's tells apart
			}
			for len(node) <= in {
				node = append(node, -1)
			}
			node[in] = s
		}
	}
	return node
}

// refusedToday is how many requests of each key (by number) the limit
// run today refuses: over all of them (node nil), or on each node apart
// (node: each input's), each node's limiter its own.
func refusedToday(cur *Current, keys []string, decided kept, node []int) ([]int64, error) {
	t := cur.Tiers
	exempt := make([]bool, len(keys))
	if cur.tierOf != nil {
		t.Users = map[string]string{}
		for id, k := range keys {
			switch tier := cur.tierOf(k); tier {
			case "":
				exempt[id] = true
			case t.Default:
			default:
				t.Users[k] = tier
			}
		}
	}
	nodes := 1
	for _, n := range node {
		nodes = max(nodes, n+1)
	}
	ls := make([]limiters.Limiter, nodes)
	for i := range ls {
		l, err := tiers.New(t, limiters.WithSweepInterval(-1))
		if err != nil {
			return nil, fmt.Errorf("plan: --current %s: %w", cur.Name, err)
		}
		defer l.Close()
		ls[i] = l
	}
	refused := make([]int64, len(keys))
	in := make([]bool, len(exempt))
	for id, e := range exempt {
		in[id] = !e
	}
	decided.each(in, func(q keptRequest) {
		l := ls[0]
		if node != nil && q.input >= 0 && q.input < len(node) && node[q.input] >= 0 {
			l = ls[node[q.input]]
		}
		// An error is a cost above the limit: refused, as replay says.
		if d, err := l.Decide(context.Background(), limiters.Request{Key: keys[q.id], N: int(q.n), At: time.Unix(0, q.at)}); err != nil || !d.Allowed {
			refused[q.id]++
		}
	})
	return refused, nil
}

// count fills r from the requests the limit refused of each key: the
// keys and requests, by class (the pollers' too), of the keys that look
// like many users, and the first few.
func (r *CurrentResult) count(p *Plan, refused []int64, users []int32, keys []string) {
	classOf := p.classIndex()
	inUsers := make([]bool, len(keys))
	for _, id := range users {
		inUsers[id] = true
	}
	r.ByClass = make([]int, len(p.Classes))
	var hit []int
	for id, n := range refused {
		if n == 0 {
			continue
		}
		r.Clients++
		r.Refused += n
		hit = append(hit, id)
		if c, ok := classOf[int32(id)]; ok {
			r.ByClass[c]++
		} else if !inUsers[id] {
			r.Shared++
		}
	}
	slices.SortFunc(hit, func(x, y int) int { return cmp.Or(cmp.Compare(refused[y], refused[x]), cmp.Compare(x, y)) })
	for _, id := range hit[:min(len(hit), 5)] {
		r.Caught = append(r.Caught, keys[id])
	}
}

// classIndex maps each key the classes hold to its class's index.
func (p *Plan) classIndex() map[int32]int {
	out := make(map[int32]int)
	for i, c := range p.Classes {
		for _, id := range c.ids {
			out[id] = i
		}
	}
	return out
}

// currentWords says what the limit run today refuses, by class: "150 of
// the 150 batches of about 290; 4 of the 4 refused".
func (r *CurrentResult) byClassWords(classes []Class) string {
	var parts []string
	refusedKeys := 0
	for i, n := range r.ByClass {
		c := classes[i]
		switch {
		case c.Refused && n > 0:
			refusedKeys += n
		case n > 0:
			parts = append(parts, fmt.Sprintf("%s of the %s %s", results.Count(int64(n)), results.Count(int64(c.Keys)), c.Shape()))
		}
	}
	if refusedKeys > 0 {
		parts = append(parts, fmt.Sprintf("%d of the %d the policy refuses", refusedKeys, countRefused(classes)))
	}
	if r.Shared > 0 {
		parts = append(parts, fmt.Sprintf("%s that look like many users", plural(int64(r.Shared), "key")))
	}
	return strings.Join(parts, "; ")
}

func countRefused(classes []Class) int {
	n := 0
	for _, c := range classes {
		if c.Refused {
			n += c.Keys
		}
	}
	return n
}

// nodesWords says what the limit run today refuses where the log is a
// fleet's: counted across its nodes (a limit the fleet shares, as a
// gateway's in Redis), or on each node apart (nginx on each host), which
// lets a key through up to as many times as it has nodes.
func (r *CurrentResult) nodesWords() string {
	if r.NodeClients == r.Clients && r.NodeRefused == r.Refused {
		return fmt.Sprintf("Counted across the %d nodes or on each apart, the same.", r.Nodes)
	}
	return fmt.Sprintf("That counts each key across the %d nodes, as a limit the fleet shares does; kept on each node apart (nginx on each host), it refuses %s and %s requests.",
		r.Nodes, plural(r.NodeClients, "key"), results.Count(r.NodeRefused))
}
