package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sort"
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
	// Reorder is how far out of time order lines may be and still be
	// taken in order (0: 2s; below 0: none). A line earlier than one
	// already taken is skipped, and said so.
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
// gzip.
type Input struct {
	Name string
	R    io.Reader
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

// A Reader reads the requests of a run of logs (rotated files in order),
// in time order within Options.Reorder.
type Reader struct {
	o      Options
	inputs []Input
	cur    int // the input being read
	br     *bufio.Reader
	rc     io.Closer // the gzip reader of the input, if any
	line   int
	p      parser

	pending  pending // read, not yet taken: in time order within Reorder
	newest   int64   // the latest time read
	taken    int64   // the time of the last entry returned
	anyTaken bool
	// fromInput is how many requests the input being read has given.
	fromInput int
	e         Entry // the line being read

	lines, requests, free int
	skips                 int
	kept                  []Skip
	// noKey are the lines of a request without the key, and the first.
	noKey      int
	firstNoKey Skip
	buf        []byte
	// unread is the first line not read as a request, for the formats
	// it does read as (readsAs).
	unread []byte

	// A parallel parse (Options.Parsers): a parser a goroutine, and the
	// block of lines read and parsed ahead, taken from at on; their bytes
	// are in block.
	parsers []parser
	ahead   []parsed
	at      int
	block   []byte
}

// Unseen says each field an option named (--status, --agent, --path of a
// JSON log) that no line read so far had: a field named wrong counts
// nothing, and should be said once rather than read as "none".
func (r *Reader) Unseen() []string {
	if u, ok := r.p.(interface{ unseen() []string }); ok && r.lines > 0 {
		return u.unseen()
	}
	return nil
}

// NewReader returns a reader of inputs, read in turn as one log.
func NewReader(inputs []Input, o Options) (*Reader, error) {
	if o.Reorder == 0 {
		o.Reorder = 2 * time.Second
	}
	p, err := newParser(o)
	if err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, errors.New("accesslog: no input")
	}
	r := &Reader{o: o, inputs: inputs, cur: -1, p: p}
	if _, ok := p.(*templateParser); ok && o.Parsers > 1 {
		for range o.Parsers {
			q, _ := newParser(o) // as p was: no error
			r.parsers = append(r.parsers, q)
		}
	}
	return r, nil
}

// Lines is how many lines have been read; Requests how many were taken
// as requests; Free how many cost 0 (a cost field of 0), taken by none.
func (r *Reader) Lines() int    { return r.lines }
func (r *Reader) Requests() int { return r.requests }
func (r *Reader) Free() int     { return r.free }

// Skipped is how many lines were not taken as requests (blank and comment
// lines aside), and the first few of them with why.
func (r *Reader) Skipped() (int, []Skip) { return r.skips, r.kept }

// NoKey is how many of the lines skipped were requests without the key
// (a health check that sends no API key), and the first of them.
func (r *Reader) NoKey() (int, Skip) { return r.noKey, r.firstNoKey }

// Read returns the next request in time order, io.EOF after the last, or
// the error that stopped an input (naming it and its line).
func (r *Reader) Read() (Entry, error) {
	for {
		if r.pending.len() > 0 && (r.pending.firstAt() <= r.newest-int64(r.o.Reorder) || r.cur >= len(r.inputs) || r.o.Reorder < 0) {
			e := r.pending.pop()
			r.taken, r.anyTaken = e.At, true
			r.requests++
			return e, nil
		}
		if r.cur >= len(r.inputs) {
			return Entry{}, io.EOF
		}
		if err := r.next(); err != nil {
			return Entry{}, err
		}
	}
}

// next reads a line into pending, or moves to the next input.
func (r *Reader) next() error {
	if r.br == nil {
		return r.open()
	}
	if r.parsers != nil {
		return r.nextParsed()
	}
	line, err := r.readLine()
	if err == io.EOF {
		r.closeInput()
		return nil
	}
	if err == errTooLong {
		r.lines++
		return r.skip(err.Error())
	}
	if err != nil {
		return fmt.Errorf("%s:%d: %w", r.inputs[r.cur].Name, r.line, err)
	}
	r.lines++
	if blank(line) {
		return nil
	}
	// The parser fills r.e, the Reader's own: a local's address given to
	// an interface's method escapes, an allocation a line.
	r.e = Entry{}
	return r.take(line, r.p.parse(line, &r.e))
}

// blank says whether line is empty or a comment: no request, no skip.
func blank(line []byte) bool {
	s := bytes.TrimSpace(line)
	return len(s) == 0 || s[0] == '#'
}

// take puts r.e, which line parsed into (err: how it did not), into
// pending, or counts the line as skipped.
func (r *Reader) take(line []byte, err error) error {
	e := &r.e
	if err == errHeader {
		return nil
	} else if err != nil {
		if r.unread == nil {
			r.unread = bytes.Clone(line)
		}
		if _, ok := err.(noKey); ok {
			if r.noKey++; r.noKey == 1 {
				r.firstNoKey = Skip{Where: fmt.Sprintf("%s:%d", r.inputs[r.cur].Name, r.line), Why: err.Error()}
			}
		}
		return r.skip(err.Error())
	}
	if e.N == 0 {
		r.free++
		return nil
	}
	if r.anyTaken && e.At < r.taken && r.cur > 0 && r.fromInput == 0 {
		return fmt.Errorf("%s:%d: %v earlier than the end of %s: give rotated logs oldest first (access.log.2.gz access.log.1 access.log)",
			r.inputs[r.cur].Name, r.line, time.Duration(r.taken-e.At).Round(time.Millisecond), r.inputs[r.cur-1].Name)
	}
	if r.anyTaken && e.At < r.taken {
		return r.skip(fmt.Sprintf("%v earlier than a line already taken: out of order by more than --reorder %v", time.Duration(r.taken-e.At).Round(time.Millisecond), r.o.Reorder))
	}
	e.Line, e.Input = r.line, r.cur
	r.fromInput++
	r.newest = max(r.newest, e.At)
	r.pending.push(*e)
	return nil
}

