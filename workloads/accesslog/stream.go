package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// A stream is one input read in its own time order: lines out of order
// by up to Options.Reorder put back in order, a line earlier than one
// already taken skipped. A Reader merges its streams by time.
type stream struct {
	in    Input
	index int // the input's, in Entry.Input
	o     Options
	c     *counts // the Reader's, or a peek's own
	pool  *readers
	p     parser
	// bufSize is its read buffers' size: a peek reads a line or two.
	bufSize int

	opened, done bool
	br           *bufio.Reader
	closers      []io.Closer // the input Open gave, and its gzip reader
	bufs         []*bufio.Reader
	zr           *gzip.Reader
	line         int

	pending  pending // read, not yet taken: in time order within Reorder
	newest   int64   // the latest time read
	taken    int64   // the time of the last entry returned
	anyTaken bool
	e        Entry // the line being read
	buf      []byte

	// What it read: lines, skips and requests taken, for its Source and
	// for giving up on a log of another format (hopeless).
	lines, skips, requests int
	firstSkip              Skip
	unseen                 []string // its parser's, once read to its end

	// A parallel parse (Options.Parsers): a parser a goroutine, and the
	// block of lines read and parsed ahead, taken from at on; their bytes
	// are in block.
	parsers []parser
	ahead   []parsed
	at      int
	block   []byte
}

// counts are what a Reader's streams read, together: lines, lines of
// cost 0, lines skipped (and the first few), requests without the key
// (and the first), and the first line not read as a request.
type counts struct {
	lines, free, skips int
	kept               []Skip
	noKey              int
	firstNoKey         Skip
	unread             []byte
}

func newStream(in Input, index int, o Options, c *counts, pool *readers) (*stream, error) {
	p, err := newParser(o)
	if err != nil {
		return nil, err
	}
	s := &stream{in: in, index: index, o: o, c: c, pool: pool, p: p, bufSize: 256 << 10}
	if _, ok := p.(*templateParser); ok && o.Parsers > 1 {
		for range o.Parsers {
			q, _ := newParser(o) // as p was: no error
			s.parsers = append(s.parsers, q)
		}
	}
	return s, nil
}

// read returns the stream's next request in time order, io.EOF after the
// last, or the error that stopped it (naming the input and its line).
func (s *stream) read() (Entry, error) {
	for {
		if s.pending.len() > 0 && (s.done || s.o.Reorder < 0 || s.pending.firstAt() <= s.newest-int64(s.o.Reorder)) {
			e := s.pending.pop()
			s.taken, s.anyTaken = e.At, true
			s.requests++
			return e, nil
		}
		if s.done {
			s.pending.q = nil // read to its end: its memory let go
			return Entry{}, io.EOF
		}
		if err := s.next(); err != nil {
			return Entry{}, err
		}
	}
}

// next reads a line into pending, opening the input first, or closes it
// after its last.
func (s *stream) next() error {
	if !s.opened {
		return s.open()
	}
	if s.parsers != nil {
		return s.nextParsed()
	}
	line, err := s.readLine()
	if err == io.EOF {
		s.close()
		return nil
	}
	if err == errTooLong {
		s.lines++
		s.c.lines++
		return s.skip(err.Error())
	}
	if err != nil {
		return fmt.Errorf("%s:%d: %w", s.in.Name, s.line, err)
	}
	s.lines++
	s.c.lines++
	if blank(line) {
		return nil
	}
	// The parser fills s.e, the stream's own: a local's address given to
	// an interface's method escapes, an allocation a line.
	s.e = Entry{}
	return s.take(line, s.p.parse(line, &s.e))
}

// blank says whether line is empty or a comment: no request, no skip.
func blank(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) == 0 || t[0] == '#'
}

// take puts s.e, which line parsed into (err: how it did not), into
// pending, or counts the line as skipped.
func (s *stream) take(line []byte, err error) error {
	e := &s.e
	if err == errHeader {
		return nil
	} else if err != nil {
		if s.c.unread == nil {
			s.c.unread = bytes.Clone(line)
		}
		if _, ok := err.(noKey); ok {
			if s.c.noKey++; s.c.noKey == 1 {
				s.c.firstNoKey = Skip{Where: s.where(), Why: err.Error()}
			}
		}
		return s.skip(err.Error())
	}
	if e.N == 0 {
		s.c.free++
		return nil
	}
	if s.anyTaken && e.At < s.taken {
		return s.skip(fmt.Sprintf("%v earlier than a line already taken: out of order by more than --reorder %v",
			time.Duration(s.taken-e.At).Round(time.Millisecond), s.o.Reorder))
	}
	e.Line, e.Input = s.line, s.index
	s.newest = max(s.newest, e.At)
	s.pending.push(*e)
	return nil
}

