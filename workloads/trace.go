// Package workloads generates the traffic the lab drives limiters with, and
// reads recorded traffic back: traces.
package workloads

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// A Request is one arrival: at T after the start, Key asks for N units.
type Request struct {
	T   time.Duration
	Key string
	N   int
}

// TraceReader reads a trace: CSV lines of t,key[,n], t in seconds from the
// trace's start (fractions allowed, not negative, never less than the line
// before's), key a user id (quoted if it holds a comma), n a cost (a
// positive integer; 1 if absent). Blank lines and lines starting with #
// (after any spaces) are skipped, and a header line t,key,n (or t,key) is
// allowed before the first request.
//
// It reads one line at a time, so a trace of any length streams.
type TraceReader struct {
	r        *csv.Reader
	begun    bool
	last     time.Duration // the time of the previous request
	lastLine int
}

// NewTraceReader returns a reader of the trace in r.
func NewTraceReader(r io.Reader) *TraceReader {
	c := csv.NewReader(r)
	c.Comment = '#'
	c.FieldsPerRecord = -1
	c.TrimLeadingSpace = true
	c.ReuseRecord = true
	return &TraceReader{r: c}
}

// TraceError is a malformed line of a trace.
type TraceError struct {
	Line int
	Err  error
}

func (e *TraceError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *TraceError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed: every TraceError is one.
func (e *TraceError) Is(target error) bool { return target == ErrMalformed }

// ErrMalformed matches every *TraceError.
var ErrMalformed = errors.New("malformed trace line")

// Read returns the next request, io.EOF after the last, or a *TraceError
// naming the line that is not a request.
func (tr *TraceReader) Read() (Request, error) {
	for {
		rec, err := tr.r.Read()
		if err == io.EOF {
			return Request{}, io.EOF
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return Request{}, &TraceError{Line: pe.Line, Err: pe.Err}
			}
			return Request{}, err
		}
		line, _ := tr.r.FieldPos(0)
		if !tr.begun {
			rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // a byte order mark
		}
		if blank(rec) || strings.HasPrefix(strings.TrimSpace(rec[0]), "#") {
			continue
		}
		first := !tr.begun
		tr.begun = true
		if first && isHeader(rec) {
			continue
		}
		req, err := parse(rec)
		if err != nil {
			return Request{}, &TraceError{Line: line, Err: err}
		}
		if tr.lastLine > 0 && req.T < tr.last {
			return Request{}, &TraceError{Line: line, Err: fmt.Errorf("time %v is before line %d's %v: a trace must be in time order", req.T.Seconds(), tr.lastLine, tr.last.Seconds())}
		}
		tr.last, tr.lastLine = req.T, line
		return req, nil
	}
}

func blank(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

func isHeader(rec []string) bool {
	return (len(rec) == 2 || len(rec) == 3) && rec[0] == "t" && rec[1] == "key" && (len(rec) == 2 || rec[2] == "n")
}

// maxT is the latest time a trace may hold: what fits in a time.Duration.
const maxT = float64(math.MaxInt64/int64(time.Second)) - 1

func parse(rec []string) (Request, error) {
	if len(rec) < 2 || len(rec) > 3 {
		return Request{}, fmt.Errorf("want t,key or t,key,n; got %d fields", len(rec))
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
	if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) {
		return Request{}, fmt.Errorf("time %q is not a number of seconds", rec[0])
	}
	if sec < 0 || sec > maxT {
		return Request{}, fmt.Errorf("time %q is outside 0 to %.0f seconds", rec[0], maxT)
	}
	key := strings.TrimSpace(rec[1])
	if key == "" {
		return Request{}, errors.New("key is empty")
	}
	n := 1
	if len(rec) == 3 {
		n, err = strconv.Atoi(strings.TrimSpace(rec[2]))
		if err != nil || n < 1 {
			return Request{}, fmt.Errorf("cost %q is not a positive integer", rec[2])
		}
		if n > limiters.MaxLimit {
			return Request{}, fmt.Errorf("cost %d is more than any limit (%d)", n, limiters.MaxLimit)
		}
	}
	return Request{T: time.Duration(math.Round(sec * 1e9)), Key: key, N: n}, nil
}
