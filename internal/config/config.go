// Package config reads ratelab's configuration file: which algorithm and
// backend, the tiers and their limits, which users are in which tier, and
// per-user overrides. It is YAML:
//
//	algorithm: sliding-counter   # one of the six
//	backend: memory              # memory (the default) or redis
//	default_tier: free           # the tier of every user not listed
//	tiers:
//	  free: [10/s, 1000/day]     # limits, all enforced at once
//	  premium:
//	    - 100/s burst 200        # a burst, for a bucket algorithm
//	    - {rate: 100000/day, name: daily}
//	users:
//	  alice: premium
//	overrides:
//	  carol: [5/s]               # carol's own limits, in place of a tier
//
// A limit is a rate as limiters.ParseLimit reads it, or a mapping with a
// rate and a name (the name headers and decisions give it; by default the
// rate as written). Errors name the file, the line and the field, and say
// what was expected; a field this package does not know is an error, not
// ignored, with the nearest known name suggested.
//
// The limiters themselves (package limiters/tiers) do not read files:
// this package turns a file into their tiers.Config.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Backends are the backends a configuration may name.
var Backends = []string{"memory", "redis"}

// Config is a configuration file, read.
type Config struct {
	// Path is the file it was read from ("" for Parse's input).
	Path string
	// Backend keeps the limits: "memory" (the default).
	Backend string
	// Tiers is the algorithm, tiers, users and overrides.
	Tiers tiers.Config
}

// Error is a mistake in a configuration file, where it is.
type Error struct {
	Path  string
	Line  int
	Field string // the path to the field: tiers.free[1]
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads and checks the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	var ce *Error
	if errors.As(err, &ce) {
		ce.Path = path
	}
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Reload reads the configuration file at path into l, keeping every
// user's quota under limits that did not change (tiers.Limiter.Reload).
// When the file is unreadable or invalid, l keeps the configuration it
// has, and the error says why.
func Reload(l *tiers.Limiter, path string) (*Config, error) {
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	if err := l.Reload(c.Tiers); err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	return c, nil
}

// fields are the top-level fields, in the order the docs give them.
var fields = []string{"algorithm", "backend", "default_tier", "tiers", "users", "overrides"}

// Parse reads a configuration from data and checks it: everything New in
// package tiers would refuse is refused here, with the line.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&doc)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(err)
	}
	if len(doc.Content) == 0 {
		return nil, &Error{Err: errors.New("the file is empty: want algorithm, tiers and default_tier at least")}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Line: next.Line, Err: errors.New("a second document (after ---): a configuration is one")}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(err)
	}
	if err := plain(&doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Line: root.Line, Err: fmt.Errorf("want a mapping of %s, got %s", strings.Join(fields, ", "), kind(root))}
	}
	c := &Config{Backend: "memory"}
	t := &c.Tiers
	seen := map[string]*yaml.Node{}
	for i := 0; i < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !slices.Contains(fields, k.Value) {
			return nil, unknown(k, "", fields)
		}
		if prev, dup := seen[k.Value]; dup {
			return nil, &Error{Line: k.Line, Field: k.Value, Err: fmt.Errorf("given twice (first on line %d)", prev.Line)}
		}
		seen[k.Value] = k
		var err error
		switch k.Value {
		case "algorithm":
			var s string
			if s, err = scalar(v, "algorithm", "one of "+algorithms()); err == nil {
				if _, perr := limiters.ParseAlgorithm(s); perr != nil {
					err = &Error{Line: v.Line, Field: "algorithm", Err: fmt.Errorf("%q is not an algorithm (want one of %s)", s, algorithms())}
				}
				t.Algorithm = limiters.Algorithm(s)
			}
		case "backend":
			if c.Backend, err = scalar(v, "backend", "one of "+strings.Join(Backends, ", ")); err == nil && !slices.Contains(Backends, c.Backend) {
				err = &Error{Line: v.Line, Field: "backend", Err: fmt.Errorf("%q is not a backend this ratelab has (want one of %s)", c.Backend, strings.Join(Backends, ", "))}
			}
		case "default_tier":
			t.Default, err = scalar(v, "default_tier", "a tier's name")
		case "tiers":
			t.Tiers, err = limitsByName(v, "tiers", "tier")
		case "overrides":
			t.Overrides, err = limitsByName(v, "overrides", "user")
		case "users":
			t.Users, err = users(v)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, need := range []string{"algorithm", "tiers", "default_tier"} {
		if seen[need] == nil {
			return nil, &Error{Line: root.Line, Err: fmt.Errorf("%s is missing", need)}
		}
	}
	if err := check(c, root, seen); err != nil {
		return nil, err
	}
	return c, nil
}

