package readme

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/results"
)

// Run is what make readme-check measured, each part nil or empty where
// it was not measured.
type Run struct {
	// Host is the CPU's model: the times are compared with the README's
	// column of its kind.
	Host string
	// Times are out/times.tsv's, the make targets' own records.
	Times []Timing
	// Lab is a quick lab's results; LabText what it printed.
	Lab     *results.File
	LabText string
	// PlanText is what ratelab plan printed on the synthetic shop's log,
	// Genlog what cmd/genlog said of the log it wrote.
	PlanText, Genlog string
	// BytesPerKey is BenchmarkMemory's B/key, by limiter (gcra, ...).
	BytesPerKey map[string]float64
	// Root is the tree, whose files hold the settings the README names.
	Root string
}

// A Timing is one line of out/times.tsv: a make target that succeeded,
// how long it took, its largest process's peak memory, whether Go's
// build cache was empty as it began.
type Timing struct {
	Target     string
	Seconds    float64
	PeakKB     float64 // 0: not measured
	EmptyCache bool
	CPU, When  string
}

// Measure reads what make readme-check left in dir (lab.txt and
// lab/results.json, plan.txt, genlog.txt, memory.txt), the times in
// times, and the tree at root. A part missing is left empty; a part
// present and malformed is an error, naming it.
func Measure(dir, times, root string) (*Run, error) {
	r := &Run{Host: results.CPUModel(), Root: root}
	var err error
	if r.Times, err = readTimes(times); err != nil {
		return nil, err
	}
	text := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return string(b), err
	}
	if r.LabText, err = text("lab.txt"); err != nil {
		return nil, err
	}
	if r.PlanText, err = text("plan.txt"); err != nil {
		return nil, err
	}
	if r.Genlog, err = text("genlog.txt"); err != nil {
		return nil, err
	}
	if f, err := results.ReadFile(filepath.Join(dir, "lab", "results.json")); err == nil {
		r.Lab = f
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	mem, err := text("memory.txt")
	if err != nil {
		return nil, err
	}
	if r.BytesPerKey, err = bytesPerKey(mem); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "memory.txt"), err)
	}
	return r, nil
}

func readTimes(path string) ([]Timing, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ts []Timing
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 6 && len(fields) != 7 {
			return nil, fmt.Errorf("%s:%d: want 6 or 7 fields (target, seconds, peak KB, cache, cpu, date, exit status), got %d", path, line, len(fields))
		}
		if len(fields) == 7 && fields[6] != "0" {
			continue // a run that failed: its time is kept, not held to the README
		}
		t := Timing{Target: fields[0], EmptyCache: fields[3] == "empty", CPU: fields[4], When: fields[5]}
		if t.Seconds, err = strconv.ParseFloat(fields[1], 64); err != nil {
			return nil, fmt.Errorf("%s:%d: seconds: %w", path, line, err)
		}
		if fields[2] != "-" {
			if t.PeakKB, err = strconv.ParseFloat(fields[2], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: peak KB: %w", path, line, err)
			}
		}
		ts = append(ts, t)
	}
	return ts, sc.Err()
}

// memoryLine is one of BenchmarkMemory's results: its limiter, its B/key.
var memoryLine = regexp.MustCompile(`^BenchmarkMemory/lim=([^/\s]+)/keys=1M\S*\s.*?\s([\d.]+) B/key`)

func bytesPerKey(text string) (map[string]float64, error) {
	if text == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		m := memoryLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(m[1], "ratelab-")] = v
	}
	if len(out) == 0 {
		return nil, errors.New("no BenchmarkMemory results in it")
	}
	return out, nil
}

// latest returns the last timing of target with the cache as said, on a
// host of kind, and whether there is one.
func (r *Run) latest(target string, emptyCache bool, kind string) (Timing, bool) {
	for i := len(r.Times) - 1; i >= 0; i-- {
		t := r.Times[i]
		if t.Target == target && t.EmptyCache == emptyCache && hostKind(t.CPU) == kind {
			return t, true
		}
	}
	return Timing{}, false
}

// hostKind is the README's name for the kind of a CPU model: "AMD EPYC",
// "Intel Xeon", else the model itself.
func hostKind(cpu string) string {
	switch {
	case strings.Contains(cpu, "EPYC"):
		return "AMD EPYC"
	case strings.Contains(cpu, "Xeon"):
		return "Intel Xeon"
	}
	return cpu
}
