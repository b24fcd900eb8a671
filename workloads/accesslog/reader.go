package accesslog

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"slices"
	"time"
)

// Options say how to read a log. The zero value reads the combined
// format, keyed by the client's address, each request costing 1.
type Options struct {
	// Format is combined, common, json, csv, a product's log by name
	// (Presets: caddy, traefik, alb, cloudflare, gcp), or an nginx
	// log_format string (it holds a $): "" is combined.
	Format string
	// Key is what a request is counted under (ParseKey); the zero value
	// is the client's address. A CSV trace's key is its key column.
	Key KeySpec
	// Cost, if not empty, is the field a request's cost is read from (a
	// variable of the format, a JSON path); it costs 1 otherwise.
	Cost string
	// Time is the field a JSON line's time is read from (default: the
	// first of time, timestamp, ts, @timestamp): RFC 3339, or a number
	// since 1970, of seconds, milliseconds, microseconds or nanoseconds,
	// as its size says. A log format's time is its $time_local,
	// $time_iso8601 or $msec, the first it has.
	Time string
	// Status, Agent and Path are the fields a JSON line's status, user
	// agent and path are read from (default: the first of status,
	// status_code; of user_agent, http_user_agent, userAgent; of path,
	// request_uri, uri, request), for a log that nests or names them
	// otherwise (.httpRequest.status).
	Status, Agent, Path string
	// Reorder is how far out of time order the lines of one input may be
	// and still be taken in order (0: 2s; below 0: none). A line earlier
	// than one of its input already taken is skipped, and said so.
	// Inputs are merged by time whatever their order.
	Reorder time.Duration
	// Parsers is how many goroutines parse the lines of a log format
	// (combined, common, a log_format) at once, in blocks, the lines then
	// taken in order as one would (0 or 1: the reading goroutine alone).
	// JSON lines and CSV traces are parsed by the reading goroutine.
	Parsers int
}

// An Entry is one request of a log.
type Entry struct {
	// At is when it came, in nanoseconds since 1970 (a CSV trace's are
	// from the trace's start).
	At  int64
	Key string
	// N is its cost: 1 unless Options.Cost names a field.
	N int
	// Status is the HTTP status the server answered, 0 if the log does
	// not say: 429 is a refusal by whatever limit ran then.
	Status int
	// Agent and Path are hashes of the user agent and of the path (its
	// query cut off), 0 if the log does not say: how many distinct ones a
	// key has tells a client from many behind one address.
	Agent, Path uint64
	// Line is its line in its input, Input the input's index.
	Line, Input int
}

// Input is a log to read: its name (for messages) and its bytes, plain or
// gzip: from R, or from what Open returns (a file), which a Reader opens
// when it comes to it and closes after its last line, so that a fleet's
// thousand files are not open at once.
type Input struct {
	Name string
	R    io.Reader
	Open func() (io.ReadCloser, error)
}

// A Skip is a line that was not taken as a request.
type Skip struct {
	Where string // name:line
	Why   string
}

func (s Skip) String() string { return s.Where + ": " + s.Why }

// keptSkips is how many skipped lines a Reader keeps to show.
const keptSkips = 5

// hopeless is how many lines, none of them read, a Reader gives up after:
// the log is not in the format it was told.
const hopeless = 100

// A Reader reads the requests of several inputs as one log, merged by
// time: the rotated files of one log, the logs of a fleet's hosts or of a
// load balancer's nodes, a log shipper's batches, in any order. Each
// input is read in its own time order (within Options.Reorder), and an
// input is opened when the merge comes to its first line's time, so that
// only the inputs whose times overlap are open at once.
type Reader struct {
	o      Options
	inputs []Input
	c      counts
	pool   readers
	// streams are the inputs', by index (nil: not begun); order the
	// inputs by their first time, firstAt, which a peek found; next the
	// first of order not begun.
	streams []*stream
	order   []int
	firstAt []int64
	next    int
	begun   bool
	// open are the streams with a request in hand (heads), a heap by its
	// time then input; advance is the stream whose head was last taken,
	// read on at the next Read.
	open    []*stream
	heads   []Entry // by input
	advance *stream
	// The requests taken, the last one's time, and each input's: how
	// many, the first and last one's time.
	requests int
	last     int64
	of       []taken
}

// taken is what a Reader took of one input.
type taken struct {
	requests    int
	first, last int64
}