// check runs what tiers.New checks, naming the line of what is wrong.
func check(c *Config, root *yaml.Node, seen map[string]*yaml.Node) error {
	t := c.Tiers
	if _, ok := t.Tiers[t.Default]; !ok {
		return &Error{Line: seen["default_tier"].Line, Field: "default_tier", Err: fmt.Errorf("%q is not one of the tiers (%s)", t.Default, tierNames(t))}
	}
	users := value(root, "users")
	for i := 0; users != nil && i < len(users.Content); i += 2 {
		u, tier := users.Content[i], users.Content[i+1]
		if _, ok := t.Tiers[tier.Value]; !ok {
			return &Error{Line: tier.Line, Field: "users." + u.Value, Err: fmt.Errorf("%q is not one of the tiers (%s)", tier.Value, tierNames(t))}
		}
	}
	for _, section := range []string{"tiers", "overrides"} {
		m := value(root, section)
		for i := 0; m != nil && i < len(m.Content); i += 2 {
			name, list := m.Content[i], m.Content[i+1]
			path := section + "." + name.Value
			limits := t.Tiers[name.Value]
			if section == "overrides" {
				limits = t.Overrides[name.Value]
			}
			// Each limit first, to name its line; then the limits
			// together (names given twice, too many).
			for j, lim := range limits {
				if err := lim.Validate(t.Algorithm); err != nil {
					line := list.Line
					if list.Kind == yaml.SequenceNode {
						line = list.Content[j].Line
					}
					return &Error{Line: line, Field: fmt.Sprintf("%s[%d]", path, j), Err: err}
				}
			}
			if err := composite.Check(t.Algorithm, limits); err != nil {
				return &Error{Line: list.Line, Field: path, Err: err}
			}
		}
	}
	return nil
}

// value returns the value of key in mapping m, nil if absent.
func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func algorithms() string {
	var names []string
	for _, a := range limiters.Algorithms() {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

func tierNames(t tiers.Config) string {
	var names []string
	for name := range t.Tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// scalar returns v's value, which must be a plain value.
func scalar(v *yaml.Node, field, want string) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Value == "" {
		return "", &Error{Line: v.Line, Field: field, Err: fmt.Errorf("want %s, got %s", want, kind(v))}
	}
	return v.Value, nil
}

// limitsByName reads a mapping of names (tiers, users) to lists of limits.
func limitsByName(v *yaml.Node, field, what string) (map[string][]limiters.Limit, error) {
	if v.Kind != yaml.MappingNode {
		return nil, &Error{Line: v.Line, Field: field, Err: fmt.Errorf("want a mapping of each %s's name to its limits, got %s", what, kind(v))}
	}
	out := map[string][]limiters.Limit{}
	for i := 0; i < len(v.Content); i += 2 {
		name, list := v.Content[i], v.Content[i+1]
		path := field + "." + name.Value
		if _, dup := out[name.Value]; dup {
			return nil, &Error{Line: name.Line, Field: path, Err: errors.New("given twice")}
		}
		if list.Kind == yaml.ScalarNode && list.Value != "" {
			list = &yaml.Node{Kind: yaml.SequenceNode, Line: list.Line, Content: []*yaml.Node{list}} // one limit, unlisted
		}
		if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
			got := kind(list)
			if list.Kind == yaml.SequenceNode {
				got = "an empty list"
			}
			return nil, &Error{Line: list.Line, Field: path, Err: fmt.Errorf("want a list of limits, as in [10/s, 1000/day], got %s", got)}
		}
		for j, item := range list.Content {
			l, err := limit(item, fmt.Sprintf("%s[%d]", path, j))
			if err != nil {
				return nil, err
			}
			out[name.Value] = append(out[name.Value], l)
		}
	}
	return out, nil
}

var limitFields = []string{"rate", "name"}

// limit reads one limit: a rate string, or a mapping of rate and name.
func limit(v *yaml.Node, path string) (limiters.Limit, error) {
	var l limiters.Limit
	rate := v
	switch v.Kind {
	case yaml.ScalarNode:
	case yaml.MappingNode:
		rate = nil
		seen := map[string]bool{}
		for i := 0; i < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			if seen[k.Value] {
				return l, &Error{Line: k.Line, Field: path + "." + k.Value, Err: errors.New("given twice")}
			}
			seen[k.Value] = true
			switch k.Value {
			case "rate":
				rate = val
			case "name":
				name, err := scalar(val, path+".name", "a name")
				if err != nil {
					return l, err
				}
				l.Name = name
			default:
				return l, unknown(k, path, limitFields)
			}
		}
		if rate == nil {
			return l, &Error{Line: v.Line, Field: path, Err: errors.New("rate is missing: want {rate: 10/s, name: NAME}")}
		}
	default:
		return l, &Error{Line: v.Line, Field: path, Err: fmt.Errorf("want a rate (10/s) or {rate: 10/s, name: NAME}, got %s", kind(v))}
	}
	s, err := scalar(rate, path, "a rate, as in 10/s")
	if err != nil {
		return l, err
	}
	r, err := limiters.ParseLimit(s)
	if err != nil {
		return l, &Error{Line: rate.Line, Field: path, Err: err}
	}
	r.Name = l.Name
	return r, nil
}

