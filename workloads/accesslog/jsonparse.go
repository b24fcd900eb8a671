package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// jsonParser reads JSON lines: one object a line, its fields found by
// name (a.b for a nested one).
type jsonParser struct {
	key                                       KeySpec
	time, keyNames, cost, status, agent, path []string // each field, or the fields it may be, in turn
	scan                                      *jsonScanner
	lastTime                                  []byte
	lastAt                                    int64
	keyBuf                                    []byte
	// given are the fields the options named (--status, --agent, --path),
	// and whether a line read had each.
	given []givenField
}

// givenField is a field an option named: the option, the field, and
// whether any line read had it.
type givenField struct {
	flag, field string
	names       *[]string
	seen        bool
}

func newJSONParser(o Options, pr preset) *jsonParser {
	p := &jsonParser{key: o.Key,
		time:     orNames(pr.time, []string{"time", "timestamp", "ts", "@timestamp"}),
		keyNames: orNames(pr.addr, []string{"remote_addr", "client_ip", "ip"}),
		status:   orNames(pr.status, []string{"status", "status_code"}),
		agent:    orNames(pr.agent, []string{"user_agent", "http_user_agent", "userAgent"}),
		path:     orNames(pr.path, []string{"path", "request_uri", "uri", "request"}),
	}
	for _, f := range []struct {
		given string
		into  *[]string
	}{{o.Time, &p.time}, {o.Cost, &p.cost}, {o.Status, &p.status}, {o.Agent, &p.agent}, {o.Path, &p.path}} {
		if f.given != "" {
			*f.into = []string{strings.TrimPrefix(strings.TrimPrefix(f.given, "field:"), ".")}
		}
	}
	for _, f := range []struct {
		flag, given string
		names       *[]string
	}{{"--status", o.Status, &p.status}, {"--agent", o.Agent, &p.agent}, {"--path", o.Path, &p.path}} {
		if f.given != "" {
			p.given = append(p.given, givenField{flag: f.flag, field: f.given, names: f.names})
		}
	}
	switch {
	case o.Key.Header != "" && pr.headers != nil:
		p.keyNames = pr.headers(o.Key.Header)
	case o.Key.Header != "":
		p.keyNames = headerFields(o.Key.Header)
	case o.Key.Field != "":
		p.keyNames = []string{o.Key.Field}
	}
	p.scan = newJSONScanner(slices.Concat(p.time, p.keyNames, p.cost, p.status, p.agent, p.path))
	return p
}

// unseen says each field an option named that no line read had.
func (p *jsonParser) unseen() []string {
	var out []string
	for _, f := range p.given {
		if !f.seen {
			out = append(out, fmt.Sprintf("%s %s: no line read has the field", f.flag, f.field))
		}
	}
	return out
}

func (p *jsonParser) parse(line []byte, e *Entry) error {
	if err := p.scan.scan(line); err != nil {
		return err
	}
	tv, tname := p.scan.get(p.time)
	if !tv.set {
		return fmt.Errorf("no time (the field %s)", strings.Join(p.time, ", "))
	}
	at, err := p.timeOf(tv)
	if err != nil {
		return fmt.Errorf("%s: %w", tname, err)
	}
	e.At = at
	kv, kname := p.scan.get(p.keyNames)
	if forwardedFor(kname) {
		kv.text = lastAddress(kv.text)
	}
	if p.key.Field == "" {
		kv.text = addrOnly(kv.text)
	}
	pv, pname := p.scan.get(p.path)
	path := pathOf(pv.text, pname == "request")
	if len(kv.text) == 0 || string(kv.text) == "-" {
		return noKey{fmt.Sprintf("no key (the field %s)", strings.Join(p.keyNames, ", ")), path}
	}
	e.Path = hashOf(path)
	if p.key.PathSegments > 0 && !pv.set {
		return errors.New("no path (the field path, request_uri, uri or request), which --key +path: needs")
	}
	e.Key = p.key.of(&p.keyBuf, kv.text, path)
	e.N, e.Status = 1, 0
	if p.cost != nil {
		cv, _ := p.scan.get(p.cost)
		if !cv.set {
			return fmt.Errorf("no cost (the field %s)", p.cost[0])
		}
		if e.N, err = cost(cv.text); err != nil {
			return err
		}
	}
	if sv, _ := p.scan.get(p.status); sv.set {
		if e.Status, err = httpStatus(sv.text); err != nil {
			return err
		}
	}
	av, _ := p.scan.get(p.agent)
	e.Agent = hashOf(av.text)
	for i := range p.given {
		if f := &p.given[i]; !f.seen {
			v, _ := p.scan.get(*f.names)
			f.seen = v.set
		}
	}
	return nil
}

// httpStatus reads a status: three digits, 100 to 999.
func httpStatus(b []byte) (int, error) {
	if len(b) != 3 || b[0] < '1' || b[0] > '9' || b[1] < '0' || b[1] > '9' || b[2] < '0' || b[2] > '9' {
		return 0, fmt.Errorf("status %q is not an HTTP status", b)
	}
	return int(b[0]-'0')*100 + int(b[1]-'0')*10 + int(b[2]-'0'), nil
}

// timeOf reads a JSON time: RFC 3339, or seconds (or milliseconds) since
// 1970 as a number or a string of one.
func (p *jsonParser) timeOf(v jsonValue) (int64, error) {
	if p.lastTime != nil && bytes.Equal(v.text, p.lastTime) {
		return p.lastAt, nil
	}
	t := v.text
	var at int64
	if !v.str || len(t) > 0 && t[0] >= '0' && t[0] <= '9' && !bytes.ContainsAny(t, "T-:") {
		var err error
		if at, err = epoch(t); err != nil {
			return 0, err
		}
	} else {
		parsed, err := time.Parse(time.RFC3339Nano, string(t))
		if err != nil {
			return 0, fmt.Errorf("time %q is neither RFC 3339 nor seconds since 1970", t)
		}
		if at, err = unixNano(parsed); err != nil {
			return 0, fmt.Errorf("time %q: %w", t, err)
		}
	}
	p.lastTime, p.lastAt = append(p.lastTime[:0], t...), at
	return at, nil
}
