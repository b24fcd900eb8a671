package plan

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Current is the limit a user runs today, to decide the log with beside
// the policy suggested: whom it refuses, of which class ("your limit
// today refuses 150 integrations"). It is read from ratelab's own words
// (a limit, "100/min" or "gcra 10/s burst 20", several with commas; a
// tier file), from nginx's limit_req_zone and limit_req lines, or from a
// product's configuration (a haproxy.cfg's stick tables and denies).
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
	// product, if set, is the product whose configuration was read (a
	// haproxy.cfg), and read its rules: the log is replayed through the
	// product's own model, not through Tiers.
	product products.Product
	read    products.Read
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
	if prod := products.Of(file); prod != nil {
		r, err := prod.Read(file, name, key)
		if err != nil {
			return Current{}, fmt.Errorf("plan: --current: %w", err)
		}
		return Current{Name: r.Name, Notes: r.Notes, product: prod, read: r}, nil
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
	if cur.product != nil {
		return refusedByProduct(cur, keys, decided, node), nil
	}
	t := cur.Tiers
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
	in := make([]bool, len(keys))
	for id := range in {
		in[id] = true
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

// refusedByProduct is refusedToday of a product's configuration: each
// key's requests replayed through the product's model of the rules the
// configuration gives it, on each node apart where node is set.
func refusedByProduct(cur *Current, keys []string, decided kept, node []int) []int64 {
	type nodeKey struct {
		node int
		id   int32
	}
	state := map[nodeKey]products.Key{}
	refused := make([]int64, len(keys))
	all := make([]bool, len(keys))
	for id := range all {
		all[id] = true
	}
	decided.each(all, func(q keptRequest) {
		k := nodeKey{id: q.id}
		if node != nil && q.input >= 0 && q.input < len(node) {
			k.node = node[q.input]
		}
		s, ok := state[k]
		if !ok {
			s = cur.product.NewKey(cur.read.RulesOf(keys[q.id]))
			state[k] = s
		}
		if !s.Decide(q.at).Admitted {
			refused[q.id]++
		}
	})
	return refused
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
