// Package products holds the rate limiters people run, each as a value:
// how it decides a key's requests (its model, exact where the product's
// source is, and said to be approximate where the product says its own
// counts are), the limits it can express, and its configuration written
// per key and read back. The plan writes its policy for each product and
// replays the log through each one's model; the probe checks what the
// plan wrote against the product running it.
//
// A product's decisions differ from the textbook algorithm it resembles:
// HAProxy's rate is an estimate over two periods anchored at a key's
// first request, and counts the requests it denies; nginx keeps its rate
// in thousandths on a clock of milliseconds. The same policy written into
// two products refuses different requests, which is why each is replayed
// through its own model, not through the algorithm it is named after.
package products

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A Product is a rate limiter people run.
type Product interface {
	// Name is the product's name as --emit takes it: "haproxy"; Title
	// as a sentence says it: "HAProxy".
	Name() string
	Title() string
	// File is its configuration's file name: "haproxy.cfg".
	File() string
	// Express is the nearest rule the product can keep to the limit
	// meant: a bucket (Burst its capacity) or a window of N per Per.
	Express(want limiters.Limit) (Rule, error)
	// NewKey is a fresh key's decisions under rules, all of which the
	// product keeps on every request of the key (rules of this product).
	NewKey(rules []Rule) Key
	// Write is the configuration that keeps p.
	Write(p Policy) (string, error)
	// Read reads a configuration of the product back: the rules each key
	// is decided by. name names the file in errors (name:line); key is
	// what the plan counts requests under.
	Read(text []byte, name string, key accesslog.KeySpec) (Read, error)
	// Recognizes says whether text looks like the product's
	// configuration (--current takes any product's file).
	Recognizes(text []byte) bool
}

// A Rule is one limit as a product keeps it.
type Rule interface {
	// String is the rule in the product's own words: "http_req_rate(10s)
	// gt 100".
	String() string
	// Meant is the limit it was expressed for.
	Meant() limiters.Limit
	// Changes says how the product keeps it otherwise than meant, in
	// words ("" when it keeps it as meant).
	Changes() string
	// Expect is the rule as ratelab probe --expect takes it, what the
	// probe finds of the product keeping it: "sliding-counter 20/10s".
	Expect() string
}

// Bounded is a rule that refuses no key sending at most n requests in
// any window of length within: the plan decides a rule only over the keys
// that may pass it.
type Bounded interface {
	Spares() (n int, within time.Duration)
}

// Keyed is a product that keys by some keys only (API Gateway, by API
// key): Keys says why it cannot key by key, nil where it can.
type Keyed interface {
	Keys(key accesslog.KeySpec) error
}

// Merging is a product that keeps some lists of rules as fewer (Kong has
// one limit a period): Merge is rules as the product writes them, which
// decide as rules did.
type Merging interface {
	Merge(rules []Rule) []Rule
}

// mergeNested is rules whose windows nest (a longer one counts all that
// a shorter one does: Kong's calendar, AWS WAF's trailing windows, the
// rate limit service's units up to a day) as fewer that decide alike:
// one a window, the lowest limit; none whose limit is no lower than a
// longer window's, which never refuses alone. Shortest window first.
func mergeNested[R Rule](rules []Rule, window func(R) time.Duration, limit func(R) int) []Rule {
	rs := make([]R, len(rules))
	for i, r := range rules {
		rs[i] = r.(R)
	}
	// By window, and in one window the highest limit first: read from
	// the end, the lowest of each window comes first.
	slices.SortStableFunc(rs, func(a, b R) int {
		return cmp.Or(cmp.Compare(window(a), window(b)), cmp.Compare(limit(b), limit(a)))
	})
	var out []Rule
	least := math.MaxInt
	for i := len(rs) - 1; i >= 0; i-- {
		if limit(rs[i]) < least {
			least = limit(rs[i])
			out = append(out, rs[i])
		}
	}
	slices.Reverse(out)
	return out
}

// A Key is one key's state under a product's rules.
type Key interface {
	// Decide decides the key's request at t (nanoseconds since the
	// epoch, not before the last request decided) and keeps what the
	// product keeps of it.
	Decide(t int64) Decision
}

// A Decision is what a product did with a request.
type Decision struct {
	Admitted bool
	// Banned, for a refusal, says it was refused by a ban that an
	// earlier request set (a product that bans refuses more than a limit
	// would have).
	Banned bool
	// Held, for an admission, is how long the product held the request
	// before serving it.
	Held time.Duration
}

// A Policy is what a product is asked to keep: a set of rules for every
// key, but the keys of a tier, each with rules of its own.
type Policy struct {
	// Key is how the keys are told apart: the client's address, or a
	// request header.
	Key accesslog.KeySpec
	// Notes are said first, each a paragraph of the configuration's
	// comment: what the policy is for, and what the product changes.
	Notes []string
	// Rules are every key's.
	Rules []Rule
	// Tiers are keys with rules of their own, in order.
	Tiers []Tier
	// Clients is about how many keys the product must hold at once.
	Clients int
	// Backend is where the product sends what it admits, named in one
	// place of a whole configuration: "127.0.0.1:8080".
	Backend string
	// Listen is where a whole configuration listens: "127.0.0.1:8000".
	Listen string
}

// A Tier is keys decided by rules of their own.
type Tier struct {
	Name  string
	Keys  []string
	Rules []Rule
}

// A Read is a product's configuration as read back: the rules of each
// key.
type Read struct {
	// Name says the configuration as the tables do: "haproxy.cfg:
	// http_req_rate(10s) gt 100".
	Name string
	// Rules are every key's but those of a tier.
	Rules []Rule
	// Tiers are the keys with rules of their own.
	Tiers []Tier
	// Notes say what was read otherwise than the product would.
	Notes []string
}

