package gate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ratelab/ratelab/results"
)

// protocol is the version of what a worker and the gate say to each other.
// A gate refuses a worker of another version: the two builds it compares
// must both speak its own.
const protocol = 1

// The worker is a ratelab of one build, run as "ratelab worker": it says
// hello, then answers each request line on its standard input with one
// line on its standard output, and ends at the end of its input. Every
// line is one JSON object.
type (
	hello struct {
		Protocol  int      `json:"protocol"`
		Schema    int      `json:"schema"`
		GoVersion string   `json:"go_version"`
		Limiters  []string `json:"limiters"`
		Workloads []string `json:"workloads"`
	}
	request struct {
		Limiter  string `json:"limiter"`
		Workload string `json:"workload"`
		SampleNS int64  `json:"sample_ns"`
	}
	reply struct {
		Sample *results.Sample `json:"sample,omitempty"`
		Error  string          `json:"error,omitempty"`
	}
)

// sampler is what a worker serves: harness.sampler.
type sampler interface {
	Limiters() []string
	Workloads() []string
	Sample(ctx context.Context, limiter, workload string, d time.Duration) (results.Sample, error)
}

// Serve is the worker: it says hello on out, then answers each request
// read from in with a sample from s, until in ends. A request s cannot
// sample (an unknown limiter, say) is answered with its error, and the
// worker goes on; a line that is not a request ends it.
func Serve(ctx context.Context, s sampler, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	if err := enc.Encode(hello{Protocol: protocol, Schema: results.Schema, GoVersion: runtime.Version(),
		Limiters: s.Limiters(), Workloads: s.Workloads()}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for line := 1; sc.Scan(); line++ {
		var req request
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return fmt.Errorf("gate: worker: request %d: %w", line, err)
		}
		var rep reply
		sample, err := s.Sample(ctx, req.Limiter, req.Workload, time.Duration(req.SampleNS))
		if err != nil {
			rep.Error = err.Error()
		} else {
			rep.Sample = &sample
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// A worker is a running worker of one build.
type worker struct {
	// Label names the build in what the gate prints: "base" or "new".
	Label string
	// Bin is the ratelab binary it runs.
	Bin   string
	hello hello
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	// stderr keeps the last of what it wrote to its standard error, to
	// say why it stopped.
	stderr *tail
	done   chan error
	// stdout is the pipe out is read from, for its deadline; timeout is
	// how long past a sample's length the worker may take to answer (it
	// makes a workload and its limiters when first asked for them).
	stdout  interface{ SetReadDeadline(time.Time) error }
	timeout time.Duration
}

// startWorker starts bin as a worker ("bin worker args...") and reads its hello.
// A binary that is not a ratelab worker, or one that speaks another
// protocol, is refused with an error saying so.
func startWorker(ctx context.Context, label, bin string, args []string) (*worker, error) {
	w := &worker{Label: label, Bin: bin, stderr: &tail{}, done: make(chan error, 1), timeout: time.Minute}
	w.cmd = exec.CommandContext(ctx, bin, append([]string{"worker"}, args...)...)
	w.cmd.Stderr = w.stderr
	w.cmd.WaitDelay = time.Second
	var err error
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.out = bufio.NewReader(stdout)
	w.stdout, _ = stdout.(interface{ SetReadDeadline(time.Time) error })
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("gate: the %s build: %w", label, err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	line, err := w.read(w.timeout)
	if err != nil {
		return nil, w.failed(err)
	}
	var h hello
	if err := json.Unmarshal(line, &h); err != nil || h.Protocol == 0 {
		w.Close()
		return nil, fmt.Errorf("gate: the %s build (%s) is not a ratelab worker: it said %q", label, bin, firstLine(line))
	}
	if h.Protocol != protocol {
		w.Close()
		return nil, fmt.Errorf("gate: the %s build (%s) speaks the worker protocol version %d, this gate version %d: build both with one version of the gate",
			label, bin, h.Protocol, protocol)
	}
	w.hello = h
	return w, nil
}

// Limiters and Workloads are what the worker can time.
func (w *worker) Limiters() []string  { return w.hello.Limiters }
func (w *worker) Workloads() []string { return w.hello.Workloads }

// GoVersion is the Go version the worker's build was made with.
func (w *worker) GoVersion() string { return w.hello.GoVersion }

// Sample asks the worker for one sample.
func (w *worker) Sample(limiter, workload string, d time.Duration) (results.Sample, error) {
	req, err := json.Marshal(request{Limiter: limiter, Workload: workload, SampleNS: int64(d)})
	if err != nil {
		return results.Sample{}, err
	}
	if _, err := w.in.Write(append(req, '\n')); err != nil {
		return results.Sample{}, w.failed(err)
	}
	line, err := w.read(d + w.timeout)
	if err != nil {
		return results.Sample{}, w.failed(err)
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return results.Sample{}, fmt.Errorf("gate: the %s build answered %q: %w", w.Label, firstLine(line), err)
	}
	if rep.Error != "" || rep.Sample == nil {
		return results.Sample{}, fmt.Errorf("gate: the %s build could not time %s on %s: %s", w.Label, limiter, workload, rep.Error)
	}
	return *rep.Sample, nil
}

// read reads the worker's next line, waiting at most d for it.
func (w *worker) read(d time.Duration) ([]byte, error) {
	if w.stdout != nil {
		w.stdout.SetReadDeadline(time.Now().Add(d))
	}
	line, err := w.out.ReadBytes('\n')
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.cmd.Process.Kill()
		return nil, fmt.Errorf("it did not answer within %v", d)
	case errors.Is(err, io.EOF) && len(line) == 0:
		return nil, errors.New("it said nothing more")
	}
	return line, err
}

// failed is err, with how the worker ended, if it has, and the last of
// what it wrote to its standard error.
func (w *worker) failed(err error) error {
	w.in.Close()
	msg := fmt.Sprintf("gate: the %s build (%s): %v", w.Label, w.Bin, err)
	select {
	case werr := <-w.done:
		w.done <- werr
		if werr == nil {
			msg += "; it exited"
		} else {
			msg += "; it exited: " + werr.Error()
		}
	case <-time.After(2 * time.Second):
	}
	if s := strings.TrimSpace(w.stderr.String()); s != "" {
		msg += "; it said: " + s
	}
	return errors.New(msg)
}

// Close ends the worker: it ends at the end of its input, and is killed
// if it has not a second later.
func (w *worker) Close() error {
	w.in.Close()
	select {
	case err := <-w.done:
		w.done <- err
		return err
	case <-time.After(time.Second):
		w.cmd.Process.Kill()
		return <-w.done
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// tail keeps the last 2KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 2048; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
