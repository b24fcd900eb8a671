package accesslog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// jsonValue is a scalar a JSON line holds: its text (a string's, its
// escapes undone), whether it was a string, and whether the line had it.
type jsonValue struct {
	text     []byte
	str, set bool
}

// jsonScanner reads, of a JSON object a line, the scalars of the fields
// it wants (a.b for b in the object a), skipping the rest without
// decoding it: encoding/json's map of every field cost 6µs a line.
type jsonScanner struct {
	want     map[string]int  // a field's dotted name to its index in vals
	prefixes map[string]bool // the objects a wanted field is in ("a" for a.b)
	vals     []jsonValue
	name     []byte
	strs     [][]byte // the strings whose escapes were undone, this line
}

func newJSONScanner(names []string) *jsonScanner {
	s := &jsonScanner{want: map[string]int{}, prefixes: map[string]bool{}}
	for _, n := range names {
		if _, ok := s.want[n]; ok {
			continue
		}
		s.want[n] = len(s.vals)
		s.vals = append(s.vals, jsonValue{})
		for i := range n {
			if n[i] == '.' {
				s.prefixes[n[:i]] = true
			}
		}
	}
	return s
}

// get returns the first of names the line had, and its name.
func (s *jsonScanner) get(names []string) (jsonValue, string) {
	for _, n := range names {
		if v := s.vals[s.want[n]]; v.set {
			return v, n
		}
	}
	return jsonValue{}, ""
}

var errNotObject = errors.New("not a JSON object")

// scan reads line's object.
func (s *jsonScanner) scan(line []byte) error {
	for i := range s.vals {
		s.vals[i] = jsonValue{}
	}
	s.strs = s.strs[:0]
	pos := skipSpace(line, 0)
	if pos >= len(line) || line[pos] != '{' {
		return fmt.Errorf("%w: it starts %q", errNotObject, clip(line[pos:]))
	}
	pos, err := s.object(line, pos+1, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotObject, err)
	}
	if pos = skipSpace(line, pos); pos < len(line) {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// object reads the members of an object from pos (after its brace), its
// names under the prefix s.name[:prefix]; it returns the position after
// its closing brace.
func (s *jsonScanner) object(b []byte, pos, prefix int) (int, error) {
	pos = skipSpace(b, pos)
	if pos < len(b) && b[pos] == '}' {
		return pos + 1, nil
	}
	for {
		if pos >= len(b) || b[pos] != '"' {
			return 0, fmt.Errorf("a member's name at column %d", pos+1)
		}
		key, end, err := s.str(b, pos)
		if err != nil {
			return 0, err
		}
		s.name = append(s.name[:prefix], key...)
		pos = skipSpace(b, end)
		if pos >= len(b) || b[pos] != ':' {
			return 0, fmt.Errorf("no colon at column %d", pos+1)
		}
		pos = skipSpace(b, pos+1)
		if pos >= len(b) {
			return 0, errors.New("the line ends in a member")
		}
		switch i, wanted := s.want[string(s.name)]; {
		case b[pos] == '{' && s.prefixes[string(s.name)]:
			s.name = append(s.name, '.')
			if pos, err = s.object(b, pos+1, len(s.name)); err != nil {
				return 0, err
			}
		case wanted && b[pos] == '"':
			text, end, err := s.str(b, pos)
			if err != nil {
				return 0, err
			}
			s.vals[i], pos = jsonValue{text: text, str: true, set: true}, end
		case wanted && b[pos] == '[':
			// An array (Caddy's and Envoy's headers): its first value.
			end, err := skipValue(b, pos, 0)
			if err != nil {
				return 0, err
			}
			if v, err := s.first(b, skipSpace(b, pos+1)); err != nil {
				return 0, err
			} else if v.set {
				s.vals[i] = v
			}
			pos = end
		case wanted && b[pos] != '{':
			end, err := scalar(b, pos)
			if err != nil {
				return 0, err
			}
			if lit := string(b[pos:end]); lit != "null" {
				s.vals[i] = jsonValue{text: b[pos:end], set: true}
			}
			pos = end
		default:
			if pos, err = skipValue(b, pos, 0); err != nil {
				return 0, err
			}
		}
		pos = skipSpace(b, pos)
		if pos >= len(b) {
			return 0, errors.New("the line ends in an object")
		}
		switch b[pos] {
		case ',':
			pos = skipSpace(b, pos+1)
		case '}':
			return pos + 1, nil
		default:
			return 0, fmt.Errorf("%q at column %d, where a comma or a brace goes", b[pos], pos+1)
		}
	}
}

// first reads the scalar at pos, an array's first value: not set when
// it is none (an object, an array, null, or the array's end).
func (s *jsonScanner) first(b []byte, pos int) (jsonValue, error) {
	switch {
	case pos >= len(b) || b[pos] == ']' || b[pos] == '{' || b[pos] == '[':
		return jsonValue{}, nil
	case b[pos] == '"':
		text, _, err := s.str(b, pos)
		return jsonValue{text: text, str: true, set: err == nil}, err
	}
	end, err := scalar(b, pos)
	if err != nil || string(b[pos:end]) == "null" {
		return jsonValue{}, err
	}
	return jsonValue{text: b[pos:end], set: true}, nil
}

// str reads the string at pos (its opening quote): its text, its escapes
// undone, and the position after it.
func (s *jsonScanner) str(b []byte, pos int) ([]byte, int, error) {
	escaped := false
	for i := pos + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c < 0x20:
			return nil, 0, fmt.Errorf("a control character (%#x) in a string at column %d", c, i+1)
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			if !escaped {
				return b[pos+1 : i], i + 1, nil
			}
			var v string
			if err := json.Unmarshal(b[pos:i+1], &v); err != nil {
				return nil, 0, err
			}
			s.strs = append(s.strs, []byte(v))
			return s.strs[len(s.strs)-1], i + 1, nil
		}
	}
	return nil, 0, errors.New("a string runs to the end of the line")
}