// skip counts the current line as not a request, because of why.
func (r *Reader) skip(why string) error {
	r.skips++
	if len(r.kept) < keptSkips {
		r.kept = append(r.kept, Skip{Where: fmt.Sprintf("%s:%d", r.inputs[r.cur].Name, r.line), Why: why})
	}
	if r.requests == 0 && r.pending.len() == 0 && r.skips >= hopeless {
		return fmt.Errorf("%s: none of the first %d lines is a request of the format %s: %s (the first: %s)", r.inputs[r.cur].Name, r.skips, r.formatName(), r.another(), r.kept[0].String())
	}
	return nil
}

// another asks whether the lines are of another format, naming the one
// the first unread line reads as, if any does.
func (r *Reader) another() string {
	if f := r.readsAs(); f != "" {
		return "it reads as --format " + f
	}
	return "is it another? (--format)"
}

// readsAs is the first format, the products' before the generic ones,
// that reads the first unread line as a request with a time: "" for
// none.
func (r *Reader) readsAs() string {
	if r.unread == nil {
		return ""
	}
	var formats []string
	for _, pr := range Presets() {
		formats = append(formats, pr[0])
	}
	for _, f := range append(formats, JSON, Combined, Common) {
		if f == r.formatName() {
			continue
		}
		o := r.o
		o.Format = f
		p, err := newParser(o)
		if err != nil {
			continue
		}
		var e Entry
		if p.parse(r.unread, &e) == nil && e.At != 0 {
			return f
		}
	}
	return ""
}

func (r *Reader) formatName() string {
	switch r.o.Format {
	case "":
		return Combined
	case Combined, Common, JSON, CSV:
		return r.o.Format
	}
	if _, ok := presets[r.o.Format]; ok {
		return r.o.Format
	}
	return fmt.Sprintf("%q", r.o.Format)
}

// open starts the next input, or ends the run after the last.
func (r *Reader) open() error {
	r.cur++
	if r.cur >= len(r.inputs) {
		if r.requests == 0 && r.pending.len() == 0 && r.skips > 0 {
			return fmt.Errorf("no line is a request of the format %s: %s (the first: %s)", r.formatName(), r.another(), r.kept[0])
		}
		return nil
	}
	r.line, r.fromInput = 0, 0
	br := bufio.NewReaderSize(r.inputs[r.cur].R, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", r.inputs[r.cur].Name, err)
		}
		r.rc = zr
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	r.br = br
	if c, ok := r.p.(*csvParser); ok {
		c.reset()
	}
	return nil
}

func (r *Reader) closeInput() {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	r.br = nil
}

// maxLine is the longest line read; a longer one is skipped.
const maxLine = 1 << 20

var errTooLong = fmt.Errorf("longer than %d bytes", maxLine)

// readLine returns the next line without its end, valid until the next
// call; io.EOF after the last.
func (r *Reader) readLine() ([]byte, error) {
	r.line++
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.buf = append(r.buf[:0], b...)
		for err == bufio.ErrBufferFull {
			b, err = r.br.ReadSlice('\n')
			if len(r.buf) < maxLine {
				r.buf = append(r.buf, b...)
			}
		}
		b = r.buf
	}
	if err == io.EOF && len(b) > 0 {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	b = trimEOL(b)
	if len(b) >= maxLine {
		return nil, errTooLong
	}
	return b, nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// pending are entries read and not yet taken, in time order (then in
// the order read): a queue, as a log in order only appends to its end; a
// line out of order is put in its place.
type pending struct {
	q    []Entry
	head int
}

func (p *pending) len() int       { return len(p.q) - p.head }
func (p *pending) firstAt() int64 { return p.q[p.head].At }

func (p *pending) pop() Entry {
	e := p.q[p.head]
	p.head++
	if p.head == len(p.q) {
		p.q, p.head = p.q[:0], 0
	} else if p.head >= 4096 && p.head >= len(p.q)/2 {
		p.q = p.q[:copy(p.q, p.q[p.head:])]
		p.head = 0
	}
	return e
}

func (p *pending) push(e Entry) {
	n := len(p.q)
	if n == p.head || p.q[n-1].At <= e.At {
		p.q = append(p.q, e)
		return
	}
	// After every entry at or before its time: those were read first.
	i := p.head + sort.Search(n-p.head, func(i int) bool { return p.q[p.head+i].At > e.At })
	p.q = slices.Insert(p.q, i, e)
}

// seed hashes agents and paths, for one process.
var seed = maphash.MakeSeed()

func hashOf(b []byte) uint64 {
	if len(b) == 0 || len(b) == 1 && b[0] == '-' {
		return 0
	}
	return maphash.Bytes(seed, b) | 1
}