// users reads the mapping of users to tiers.
func users(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, &Error{Line: v.Line, Field: "users", Err: fmt.Errorf("want a mapping of each user to a tier, as in alice: premium, got %s", kind(v))}
	}
	out := map[string]string{}
	for i := 0; i < len(v.Content); i += 2 {
		u, tier := v.Content[i], v.Content[i+1]
		if _, dup := out[u.Value]; dup {
			return nil, &Error{Line: u.Line, Field: "users." + u.Value, Err: errors.New("given twice")}
		}
		name, err := scalar(tier, "users."+u.Value, "a tier's name")
		if err != nil {
			return nil, err
		}
		out[u.Value] = name
	}
	return out, nil
}

// unknown is the error for field k, which is not one of known.
func unknown(k *yaml.Node, parent string, known []string) error {
	field := k.Value
	if parent != "" {
		field = parent + "." + k.Value
	}
	msg := fmt.Sprintf("unknown field (want one of %s)", strings.Join(known, ", "))
	if near := nearest(k.Value, known); near != "" {
		msg = fmt.Sprintf("unknown field: did you mean %s? (want one of %s)", near, strings.Join(known, ", "))
	}
	return &Error{Line: k.Line, Field: field, Err: errors.New(msg)}
}

// nearest returns the known name within two edits of s, if one is.
func nearest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func kind(v *yaml.Node) string {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Value == "" {
			return "nothing"
		}
		return fmt.Sprintf("%q", v.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// syntaxError turns a YAML parser's error into an Error with its line.
// The parser's "did not find expected ..." errors give the line, counted
// from 0, where the list or mapping it could not close begins; the
// scanner's errors give the line of the fault, counted from 1.
func syntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
		if strings.HasPrefix(msg, "did not find expected") {
			line++
			msg += " in the list or mapping that begins here"
		}
	}
	return &Error{Line: line, Err: fmt.Errorf("not YAML: %s", msg)}
}

// plain reports, as an *Error, the first anchor, alias or key that is not
// a plain name under v: a configuration is read as written, and "*a" or a
// key that is a list would be read as something else.
func plain(v *yaml.Node) error {
	if v.Kind == yaml.AliasNode || v.Anchor != "" {
		return &Error{Line: v.Line, Err: errors.New("anchors and aliases (& and *) are not supported: write the value out")}
	}
	for i, c := range v.Content {
		if v.Kind == yaml.MappingNode && i%2 == 0 && (c.Kind != yaml.ScalarNode || c.Value == "") {
			return &Error{Line: c.Line, Err: fmt.Errorf("a key must be a plain name, got %s", kind(c))}
		}
		if err := plain(c); err != nil {
			return err
		}
	}
	return nil
}
