// Package results is the lab's result format: one JSON file per run of the
// lab (File: its machine and settings, and a Row per measurement, with
// its metrics and series), read, written and merged, and the modes that
// say what compare, merge and the gate compare of each row. How a file is
// presented (tables, figures, picks) is package results/report's.
//
// The field names are a public format: CI and users parse them. A change
// that renames or removes a field, or changes what one means, bumps Schema.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Schema is the version of the format this package writes and reads.
// Version 2 added the timing runs (mode "timing", with rounds) and
// allocations per decision; version 3 made every measurement a Row;
// version 4 made the run's parameters settings, key/values (Read reads a
// version 3 file's parameters as settings).
const Schema = 4

// File is one run of the lab.
type File struct {
	Schema int   `json:"schema"`
	Meta   Meta  `json:"meta"`
	Rows   []Row `json:"rows"`
}

// Meta says where, when and how the lab ran.
type Meta struct {
	Seed       uint64    `json:"seed"`
	GoVersion  string    `json:"go_version"`
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Start      time.Time `json:"start"`
	Elapsed    Seconds   `json:"elapsed_s"`
	// SimulationPerS is how many decisions a second the simulated runs
	// made on one core, limiters and harness together (here, not in the
	// runs, so that simulated runs are the same byte for byte).
	SimulationPerS     float64 `json:"simulation_decisions_per_s,omitempty"`
	SimulatedDecisions int64   `json:"simulated_decisions,omitempty"`
	// Merged is, for a file Merge made, how many runs of the lab it pools.
	Merged int `json:"merged,omitempty"`
	// Target is, for a file of a limiter judged from outside (ratelab
	// probe), what was judged: its URL, its key and its policy.
	Target string `json:"target,omitempty"`
	// Settings are every setting the run had, by the name of the flag
	// that sets it ("limit": "100/s", "http-rate": "10000"): the lab's
	// own and those of each mode that ran, as each mode declares them;
	// "limiters" names the subjects that ran, "redis-addr" and
	// "redis-prefix" the server of the Redis rows and the keys' prefix.
	Settings map[string]string `json:"settings"`
}

// Setting returns the setting of that name, "" when the run had none.
func (m Meta) Setting(name string) string { return m.Settings[name] }

// Sample is one stretch of one goroutine deciding as fast as it can.
type Sample struct {
	ThroughputPerS float64 `json:"throughput_per_s"`
	// P50NS and P90NS are quantiles of the time of one decision, each
	// value the mean over a stretch of consecutive decisions (256 in this
	// ratelab): the clock is too coarse to time one.
	P50NS float64 `json:"p50_ns"`
	P90NS float64 `json:"p90_ns"`
	// CPUNS is the process's CPU time a decision over the sample (all its
	// threads, user and system), where the sampler could read it; zero
	// where not. Unlike the throughput's wall time it is not charged for
	// the time the sampler waited for a core another process held.
	CPUNS float64 `json:"cpu_ns,omitempty"`
}

// CPUModel is this machine's CPU model name, as Meta records it: from
// /proc/cpuinfo where there is one, else the architecture.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// Seconds is a duration written as a number of seconds.
type Seconds float64

// Duration converts s.
func (s Seconds) Duration() time.Duration { return time.Duration(float64(s) * 1e9) }

// ErrSchema reports a file written in another version of the format.
var ErrSchema = errors.New("results: schema version mismatch")

// Write writes f as indented JSON.
func Write(w io.Writer, f *File) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// WriteFile writes f to path, whole or not at all: it writes a temporary
// file beside path and renames it.
func WriteFile(path string, f *File) error {
	var b bytes.Buffer
	if err := Write(&b, f); err != nil {
		return err
	}
	return WriteAtomic(path, b.Bytes())
}

// WriteAtomic writes data to path through a temporary file and a rename,
// readable by all: a reader never sees half a file.
func WriteAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644) // CreateTemp's 0600 is for secrets
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Read reads a file written by Write, refusing another schema version and
// fields this version does not know.
func Read(r io.Reader) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	// The version first, so that a file of another version is named as
	// such rather than as one with fields this version does not know.
	var v struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("results: %s%w", where(data, err), err)
	}
	switch {
	case v.Schema == nil:
		return nil, fmt.Errorf("results: not a results file: no schema version")
	case *v.Schema == 3:
		return readV3(data)
	case *v.Schema < Schema:
		return nil, fmt.Errorf("%w: the file is version %d, written by a ratelab from before every measurement was a row (this one reads %d): "+
			"run the lab again with this ratelab, or compare it with the ratelab that wrote it", ErrSchema, *v.Schema, Schema)
	case *v.Schema != Schema:
		return nil, fmt.Errorf("%w: the file is version %d, this ratelab reads %d", ErrSchema, *v.Schema, Schema)
	}
	var f File
	if err := Decode(data, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// Decode decodes the JSON data into v, refusing fields v does not have,
// and says where in data an error is (line and column): how a results
// file, or a file beside it (the gate's A/B file), is read.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("results: %s%w", where(data, err), err)
	}
	return nil
}

// where returns "line L, column C: " for a JSON error that has an offset
// into data, "" for one that has not: the character a syntax error
// stopped at, the end of the value of the wrong type, or the end of data
// that stops in the middle of a value.
func where(data []byte, err error) string {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data)) + 1
	default:
		return ""
	}
	before := data[:min(max(off-1, 0), int64(len(data)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: ", line, col)
}

// ReadFile reads the file at path.
func ReadFile(path string) (*File, error) {
	in, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	f, err := Read(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