// NewReader returns a reader of inputs, merged by time as one log.
func NewReader(inputs []Input, o Options) (*Reader, error) {
	if o.Reorder == 0 {
		o.Reorder = 2 * time.Second
	}
	if _, err := newParser(o); err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, errors.New("accesslog: no input")
	}
	n := len(inputs)
	return &Reader{o: o, inputs: inputs, streams: make([]*stream, n), heads: make([]Entry, n), of: make([]taken, n)}, nil
}

// Unseen says each field an option named (--status, --agent, --path of a
// JSON log) that no line read so far had: a field named wrong counts
// nothing, and should be said once rather than read as "none".
func (r *Reader) Unseen() []string {
	var out []string
	first := true
	for _, s := range r.streams {
		if s == nil || s.lines == 0 {
			continue
		}
		u := s.unseen
		if !s.done {
			if p, ok := s.p.(interface{ unseen() []string }); ok {
				u = p.unseen()
			}
		}
		if first {
			out, first = slices.Clone(u), false
			continue
		}
		// Unseen in all: a field one input has is seen.
		out = slices.DeleteFunc(out, func(x string) bool { return !slices.Contains(u, x) })
	}
	return out
}

// Lines is how many lines have been read; Requests how many were taken
// as requests; Free how many cost 0 (a cost field of 0), taken by none.
func (r *Reader) Lines() int    { return r.c.lines }
func (r *Reader) Requests() int { return r.requests }
func (r *Reader) Free() int     { return r.c.free }

// Skipped is how many lines were not taken as requests (blank and comment
// lines aside), and the first few of them with why.
func (r *Reader) Skipped() (int, []Skip) { return r.c.skips, r.c.kept }

// NoKey is how many of the lines skipped were requests without the key
// (a health check that sends no API key), and the first of them.
func (r *Reader) NoKey() (int, Skip) { return r.c.noKey, r.c.firstNoKey }

// Read returns the next request in time order, io.EOF after the last, or
// the error that stopped an input (naming it and its line).
func (r *Reader) Read() (Entry, error) {
	if !r.begun {
		if err := r.begin(); err != nil {
			return Entry{}, err
		}
	}
	if s := r.advance; s != nil {
		r.advance = nil
		// The only input left to read (one log, or a fleet's last file):
		// its next request straight, in order, past the heap.
		if len(r.open) == 0 && r.next == len(r.order) {
			e, err := s.read()
			if err == io.EOF {
				return Entry{}, r.end()
			}
			if err != nil {
				return Entry{}, err
			}
			if e.At >= r.last {
				return r.took(s, e), nil
			}
			r.heads[s.index] = e
			r.push(s) // earlier than another's: skipped below
		} else if err := r.pull(s); err != nil {
			return Entry{}, err
		}
	}
	for {
		// An input begins before the merge takes a request later than
		// its first line less Reorder: its lines before are its own.
		if r.next < len(r.order) {
			i := r.order[r.next]
			if len(r.open) == 0 || r.firstAt[i] <= r.heads[r.open[0].index].At+r.slack() {
				r.next++
				if err := r.start(i); err != nil {
					return Entry{}, err
				}
				continue
			}
		}
		if len(r.open) == 0 {
			return Entry{}, r.end()
		}
		s := r.pop()
		e := r.heads[s.index]
		if r.requests > 0 && e.At < r.last {
			// Earlier than its own first line by more than Reorder, and
			// than what another input gave already.
			s.line = e.Line
			if err := s.skip(fmt.Sprintf("%v earlier than a line of another input already taken: out of order by more than --reorder %v",
				time.Duration(r.last-e.At).Round(time.Millisecond), r.o.Reorder)); err != nil {
				return Entry{}, err
			}
			if err := r.pull(s); err != nil {
				return Entry{}, err
			}
			continue
		}
		return r.took(s, e), nil
	}
}

// took counts e, s's next request, as taken, and returns it.
func (r *Reader) took(s *stream, e Entry) Entry {
	r.advance, r.last = s, e.At
	r.requests++
	t := &r.of[s.index]
	if t.requests++; t.requests == 1 {
		t.first = e.At
	}
	t.last = e.At
	return e
}

// slack is how much earlier than its first line an input's requests may
// be: Reorder, or none.
func (r *Reader) slack() int64 { return max(int64(r.o.Reorder), 0) }

// end is io.EOF, or why no line of the log was a request.
func (r *Reader) end() error {
	if r.requests == 0 && r.c.skips > 0 {
		return fmt.Errorf("no line is a request of the format %s: %s (the first: %s)", formatName(r.o), another(r.o, r.c.unread), r.c.kept[0])
	}
	return io.EOF
}

