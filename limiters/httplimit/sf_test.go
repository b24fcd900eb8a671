package httplimit_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters/httplimit"
)

// A strict reader of the RFC 9651 structured fields the draft uses: a List
// of Items, each a bare String, Integer or Token with parameters, so that
// the tests read the headers back the way a client would, not the way the
// middleware writes them.

type sfItem struct {
	value  any // string (a String), int64, or sfToken
	params map[string]any
	keys   []string // params in order
}

type sfToken string

type sfParser struct {
	s string
	i int
}

func (p *sfParser) fail(format string, args ...any) error {
	return fmt.Errorf("at %d of %q: %s", p.i, p.s, fmt.Sprintf(format, args...))
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) skip(set string) {
	for p.i < len(p.s) && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

// parseList parses a List field value (RFC 9651, section 4.2.1).
func parseList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skip(" ")
	var out []sfItem
	for p.i < len(p.s) {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skip(" \t")
		if p.i == len(p.s) {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.fail("want , between members")
		}
		p.i++
		p.skip(" \t")
		if p.i == len(p.s) {
			return nil, p.fail("trailing comma")
		}
	}
	return out, nil
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{value: v, params: map[string]any{}}
	for p.peek() == ';' {
		p.i++
		p.skip(" ")
		k, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var pv any = true
		if p.peek() == '=' {
			p.i++
			if pv, err = p.bare(); err != nil {
				return sfItem{}, err
			}
		}
		if _, dup := it.params[k]; !dup {
			it.keys = append(it.keys, k)
		}
		it.params[k] = pv
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		return "", p.fail("a key starts with a-z or *")
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0) {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (any, error) {
	switch c := p.peek(); {
	case c == '"':
		return p.str()
	case c == '-' || c >= '0' && c <= '9':
		return p.integer()
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.i
		for p.i < len(p.s) && (strings.IndexByte(":/!#$%&'*+-.^_`|~", p.s[p.i]) >= 0 ||
			p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z') {
			p.i++
		}
		return sfToken(p.s[start:p.i]), nil
	}
	return nil, p.fail("not a String, Integer or Token")
}

func (p *sfParser) str() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i == len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return "", p.fail("a backslash escapes only \" and \\")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.fail("byte %#x in a String", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.fail("unterminated String")
}

func (p *sfParser) integer() (int64, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || p.i-digits > 15 {
		return 0, p.fail("an Integer has 1 to 15 digits")
	}
	if p.peek() == '.' {
		return 0, p.fail("a Decimal, not an Integer")
	}
	return strconv.ParseInt(p.s[start:p.i], 10, 64)
}

// draftItem is one RateLimit-Policy or RateLimit item, checked to be a
// named item of Integer parameters, as the draft defines both.
type draftItem struct {
	name   string
	params map[string]int64
}

// parseDraft reads a RateLimit-Policy or RateLimit value and checks the
// draft's rules for it: names are Strings, every known parameter is a
// non-negative Integer, the required one (q or r) is there, and w is not
// zero.
func parseDraft(field, v string) ([]draftItem, error) {
	items, err := parseList(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: an empty list", field)
	}
	required := "r"
	if field == httplimit.HeaderRateLimitPolicy {
		required = "q"
	}
	var out []draftItem
	for _, it := range items {
		name, ok := it.value.(string)
		if !ok {
			return nil, fmt.Errorf("%s: item %v is not a String", field, it.value)
		}
		d := draftItem{name: name, params: map[string]int64{}}
		for _, k := range it.keys {
			n, ok := it.params[k].(int64)
			if !ok || n < 0 {
				return nil, fmt.Errorf("%s: %q;%s=%v is not a non-negative Integer", field, name, k, it.params[k])
			}
			if k == "w" && n == 0 {
				return nil, fmt.Errorf("%s: %q;w=0: a window is not zero", field, name)
			}
			d.params[k] = n
		}
		if _, ok := d.params[required]; !ok {
			return nil, fmt.Errorf("%s: %q has no %s", field, name, required)
		}
		out = append(out, d)
	}
	return out, nil
}