// maxDepth is how deep a skipped value may nest.
const maxDepth = 1000

// skipValue returns the position after the value at pos, which it checks
// is JSON, depth levels down.
func skipValue(b []byte, pos, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if pos >= len(b) {
		return 0, errors.New("the line ends where a value goes")
	}
	switch b[pos] {
	case '"':
		for i := pos + 1; i < len(b); i++ {
			switch c := b[i]; {
			case c < 0x20:
				return 0, fmt.Errorf("a control character (%#x) in a string at column %d", c, i+1)
			case c == '\\':
				i++
			case c == '"':
				return i + 1, nil
			}
		}
		return 0, errors.New("a string runs to the end of the line")
	case '{', '[':
		open, end := b[pos], byte('}')
		if open == '[' {
			end = ']'
		}
		pos = skipSpace(b, pos+1)
		if pos < len(b) && b[pos] == end {
			return pos + 1, nil
		}
		for {
			var err error
			if open == '{' {
				if pos >= len(b) || b[pos] != '"' {
					return 0, fmt.Errorf("a member's name at column %d", pos+1)
				}
				if pos, err = skipValue(b, pos, depth+1); err != nil {
					return 0, err
				}
				if pos = skipSpace(b, pos); pos >= len(b) || b[pos] != ':' {
					return 0, fmt.Errorf("no colon at column %d", pos+1)
				}
				pos = skipSpace(b, pos+1)
			}
			if pos, err = skipValue(b, pos, depth+1); err != nil {
				return 0, err
			}
			pos = skipSpace(b, pos)
			switch {
			case pos >= len(b):
				return 0, errors.New("the line ends in an object or array")
			case b[pos] == ',':
				pos = skipSpace(b, pos+1)
			case b[pos] == end:
				return pos + 1, nil
			default:
				return 0, fmt.Errorf("%q at column %d, where a comma or %q goes", b[pos], pos+1, end)
			}
		}
	}
	return scalar(b, pos)
}

// scalar returns the end of the number or literal (true, false, null) at
// pos, checking it is one.
func scalar(b []byte, pos int) (int, error) {
	end := scalarEnd(b, pos)
	if lit := string(b[pos:end]); lit == "true" || lit == "false" || lit == "null" || isNumber(b[pos:end]) {
		return end, nil
	}
	return 0, fmt.Errorf("%q at column %d is not a JSON value", clip(b[pos:end]), pos+1)
}

// isNumber reports whether b is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

func skipSpace(b []byte, pos int) int {
	for pos < len(b) && (b[pos] == ' ' || b[pos] == '\t' || b[pos] == '\r' || b[pos] == '\n') {
		pos++
	}
	return pos
}

// clip is the start of b, for a message.
func clip(b []byte) string {
	s := string(b[:min(len(b), 20)])
	if len(b) > 20 {
		s += "..."
	}
	return strings.TrimSpace(s)
}

// scalarEnd is the end of the number or literal at pos.
func scalarEnd(b []byte, pos int) int {
	for i := pos; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return len(b)
}