// RulesOf returns the rules the read configuration keeps for key.
func (r Read) RulesOf(key string) []Rule {
	for _, t := range r.Tiers {
		if slices.Contains(t.Keys, key) {
			return t.Rules
		}
	}
	return r.Rules
}

// Expect is what ratelab probe --expect takes of the configuration read:
// every key's rules as the probe finds them ("gcra 38/s burst 38,
// sliding-log 299/15min"), two at most (the probe checks a limit and a
// second, longer one).
func (r Read) Expect() (string, error) {
	switch len(r.Rules) {
	case 0:
		return "", fmt.Errorf("%s: no rule for every key to expect", r.Name)
	case 1, 2:
	default:
		return "", fmt.Errorf("%s: %d rules for every key; the probe checks two at most", r.Name, len(r.Rules))
	}
	var s []string
	for _, rule := range r.Rules {
		s = append(s, rule.Expect())
	}
	return strings.Join(s, ", "), nil
}

// addToTier gives rule to the tier of exactly keys, named name where it
// is new.
func (r *Read) addToTier(rule Rule, keys []string, name string) {
	i := slices.IndexFunc(r.Tiers, func(t Tier) bool { return slices.Equal(t.Keys, keys) })
	if i < 0 {
		i = len(r.Tiers)
		r.Tiers = append(r.Tiers, Tier{Name: name, Keys: keys})
	}
	r.Tiers[i].Rules = append(r.Tiers[i].Rules, rule)
}

// keyedTiers are the tiers of keys with rules of their own, by a
// signature (a rule's place, as Envoy's descriptors say it): each key in
// own, in order, gets its own rule of each signature in sigs, else every
// key's (rule says a rule of what is kept there, false for none:
// unlimited); keys whose rules read alike are one tier.
func keyedTiers[T any](sigs []string, every map[string]T, own map[string]map[string]T, rule func(T) (Rule, bool)) []Tier {
	var tiers []Tier
	index := map[string]int{}
	for _, k := range slices.Sorted(maps.Keys(own)) {
		var rs []Rule
		var words []string
		for _, sig := range sigs {
			v, ok := own[k][sig]
			if !ok {
				v, ok = every[sig]
			}
			if r, kept := rule(v); ok && kept {
				rs, words = append(rs, r), append(words, r.String())
			}
		}
		id := strings.Join(words, "; ")
		i, ok := index[id]
		if !ok {
			i = len(tiers)
			index[id] = i
			tiers = append(tiers, Tier{Name: fmt.Sprintf("tier %d", i+1), Rules: rs})
		}
		tiers[i].Keys = append(tiers[i].Keys, k)
	}
	return tiers
}

// A Choice is a policy chosen for a product over a log (ratelab plan
// --emit haproxy): the rules it keeps, and what the product, its log
// replayed through its model, refuses beside the policy it was chosen
// for.
type Choice struct {
	Product Product
	// Of is which of the plan's policies it keeps: "bucket", "windows",
	// or "window" (one of its own that spares every key the plan's bucket
	// spares).
	Of string
	// Rules are every key's; Scale is how far their limits were raised
	// above the plan's for the product to spare the keys the plan spares
	// (1: as the plan's).
	Rules []Rule
	Scale float64
	// Tiers are the plan's tiers (the keys that look like many users, the
	// pollers), each with its scale of the rules, raised by TierScales
	// (1: as the plan's) where the product would refuse its keys.
	Tiers      []Tier
	TierScales []float64
	// Refused and Clients are the requests and keys it refuses of the
	// keys the policy is for, replayed through the product's model;
	// Banned of the requests, those a ban refused. -1: not decided (a
	// merged plan, or one that kept too few requests).
	Refused, Clients, Banned int64
	// Caught are the first keys it refuses, the most refused first.
	// Strays are keys it refuses that the plan's policy spares, Missed
	// the keys the plan's policy refuses that it spares: how many of
	// each, and the first few.
	Caught                []string
	Strays, Missed        int
	StrayKeys, MissedKeys []string
	// Cannot, if set, says why the product cannot keep the policy at all
	// (it cannot key by the plan's key): nothing else is set.
	Cannot string
}

// All are the products ratelab writes for, in the order --emit lists
// them.
var All = []Product{HAProxy{}, Traefik{}, Caddy{}, Envoy{}, EnvoyRLS{}, Kong{}, AWSWAF{}, Cloudflare{}, CloudArmor{}, APIGateway{}}

// Parse returns the products a comma-separated list names (--emit).
// Names not of a product are returned apart, for the caller to read as
// its own ("ratelab", "nginx" while nginx is the plan's).
func Parse(list string) (ps []Product, other []string) {
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(All, func(p Product) bool { return p.Name() == name })
		if i < 0 {
			other = append(other, name)
			continue
		}
		if !slices.Contains(ps, All[i]) {
			ps = append(ps, All[i])
		}
	}
	return ps, other
}

// Of is the product whose configuration text looks like, nil for none:
// one of All, or nginx (whose policy the plan writes as its own, not by
// the search it runs for All's).
func Of(text []byte) Product {
	for _, p := range append(All[:len(All):len(All)], Nginx{}) {
		if p.Recognizes(text) {
			return p
		}
	}
	return nil
}

// Names are the products' names, comma-separated.
func Names() string {
	var s []string
	for _, p := range All {
		s = append(s, p.Name())
	}
	return strings.Join(s, ", ")
}

// errorf is an error of product p's configuration name at line n (none:
// 0).
func errorf(p Product, name string, n int, format string, args ...any) error {
	where := name
	if n > 0 {
		where = fmt.Sprintf("%s:%d", name, n)
	}
	return fmt.Errorf("%s: %s: %s", p.Name(), where, fmt.Sprintf(format, args...))
}
