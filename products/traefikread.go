package products

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Recognizes a dynamic configuration with a rateLimit middleware.
func (Traefik) Recognizes(text []byte) bool {
	return bytes.Contains(text, []byte("rateLimit:")) && bytes.Contains(text, []byte("average"))
}

// traefikFile is the part of a dynamic configuration (YAML) the reader
// takes: the routers, and the middlewares' rateLimit, each with its line.
type traefikFile struct {
	HTTP struct {
		Routers     map[string]traefikRouter `yaml:"routers"`
		Middlewares map[string]yaml.Node     `yaml:"middlewares"`
	} `yaml:"http"`
}

type traefikRouter struct {
	Rule        string   `yaml:"rule"`
	Priority    int      `yaml:"priority"`
	Middlewares []string `yaml:"middlewares"`
}

type traefikRateLimit struct {
	RateLimit *struct {
		Average         int64     `yaml:"average"`
		Period          yaml.Node `yaml:"period"`
		Burst           *int64    `yaml:"burst"`
		SourceCriterion struct {
			RequestHeaderName string     `yaml:"requestHeaderName"`
			RequestHost       bool       `yaml:"requestHost"`
			IPStrategy        *yaml.Node `yaml:"ipStrategy"`
		} `yaml:"sourceCriterion"`
	} `yaml:"rateLimit"`
}

var traefikMatcher = regexp.MustCompile("(Header|Headers|ClientIP)\\(`([^`]*)`(?:,\\s*`([^`]*)`)?\\)")

// Read reads a dynamic configuration's routers and their rateLimit
// middlewares: the router with none of the key's matchers is every key's
// (the lowest priority, if several), each router that matches keys by
// Header or ClientIP a tier of them. A middleware keyed otherwise than
// the plan (another header, the host) is said in the notes.
func (t Traefik) Read(text []byte, name string, key accesslog.KeySpec) (Read, error) {
	var f traefikFile
	if err := yaml.Unmarshal(text, &f); err != nil {
		return Read{}, errorf(t, name, 0, "%v", err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range f.HTTP.Routers {
			if !yield(n) {
				return
			}
		}
	})
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(f.HTTP.Routers[a].Priority, f.HTTP.Routers[b].Priority)
	})
	r := Read{Name: name}
	var notes []string
	found := false
	for _, rn := range names {
		router := f.HTTP.Routers[rn]
		var rules []Rule
		for _, mw := range router.Middlewares {
			node, ok := f.HTTP.Middlewares[strings.TrimSuffix(mw, "@file")]
			if !ok {
				continue
			}
			rule, note, err := t.middleware(&node, mw, name, key)
			if err != nil {
				return Read{}, err
			}
			if rule != nil {
				rules = append(rules, *rule)
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
		if len(rules) == 0 {
			continue
		}
		found = true
		keys := traefikKeys(router.Rule)
		if len(keys) == 0 {
			if r.Rules == nil {
				r.Rules = rules
			}
			continue
		}
		r.Tiers = append(r.Tiers, Tier{Name: rn, Keys: keys, Rules: rules})
	}
	if !found {
		return Read{}, errorf(t, name, 0, "no router passes a rateLimit middleware")
	}
	var says []string
	for _, rule := range r.Rules {
		says = append(says, rule.String())
	}
	r.Name = name + ": " + strings.Join(says, "; ")
	r.Notes = slices.Compact(notes)
	return r, nil
}

// middleware reads one middleware's rateLimit (nil for another kind).
func (t Traefik) middleware(node *yaml.Node, mw, name string, key accesslog.KeySpec) (*TraefikRule, string, error) {
	var m traefikRateLimit
	if err := node.Decode(&m); err != nil {
		return nil, "", errorf(t, name, node.Line, "%s: %v", mw, err)
	}
	rl := m.RateLimit
	if rl == nil {
		return nil, "", nil
	}
	period := time.Second
	if p := rl.Period; p.Value != "" {
		d, err := traefikPeriod(p.Value)
		if err != nil {
			return nil, "", errorf(t, name, p.Line, "%s: period %q: want a duration (10s, 1m) or whole seconds", mw, p.Value)
		}
		period = d
	}
	burst := int64(1)
	if rl.Burst != nil {
		burst = max(*rl.Burst, 1)
	}
	if rl.Average < 0 || period < 0 {
		return nil, "", errorf(t, name, node.Line, "%s: average %d per %s: want neither below 0", mw, rl.Average, period)
	}
	if rl.Average == 0 {
		return nil, fmt.Sprintf("%s: average 0 is no limit, passed over", mw), nil
	}
	note := ""
	switch sc := rl.SourceCriterion; {
	case sc.RequestHost:
		note = fmt.Sprintf("%s keys on the request's host, not the plan's %s: read as if it were", mw, key)
	case sc.RequestHeaderName != "" && !strings.EqualFold(sc.RequestHeaderName, key.Header):
		note = fmt.Sprintf("%s keys on the header %s, not the plan's %s: read as if it were", mw, sc.RequestHeaderName, key)
	case sc.RequestHeaderName == "" && key.Header != "":
		note = fmt.Sprintf("%s keys on the client's address, not the plan's %s: read as if it were", mw, key)
	}
	return &TraefikRule{Average: rl.Average, Period: period, Burst: burst}, note, nil
}

// traefikPeriod reads a period as Traefik does: a Go duration, or whole
// seconds.
func traefikPeriod(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

// traefikKeys are the keys a router's rule matches by Header or
// ClientIP.
func traefikKeys(rule string) []string {
	var keys []string
	for _, m := range traefikMatcher.FindAllStringSubmatch(rule, -1) {
		if m[1] == "ClientIP" {
			keys = append(keys, m[2])
		} else if m[3] != "" {
			keys = append(keys, m[3])
		}
	}
	return keys
}
