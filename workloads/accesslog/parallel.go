package accesslog

import (
	"fmt"
	"io"
	"sync"
)

// A parallel parse (Options.Parsers): the lines of a log format read
// ahead in blocks, parsed a share a goroutine, each with its own parser,
// then taken in order by the code that takes one goroutine's (take).

// parsed is a line of a block read ahead: where it is, and what reading
// and parsing it gave.
type parsed struct {
	line     int // in its input
	off, end int // its bytes in the block
	blank    bool
	readErr  error // errTooLong, or the input's error (the block's last)
	parseErr error
	e        Entry
}

// parseBlock is how many lines a parallel parse reads ahead.
const parseBlock = 8192

// nextParsed takes the next line of the block read ahead into pending,
// as next does, reading and parsing the next block first if none is left.
func (s *stream) nextParsed() error {
	if s.at == len(s.ahead) {
		s.fill()
		if len(s.ahead) == 0 {
			s.close()
			return nil
		}
	}
	p := &s.ahead[s.at]
	s.at++
	s.line = p.line
	switch {
	case p.readErr == errTooLong:
		s.lines++
		s.c.lines++
		return s.skip(p.readErr.Error())
	case p.readErr != nil:
		return fmt.Errorf("%s:%d: %w", s.in.Name, s.line, p.readErr)
	}
	s.lines++
	s.c.lines++
	if p.blank {
		return nil
	}
	s.e = p.e
	return s.take(s.block[p.off:p.end], p.parseErr)
}

// fill reads the next block of lines of the input, up to its end, and
// parses them, a share of them a parser at once.
func (s *stream) fill() {
	if s.ahead == nil {
		if n := len(s.pool.blocks); n > 0 {
			s.ahead, s.block = s.pool.blocks[n-1].ahead, s.pool.blocks[n-1].block
			s.pool.blocks = s.pool.blocks[:n-1]
		}
	}
	s.ahead, s.at, s.block = s.ahead[:0], 0, s.block[:0]
	for len(s.ahead) < parseBlock {
		line, err := s.readLine()
		if err == io.EOF {
			break
		}
		p := parsed{line: s.line, readErr: err}
		if err == nil {
			p.off = len(s.block)
			s.block = append(s.block, line...)
			p.end = len(s.block)
			p.blank = blank(line)
		}
		s.ahead = append(s.ahead, p)
		if err != nil && err != errTooLong {
			break // the input failed: nothing after it is read
		}
	}
	k := len(s.parsers)
	share := (len(s.ahead) + k - 1) / k
	var wg sync.WaitGroup
	for j, q := range s.parsers {
		lo, hi := j*share, min(len(s.ahead), (j+1)*share)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				if p := &s.ahead[i]; p.readErr == nil && !p.blank {
					p.parseErr = q.parse(s.block[p.off:p.end], &p.e)
				}
			}
		})
	}
	wg.Wait()
}
