package accesslog

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// noKey is a line of a request without the key (a health check with no
// API key): counted apart, the first named by its path.
type noKey struct {
	why  string
	path []byte
}

func (e noKey) Error() string {
	if len(e.path) == 0 {
		return e.why
	}
	return fmt.Sprintf("%s: %s", e.why, e.path)
}

// A parser reads one line into an entry: its time, key, cost, status,
// agent and path (Line and Input are the Reader's).
type parser interface {
	parse(line []byte, e *Entry) error
}

func newParser(o Options) (parser, error) {
	pr, isPreset := presets[o.Format]
	if o.Key.Header != "" && pr.noHeaders != "" {
		return nil, fmt.Errorf("accesslog: --key %s: %s: key by ip, or by a field the log has (--key field:NAME)", o.Key, pr.noHeaders)
	}
	if o.Format == JSON || isPreset && pr.format == "" {
		return newJSONParser(o, pr), nil
	}
	if isPreset {
		o.Format = pr.format
	}
	if o.Time != "" || o.Status != "" || o.Agent != "" || o.Path != "" {
		return nil, errors.New("accesslog: --time, --status, --agent and --path name a JSON log's fields; a log format's are its variables ($time_local, $status, $http_user_agent, $request)")
	}
	switch o.Format {
	case "", Combined:
		return newTemplateParser(combinedFormat, o)
	case Common:
		return newTemplateParser(commonFormat, o)
	case CSV:
		if o.Key.Field != "" || o.Key.PathSegments > 0 || o.Cost != "" {
			return nil, errors.New("accesslog: a CSV trace's key and cost are its columns: --key and --cost are for access logs")
		}
		return &csvParser{}, nil
	}
	if strings.Contains(o.Format, "$") {
		return newTemplateParser(o.Format, o)
	}
	return nil, fmt.Errorf("accesslog: format %q: want combined, common, json, csv, caddy, traefik, alb, cloudflare, gcp, or an nginx log_format string ($remote_addr [$time_local] ...)", o.Format)
}

// The ways a log format writes the time.
const (
	timeLocal   = iota // 10/Oct/2000:13:55:36 -0700
	timeISO8601        // 2000-10-10T13:55:36-07:00
	timeMsec           // 971211336.123
)

// templateParser reads lines of an nginx log_format.
type templateParser struct {
	t                                        *template
	vals                                     [][]byte
	keyAt, pathAt, timeAt, statusAt, agentAt int // the variables' indexes in t.parts; -1 if absent
	costAt                                   int
	timeKind                                 int
	key                                      KeySpec
	last                                     []byte // the last time text read, and its value: a log's
	lastAt                                   int64  // lines share a second many at a time
	keyBuf                                   []byte
	forwarded                                bool // the key is X-Forwarded-For: its last address
}

func newTemplateParser(format string, o Options) (*templateParser, error) {
	t, err := parseTemplate(format)
	if err != nil {
		return nil, fmt.Errorf("accesslog: %w", err)
	}
	p := &templateParser{t: t, vals: make([][]byte, len(t.parts)), key: o.Key, costAt: -1}
	at := func(names ...string) int {
		for _, n := range names {
			if i, ok := t.vars[n]; ok {
				return i
			}
		}
		return -1
	}
	p.timeAt, p.timeKind = at("time_local"), timeLocal
	if p.timeAt < 0 {
		p.timeAt, p.timeKind = at("time_iso8601"), timeISO8601
	}
	if p.timeAt < 0 {
		p.timeAt, p.timeKind = at("msec"), timeMsec
	}
	if p.timeAt < 0 {
		return nil, fmt.Errorf("accesslog: log format %q has no time: want $time_local, $time_iso8601 or $msec", format)
	}
	if o.Key.Field == "" {
		p.keyAt = at("remote_addr", "binary_remote_addr", "client_port")
		if p.keyAt < 0 {
			return nil, fmt.Errorf("accesslog: --key ip, but log format %q has no $remote_addr: name a field (--key field:NAME)", format)
		}
	} else if p.keyAt = at(o.Key.Field); p.keyAt < 0 {
		return nil, fmt.Errorf("accesslog: --key %s, but log format %q has no $%s", o.Key, format, o.Key.Field)
	}
	p.forwarded = forwardedFor(o.Key.Field)
	if o.Cost != "" {
		name := strings.TrimPrefix(strings.TrimPrefix(o.Cost, "field:"), ".")
		if p.costAt = at(name); p.costAt < 0 {
			return nil, fmt.Errorf("accesslog: --cost %s, but log format %q has no $%s", o.Cost, format, name)
		}
	}
	p.pathAt = at("request", "request_uri", "uri")
	if o.Key.PathSegments > 0 && p.pathAt < 0 {
		return nil, fmt.Errorf("accesslog: --key %s, but log format %q has no path: want $request, $request_uri or $uri", o.Key, format)
	}
	p.statusAt, p.agentAt = at("status"), at("http_user_agent")
	return p, nil
}

func (p *templateParser) parse(line []byte, e *Entry) error {
	if err := p.t.match(line, p.vals); err != nil {
		return err
	}
	at, err := p.time(p.vals[p.timeAt])
	if err != nil {
		return err
	}
	e.At = at
	key := p.vals[p.keyAt]
	if p.forwarded {
		key = lastAddress(key)
	}
	if p.key.Field == "" {
		key = addrOnly(key)
	}
	var path []byte
	if p.pathAt >= 0 {
		path = pathOf(p.vals[p.pathAt], p.t.parts[p.pathAt].v == "request")
		e.Path = hashOf(path)
	}
	if len(key) == 0 || len(key) == 1 && key[0] == '-' {
		return noKey{fmt.Sprintf("$%s (the key) is empty", p.t.parts[p.keyAt].v), path}
	}
	e.Key = p.key.of(&p.keyBuf, key, path)
	e.N, e.Status, e.Agent = 1, 0, 0
	if p.costAt >= 0 {
		if e.N, err = cost(p.vals[p.costAt]); err != nil {
			return err
		}
	}
	if p.statusAt >= 0 {
		if e.Status, err = httpStatus(p.vals[p.statusAt]); err != nil {
			return err
		}
	}
	if p.agentAt >= 0 {
		e.Agent = hashOf(p.vals[p.agentAt])
	}
	return nil
}

