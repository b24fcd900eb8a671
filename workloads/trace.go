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
// When the trace says what the request really cost, N is the estimate
// that was decided on and After the actual cost and how long after T it
// was known; After is nil otherwise.
type Request struct {
	T     time.Duration
	Key   string
	N     int
	After *After
}

// TraceReader reads a trace: CSV lines of t,key[,n[,actual[,took]]], t in
// seconds from the trace's start (fractions allowed, not negative, never
// less than the line before's), key a user id (quoted if it holds a
// comma), n a cost (a positive integer; 1 if absent). A request whose cost
// was known only after its response (an LLM call's tokens) says so in the
// fourth column: n is then the estimate it was decided at and actual what
// it cost (0 or more), known took seconds after t (0 if absent: at once).
// Blank lines and lines starting with # (after any spaces) are skipped,
// and a header line naming the columns (t,key, then n, actual and took as
// far as the lines go) is allowed before the first request.
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

// Line is the line of the last request Read returned (0 before the first).
func (tr *TraceReader) Line() int { return tr.lastLine }

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

// IsTraceHeader reports whether rec, a trace's first line split at its
// commas, is a header naming the columns (t,key,n...).
func IsTraceHeader(rec []string) bool { return isHeader(rec) }

// ParseTraceFields reads one line of a trace, split at its commas: what
// TraceReader.Read returns for it, without the check of time order.
func ParseTraceFields(rec []string) (Request, error) { return parse(rec) }

func isHeader(rec []string) bool {
	names := []string{"t", "key", "n", "actual", "took"}
	if len(rec) < 2 || len(rec) > len(names) {
		return false
	}
	for i, f := range rec {
		if strings.TrimSpace(f) != names[i] {
			return false
		}
	}
	return true
}

// maxT is the latest time a trace may hold: what fits in a time.Duration.
const maxT = float64(math.MaxInt64/int64(time.Second)) - 1

func parse(rec []string) (Request, error) {
	if len(rec) < 2 || len(rec) > 5 {
		return Request{}, fmt.Errorf("want t,key, t,key,n, t,key,n,actual or t,key,n,actual,took; got %d fields", len(rec))
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
	if len(rec) >= 3 {
		n, err = strconv.Atoi(strings.TrimSpace(rec[2]))
		if err != nil || n < 1 {
			return Request{}, fmt.Errorf("cost %q is not a positive integer", rec[2])
		}
		if n > limiters.MaxLimit {
			return Request{}, fmt.Errorf("cost %d is more than any limit (%d)", n, limiters.MaxLimit)
		}
	}
	req := Request{T: time.Duration(math.Round(sec * 1e9)), Key: key, N: n}
	if len(rec) >= 4 {
		actual, err := strconv.Atoi(strings.TrimSpace(rec[3]))
		if err != nil || actual < 0 || actual > math.MaxInt32 {
			return Request{}, fmt.Errorf("actual cost %q is not an integer from 0 to %d", rec[3], math.MaxInt32)
		}
		req.After = &After{Actual: int32(actual)}
		if len(rec) == 5 {
			took, err := strconv.ParseFloat(strings.TrimSpace(rec[4]), 64)
			if err != nil || !(took >= 0 && took <= maxT-sec) {
				return Request{}, fmt.Errorf("took %q is not a number of seconds from 0 to %.0f", rec[4], maxT-sec)
			}
			req.After.Took = time.Duration(math.Round(took * 1e9))
		}
	}
	return req, nil
}
