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
func (r *Reader) nextParsed() error {
	if r.at == len(r.ahead) {
		r.fill()
		if len(r.ahead) == 0 {
			r.closeInput()
			return nil
		}
	}
	p := &r.ahead[r.at]
	r.at++
	r.line = p.line
	switch {
	case p.readErr == errTooLong:
		r.lines++
		return r.skip(p.readErr.Error())
	case p.readErr != nil:
		return fmt.Errorf("%s:%d: %w", r.inputs[r.cur].Name, r.line, p.readErr)
	}
	r.lines++
	if p.blank {
		return nil
	}
	r.e = p.e
	return r.take(r.block[p.off:p.end], p.parseErr)
}

// fill reads the next block of lines of the input, up to its end, and
// parses them, a share of them a parser at once.
func (r *Reader) fill() {
	r.ahead, r.at, r.block = r.ahead[:0], 0, r.block[:0]
	for len(r.ahead) < parseBlock {
		line, err := r.readLine()
		if err == io.EOF {
			break
		}
		p := parsed{line: r.line, readErr: err}
		if err == nil {
			p.off = len(r.block)
			r.block = append(r.block, line...)
			p.end = len(r.block)
			p.blank = blank(line)
		}
		r.ahead = append(r.ahead, p)
		if err != nil && err != errTooLong {
			break // the input failed: nothing after it is read
		}
	}
	k := len(r.parsers)
	share := (len(r.ahead) + k - 1) / k
	var wg sync.WaitGroup
	for j, q := range r.parsers {
		lo, hi := j*share, min(len(r.ahead), (j+1)*share)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				if p := &r.ahead[i]; p.readErr == nil && !p.blank {
					p.parseErr = q.parse(r.block[p.off:p.end], &p.e)
				}
			}
		})
	}
	wg.Wait()
}