// cost reads a cost field: a whole number, 0 or more ("-", as nginx
// writes an absent one, is 0).
func cost(b []byte) (int, error) {
	if len(b) == 1 && b[0] == '-' {
		return 0, nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cost %q is not a whole number", b)
	}
	if n > limiters.MaxLimit {
		return 0, fmt.Errorf("cost %d is more than any limit (%d)", n, limiters.MaxLimit)
	}
	return n, nil
}

// time reads a logged time, in nanoseconds since 1970.
func (p *templateParser) time(b []byte) (int64, error) {
	if p.last != nil && bytes.Equal(b, p.last) {
		return p.lastAt, nil
	}
	var t time.Time
	var err error
	switch p.timeKind {
	case timeLocal:
		t, err = time.Parse("02/Jan/2006:15:04:05 -0700", string(b))
	case timeISO8601:
		t, err = time.Parse(time.RFC3339Nano, string(b))
	case timeMsec:
		at, err := epoch(b)
		if err != nil {
			return 0, err
		}
		return at, nil
	}
	if err != nil {
		return 0, fmt.Errorf("time %q: %v", b, err)
	}
	at, err := unixNano(t)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", b, err)
	}
	p.last, p.lastAt = append(p.last[:0], b...), at
	return p.lastAt, nil
}

// epoch reads a time since 1970 as nanoseconds, its unit told by its
// size: seconds below 10¹¹ (until the year 5138), milliseconds below
// 10¹⁴, microseconds below 10¹⁷, nanoseconds above. Digits are read
// exactly, and without a copy (a log to the millisecond has a new time
// every line); a number with an exponent is read as a float.
func epoch(b []byte) (int64, error) {
	bad := func() error {
		return fmt.Errorf("time %q is not seconds, milliseconds, microseconds or nanoseconds since 1970", b)
	}
	if bytes.ContainsAny(b, "eE") {
		v, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.IsNaN(v) || v < 0 {
			return 0, bad()
		}
		unit := epochUnit(v)
		if v*float64(unit) >= float64(maxTime) {
			return 0, bad()
		}
		return int64(math.Round(v * float64(unit))), nil
	}
	whole, frac, _ := bytes.Cut(b, []byte("."))
	if len(whole) == 0 {
		return 0, bad()
	}
	var n int64
	for _, c := range whole {
		d := int64(c - '0')
		if c < '0' || c > '9' || n > (math.MaxInt64-d)/10 {
			return 0, bad()
		}
		n = n*10 + d
	}
	unit := epochUnit(float64(n))
	if n > maxTime/unit-1 {
		return 0, bad()
	}
	ns := int64(0)
	for i, scale := 0, unit/10; i < len(frac); i, scale = i+1, scale/10 {
		if frac[i] < '0' || frac[i] > '9' {
			return 0, bad()
		}
		ns += int64(frac[i]-'0') * scale
	}
	return n*unit + ns, nil
}

// epochUnit is the unit, in nanoseconds, of a time since 1970 of size v.
func epochUnit(v float64) int64 {
	switch {
	case v < 1e11:
		return 1e9
	case v < 1e14:
		return 1e6
	case v < 1e17:
		return 1e3
	}
	return 1
}

// csvParser reads ratelab's traces: t,key[,n], t in seconds from the
// trace's start.
type csvParser struct {
	begun bool
}

func (p *csvParser) parse(line []byte, e *Entry) error {
	cr := csv.NewReader(bytes.NewReader(line))
	cr.FieldsPerRecord, cr.TrimLeadingSpace = -1, true
	rec, err := cr.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return err
	}
	if !p.begun {
		p.begun = true
		rec[0] = strings.TrimPrefix(rec[0], "\ufeff")
		if workloads.IsTraceHeader(rec) {
			e.N = 0
			return errHeader
		}
	}
	r, err := workloads.ParseTraceFields(rec)
	if err != nil {
		return err
	}
	if r.After != nil {
		return errors.New("an actual cost (the fourth column): a plan decides each request at its cost, as it came; settling later is ratelab replay's")
	}
	*e = Entry{At: int64(r.T), Key: r.Key, N: r.N}
	return nil
}

// errHeader is a CSV trace's header line: not a request, not a fault.
var errHeader = errors.New("header")

// maxTime is the latest time a log may give, in nanoseconds since 1970:
// what fits in an int64 (2262), less a year, so that the spans between
// its times fit too.
const maxTime = math.MaxInt64 - int64(366*24*time.Hour)

// unixNano is t in nanoseconds since 1970, or an error for a time before
// 1970 or after 2261: a log's spans between times must fit in an int64.
func unixNano(t time.Time) (int64, error) {
	if t.Year() < 1970 || t.Year() > 2261 {
		return 0, errors.New("not between 1970 and 2261")
	}
	return t.UnixNano(), nil
}

// orNames is a preset's field names, or the default's where it has none.
func orNames(preset, def []string) []string {
	if len(preset) > 0 {
		return preset
	}
	return def
}
