package products

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes an Envoy configuration with the local rate limit filter.
func (Envoy) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("local_ratelimit.v3.LocalRateLimit"))
}

// envoyDescriptor is a descriptor as the reader takes it: its entries'
// keys and values, and its bucket.
type envoyDescriptor struct {
	keys, values []string
	rule         EnvoyRule
	line         int
}

// envoyConf is what the reader takes of a configuration: the shapes of
// the descriptors the rate_limits entries make (their keys, a
// generic_key's value fixed), the entry that is the plan's key, the
// filter's descriptors, and what it notes.
type envoyConf struct {
	shapes   []envoyShape
	keyEntry string
	ds       []envoyDescriptor
	notes    []string
}

type envoyShape struct{ keys, values []string }

// Read reads the local rate limit filter of an Envoy configuration (a
// bootstrap, or the filter's typed_config alone): its descriptors, and
// the rate_limits entries (the filter's own, or a route's) that make the
// request's. A descriptor whose key entry has no value is every key's
// bucket; one with a value is that key's, in the place of the wildcard of
// the same other entries; a tier is the keys with the same buckets. What
// Envoy would decide otherwise (the filter not enabled for every request,
// a default bucket every request takes from, fewer dynamic descriptors
// than clients) is said in the notes. Errors name the line.
func (e Envoy) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return Read{}, errorf(e, name, 0, "%v", err)
	}
	filter := findMapping(&doc, func(m *yaml.Node) bool {
		t := mapValue(m, "@type")
		return t != nil && strings.HasSuffix(t.Value, "local_ratelimit.v3.LocalRateLimit")
	})
	if filter == nil {
		return Read{}, errorf(e, name, 0, "no typed_config of envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit")
	}
	var c envoyConf
	c.readShapes(&doc, key)
	if list := mapValue(filter, "descriptors"); list != nil {
		for _, d := range list.Content {
			ed, err := e.descriptor(d, name)
			if err != nil {
				return Read{}, err
			}
			c.ds = append(c.ds, ed)
		}
	}
	if len(c.ds) == 0 {
		return Read{}, errorf(e, name, filter.Line, "the local rate limit has no descriptors: no bucket per client")
	}
	if c.keyEntry == "" {
		c.guessKey(key)
	}
	out := c.rules(name)
	out.Notes = append(c.notes, envoyFilterNotes(filter)...)
	return out, nil
}

// readShapes reads every rate_limits entry's actions: the keys of the
// descriptor each makes, and which of them is the plan's key.
func (c *envoyConf) readShapes(doc *yaml.Node, key accesslog.KeySpec) {
	for _, rl := range findAll(doc, "rate_limits") {
		for _, entry := range rl.Content {
			actions := mapValue(entry, "actions")
			if actions == nil {
				continue
			}
			var sh envoyShape
			add := func(k, v string) { sh.keys, sh.values = append(sh.keys, k), append(sh.values, v) }
			for _, a := range actions.Content {
				if len(a.Content) < 2 {
					continue
				}
				kind, body := a.Content[0].Value, a.Content[1]
				switch kind {
				case "remote_address":
					add("remote_address", "")
					if key.Header == "" && key.Field == "" {
						c.keyEntry = "remote_address"
					}
				case "request_headers":
					dk := scalar(body, "descriptor_key")
					add(dk, "")
					if want := or(key.Header, key.Field); want != "" && strings.EqualFold(scalar(body, "header_name"), want) {
						c.keyEntry = dk
					}
				case "generic_key":
					add(or(scalar(body, "descriptor_key"), "generic_key"), scalar(body, "descriptor_value"))
				default:
					c.notes = append(c.notes, fmt.Sprintf("the action %s (line %d) is not followed: a descriptor it makes is taken to match", kind, a.Line))
					add("\x00"+kind, "")
				}
			}
			c.shapes = append(c.shapes, sh)
		}
	}
}