// start begins input i's stream (a peek may have begun it) and takes its
// first request in hand.
func (r *Reader) start(i int) error {
	if r.streams[i] == nil {
		s, err := newStream(r.inputs[i], i, r.o, &r.c, &r.pool)
		if err != nil {
			return err
		}
		r.streams[i] = s
	}
	return r.pull(r.streams[i])
}

// pull reads s's next request into its head, s among the open streams;
// or, after its last, lets it go.
func (r *Reader) pull(s *stream) error {
	e, err := s.read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	r.heads[s.index] = e
	r.push(s)
	return nil
}

// begin finds each input's first time, so that the merge opens each when
// it comes to it. One input needs none; an input of R alone (a pipe,
// which cannot be read twice) is begun for good; one Open gives is
// peeked at and closed, and read again from its start when its time
// comes.
func (r *Reader) begin() error {
	r.begun = true
	n := len(r.inputs)
	r.order, r.firstAt = make([]int, n), make([]int64, n)
	for i := range n {
		r.order[i], r.firstAt[i] = i, math.MinInt64
	}
	if n == 1 {
		return nil
	}
	for i, in := range r.inputs {
		if in.Open == nil {
			s, err := newStream(in, i, r.o, &r.c, &r.pool)
			if err != nil {
				return err
			}
			r.streams[i] = s
			if r.firstAt[i], err = peek(s); err != nil {
				return err
			}
			continue
		}
		o := r.o
		o.Reorder, o.Parsers = -1, 0
		s, err := newStream(in, i, o, &counts{}, &r.pool)
		if err != nil {
			return err
		}
		s.bufSize = 16 << 10
		// An input that cannot be read, or holds no request, is begun
		// first: what it says (its error, its lines skipped) is said as
		// when it is read.
		r.firstAt[i], _ = peek(s)
		s.close()
	}
	slices.SortStableFunc(r.order, func(a, b int) int {
		switch {
		case r.firstAt[a] < r.firstAt[b]:
			return -1
		case r.firstAt[a] > r.firstAt[b]:
			return 1
		}
		return 0
	})
	return nil
}

// peek is the time of s's first line that is a request, s then holding
// it pending: math.MinInt64 for none.
func peek(s *stream) (int64, error) {
	for s.pending.len() == 0 && !s.done {
		if err := s.next(); err != nil {
			return math.MinInt64, err
		}
	}
	if s.pending.len() == 0 {
		return math.MinInt64, nil
	}
	return s.pending.firstAt(), nil
}

// The open streams are a heap, the one whose head comes first on top
// (then the first input given).

func (r *Reader) before(a, b *stream) bool {
	x, y := r.heads[a.index].At, r.heads[b.index].At
	return x < y || x == y && a.index < b.index
}

func (r *Reader) push(s *stream) {
	h := append(r.open, s)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !r.before(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	r.open = h
}

func (r *Reader) pop() *stream {
	h := r.open
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && r.before(h[l], h[m]) {
			m = l
		}
		if l+1 < len(h) && r.before(h[l+1], h[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	r.open = h
	return top
}

// another asks whether the lines are of another format, naming the one
// the first unread line reads as, if any does.
func another(o Options, unread []byte) string {
	if f := readsAs(o, unread); f != "" {
		return "it reads as --format " + f
	}
	return "is it another? (--format)"
}

// readsAs is the first format, the products' before the generic ones,
// that reads the line unread as a request with a time: "" for none.
func readsAs(o Options, unread []byte) string {
	if unread == nil {
		return ""
	}
	var formats []string
	for _, pr := range Presets() {
		formats = append(formats, pr[0])
	}
	for _, f := range append(formats, JSON, Combined, Common) {
		if f == formatName(o) {
			continue
		}
		o := o
		o.Format = f
		p, err := newParser(o)
		if err != nil {
			continue
		}
		var e Entry
		if p.parse(unread, &e) == nil && e.At != 0 {
			return f
		}
	}
	return ""
}

func formatName(o Options) string {
	switch o.Format {
	case "":
		return Combined
	case Combined, Common, JSON, CSV:
		return o.Format
	}
	if _, ok := presets[o.Format]; ok {
		return o.Format
	}
	return fmt.Sprintf("%q", o.Format)
}

// seed hashes agents and paths, for one process.
var seed = maphash.MakeSeed()

func hashOf(b []byte) uint64 {
	if len(b) == 0 || len(b) == 1 && b[0] == '-' {
		return 0
	}
	return maphash.Bytes(seed, b) | 1
}