func (s *stream) where() string { return fmt.Sprintf("%s:%d", s.in.Name, s.line) }

// skip counts the current line as not a request, because of why.
func (s *stream) skip(why string) error {
	s.skips++
	s.c.skips++
	if s.skips == 1 || len(s.c.kept) < keptSkips {
		sk := Skip{Where: s.where(), Why: why}
		if s.skips == 1 {
			s.firstSkip = sk
		}
		if len(s.c.kept) < keptSkips {
			s.c.kept = append(s.c.kept, sk)
		}
	}
	if s.requests == 0 && s.pending.len() == 0 && s.skips >= hopeless {
		return fmt.Errorf("%s: none of the first %d lines is a request of the format %s: %s (the first: %s)",
			s.in.Name, s.skips, formatName(s.o), another(s.o, s.c.unread), s.firstSkip)
	}
	return nil
}

// open starts reading the input: from R, or from what Open gives.
func (s *stream) open() error {
	s.opened, s.line = true, 0
	r := s.in.R
	if s.in.Open != nil {
		rc, err := s.in.Open()
		if err != nil {
			s.done = true
			return err
		}
		s.closers, r = append(s.closers, rc), rc
	}
	br := s.pool.buffer(r, s.bufSize)
	s.bufs = append(s.bufs, br)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := s.pool.gunzip(br)
		if err != nil {
			s.close()
			return fmt.Errorf("%s: %w", s.in.Name, err)
		}
		s.closers, s.zr = append(s.closers, zr), zr
		br = s.pool.buffer(zr, s.bufSize)
		s.bufs = append(s.bufs, br)
	}
	s.br = br
	return nil
}

// close ends the input: what it opened closed, its buffers given back.
func (s *stream) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i].Close()
	}
	for _, b := range s.bufs {
		s.pool.putBuffer(b)
	}
	if s.ahead != nil {
		s.pool.blocks = append(s.pool.blocks, parseAhead{s.ahead[:0], s.block[:0]})
	}
	if s.zr != nil {
		s.pool.putGunzip(s.zr)
	}
	s.closers, s.bufs, s.zr, s.br, s.done = nil, nil, nil, nil, true
	s.buf, s.ahead, s.block = nil, nil, nil
	if u, ok := s.p.(interface{ unseen() []string }); ok && s.lines > 0 {
		s.unseen = u.unseen()
	}
}

// maxLine is the longest line read; a longer one is skipped.
const maxLine = 1 << 20

var errTooLong = fmt.Errorf("longer than %d bytes", maxLine)

// readLine returns the next line without its end, valid until the next
// call; io.EOF after the last.
func (s *stream) readLine() ([]byte, error) {
	s.line++
	b, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.buf = append(s.buf[:0], b...)
		for err == bufio.ErrBufferFull {
			b, err = s.br.ReadSlice('\n')
			if len(s.buf) < maxLine {
				s.buf = append(s.buf, b...)
			}
		}
		b = s.buf
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

// readers are the read buffers and gzip readers of a Reader's streams,
// each used again by the next stream once one is done with it: a fleet's
// thousand files, each read with buffers of its own, were 191 MB at
// most where one file is 42.
type readers struct {
	buffers []*bufio.Reader
	gzips   []*gzip.Reader
	blocks  []parseAhead
}

// parseAhead is a parallel parse's block: its lines and their bytes.
type parseAhead struct {
	ahead []parsed
	block []byte
}

// buffer is a read buffer of size bytes reading r.
func (p *readers) buffer(r io.Reader, size int) *bufio.Reader {
	for i, b := range p.buffers {
		if b.Size() == size {
			p.buffers = slices.Delete(p.buffers, i, i+1)
			b.Reset(r)
			return b
		}
	}
	return bufio.NewReaderSize(r, size)
}

func (p *readers) putBuffer(b *bufio.Reader) {
	b.Reset(nil)
	p.buffers = append(p.buffers, b)
}

// gunzip is a gzip reader of r.
func (p *readers) gunzip(r io.Reader) (*gzip.Reader, error) {
	if n := len(p.gzips); n > 0 {
		z := p.gzips[n-1]
		p.gzips = p.gzips[:n-1]
		if err := z.Reset(r); err != nil {
			p.gzips = append(p.gzips, z)
			return nil, err
		}
		return z, nil
	}
	return gzip.NewReader(r)
}

func (p *readers) putGunzip(z *gzip.Reader) { p.gzips = append(p.gzips, z) }