// guessKey takes the first entry an action makes per request for the
// plan's key, where no action makes the key itself, and says so.
func (c *envoyConf) guessKey(key accesslog.KeySpec) {
	for _, sh := range c.shapes {
		for i, v := range sh.values {
			if v == "" && c.keyEntry == "" && !strings.HasPrefix(sh.keys[i], "\x00") {
				c.keyEntry = sh.keys[i]
				c.notes = append(c.notes, fmt.Sprintf("the descriptors are keyed by %s, taken here for the plan's key (%s)", c.keyEntry, key))
			}
		}
	}
}

// made says whether a rate_limits entry makes a descriptor d matches.
func (c *envoyConf) made(d envoyDescriptor) bool {
	for _, sh := range c.shapes {
		if len(sh.keys) != len(d.keys) {
			continue
		}
		ok := true
		for i := range sh.keys {
			if strings.HasPrefix(sh.keys[i], "\x00") {
				continue
			}
			if sh.keys[i] != d.keys[i] || (sh.values[i] != "" && d.values[i] != "" && sh.values[i] != d.values[i]) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// signature is d's entries with the key's value left out, the key's
// value, and whether d has the key at all.
func (c *envoyConf) signature(d envoyDescriptor) (sig, value string, keyed bool) {
	var parts []string
	for i, k := range d.keys {
		if k == c.keyEntry {
			value, keyed = d.values[i], true
			parts = append(parts, k+"=*")
			continue
		}
		parts = append(parts, k+"="+d.values[i])
	}
	return strings.Join(parts, ","), value, keyed
}

// rules are every key's buckets (the descriptors whose key entry is a
// wildcard, each by its signature) and the tiers: the keys of a
// descriptor of their own, each in the place of the wildcard of its
// signature, grouped by the buckets they end with.
func (c *envoyConf) rules(name string) Read {
	var sigs, said []string
	every := map[string]EnvoyRule{}
	own := map[string]map[string]EnvoyRule{}
	for _, d := range c.ds {
		if !c.made(d) {
			c.notes = append(c.notes, fmt.Sprintf("the descriptor at line %d matches no rate_limits entry: it never applies", d.line))
			continue
		}
		sig, value, keyed := c.signature(d)
		switch {
		case !keyed:
			c.notes = append(c.notes, fmt.Sprintf("the descriptor at line %d (%s) is one bucket every client shares, not decided here", d.line, d.rule))
			continue
		case !slices.Contains(sigs, sig):
			sigs = append(sigs, sig)
		}
		if value == "" {
			every[sig], said = d.rule, append(said, d.rule.String())
			continue
		}
		if own[value] == nil {
			own[value] = map[string]EnvoyRule{}
		}
		own[value][sig] = d.rule
	}
	out := Read{Name: name + ": " + strings.Join(said, "; ")}
	for _, sig := range sigs {
		if r, ok := every[sig]; ok {
			out.Rules = append(out.Rules, r)
		}
	}
	out.Tiers = keyedTiers(sigs, every, own, func(r EnvoyRule) (Rule, bool) { return r, true })
	return out
}

// descriptor reads one of the filter's descriptors.
func (e Envoy) descriptor(d *yaml.Node, name string) (envoyDescriptor, error) {
	ed := envoyDescriptor{line: d.Line}
	entries := mapValue(d, "entries")
	if entries == nil || len(entries.Content) == 0 {
		return ed, errorf(e, name, d.Line, "a descriptor without entries")
	}
	for _, en := range entries.Content {
		ed.keys, ed.values = append(ed.keys, scalar(en, "key")), append(ed.values, scalar(en, "value"))
	}
	tb := mapValue(d, "token_bucket")
	if tb == nil {
		return ed, errorf(e, name, d.Line, "a descriptor without a token_bucket")
	}
	r := EnvoyRule{TokensPerFill: 1}
	for _, f := range []struct {
		name string
		to   *int
	}{{"max_tokens", &r.MaxTokens}, {"tokens_per_fill", &r.TokensPerFill}} {
		if v := mapValue(tb, f.name); v != nil {
			n, err := strconv.Atoi(v.Value)
			if err != nil || n < 1 {
				return ed, errorf(e, name, v.Line, "%s: %q: want a whole number above 0", f.name, v.Value)
			}
			*f.to = n
		}
	}
	if r.MaxTokens == 0 {
		return ed, errorf(e, name, tb.Line, "token_bucket without max_tokens")
	}
	fi := mapValue(tb, "fill_interval")
	if fi == nil {
		return ed, errorf(e, name, tb.Line, "token_bucket without fill_interval")
	}
	d2, err := parseProtoDuration(fi.Value)
	if err != nil {
		return ed, errorf(e, name, fi.Line, "fill_interval: %v", err)
	}
	if d2 < minFill {
		return ed, errorf(e, name, fi.Line, "fill_interval %s: Envoy refuses one under 50ms", fi.Value)
	}
	r.FillInterval = d2
	ed.rule = r
	return ed, nil
}

// envoyFilterNotes say where the filter decides otherwise than its
// descriptors alone: not enabled or not enforced for every request, a
// default bucket (one for every client) every request takes from, fewer
// dynamic descriptors kept than a log has clients.
func envoyFilterNotes(f *yaml.Node) []string {
	var notes []string
	for _, name := range []string{"filter_enabled", "filter_enforced"} {
		v := mapValue(f, name)
		if v == nil {
			notes = append(notes, fmt.Sprintf("%s is not set: Envoy enforces nothing (its default is 0%%); decided here as if it were 100%%", name))
			continue
		}
		if dv := mapValue(v, "default_value"); dv != nil && (scalar(dv, "numerator") != "100" || or(scalar(dv, "denominator"), "HUNDRED") != "HUNDRED") {
			notes = append(notes, fmt.Sprintf("%s is %s/%s: decided here as if it were every request", name, scalar(dv, "numerator"), or(scalar(dv, "denominator"), "HUNDRED")))
		}
	}
	if tb := mapValue(f, "token_bucket"); tb != nil && scalar(f, "always_consume_default_token_bucket") != "false" {
		notes = append(notes, "the default token_bucket, one every client shares, is taken from by every request too (always_consume_default_token_bucket): not decided here")
	}
	if scalar(f, "max_dynamic_descriptors") == "" {
		notes = append(notes, "Envoy keeps the buckets of the 20 clients seen last (max_dynamic_descriptors unset); one seen less recently starts again full: decided here as if it kept every client's")
	}
	return notes
}

// parseProtoDuration reads a Duration as protobuf's JSON writes it:
// seconds with up to nine decimals and an s ("1s", "0.050s").
func parseProtoDuration(s string) (time.Duration, error) {
	n, ok := strings.CutSuffix(s, "s")
	f, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || f <= 0 {
		return 0, fmt.Errorf("%q: want seconds as protobuf writes them, as 1s or 0.050s", s)
	}
	return time.Duration(f*1e9 + 0.5), nil
}

// mapValue is the value of key in the mapping m, nil if none.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if v := mapValue(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// findMapping is the first mapping under n that match says is the one.
func findMapping(n *yaml.Node, match func(*yaml.Node) bool) *yaml.Node {
	if n.Kind == yaml.MappingNode && match(n) {
		return n
	}
	for _, c := range n.Content {
		if m := findMapping(c, match); m != nil {
			return m
		}
	}
	return nil
}

// findAll are the values of every key named key under n, in order.
func findAll(n *yaml.Node, key string) []*yaml.Node {
	var out []*yaml.Node
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				out = append(out, n.Content[i+1])
			}
		}
	}
	for _, c := range n.Content {
		out = append(out, findAll(c, key)...)
	}
	return out
}
