package plan

import (
	"context"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// TestFloors times, on the log RATELAB_PLAN_LOG names (skipped without
// one), what a plan's time is made of: reading the log alone (the parse
// floor), and deciding its requests alone, from memory, with every
// algorithm at ten limits (the decide floor), one goroutine and all.
// It asserts only that the floors decided what the plan did; the times
// are for the reader (go test -v).
func TestFloors(t *testing.T) {
	path := os.Getenv("RATELAB_PLAN_LOG")
	if path == "" {
		t.Skip("RATELAB_PLAN_LOG names no log")
	}
	open := func() *accesslog.Reader {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		r, err := accesslog.NewReader([]accesslog.Input{{Name: path, R: f}}, accesslog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// each reads a log, giving each request to f with its client's
	// number and key.
	each := func(f func(e *accesslog.Entry, id int32, key string)) *accesslog.Reader {
		r, cs := open(), newClients(int64(time.Second))
		for {
			e, err := r.Read()
			if err == io.EOF {
				return r
			}
			if err != nil {
				t.Fatal(err)
			}
			id, key := cs.see(&e, true)
			f(&e, id, key)
		}
	}
	// The parse floor: the log read, its clients counted, nothing kept.
	t0 := time.Now()
	r := each(func(*accesslog.Entry, int32, string) {})
	t.Logf("parse (and count clients): %d lines in %v, %.0f ns a line", r.Lines(), time.Since(t0), float64(time.Since(t0))/float64(r.Lines()))
	// The requests, kept in memory for the decide floor.
	var reqs []request
	each(func(e *accesslog.Entry, id int32, key string) {
		reqs = append(reqs, request{id: id, n: int32(e.N), at: e.At, key: key})
	})
	var lims []limiters.Limit
	for _, n := range []int{1, 2, 3, 5, 8, 13, 22, 36, 60, 100} {
		lims = append(lims, limiters.PerSecond(n))
	}
	for _, workers := range []int{1, 2, 10} {
		c := Config{Limits: lims, Workers: workers}
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
		d, err := newDeciders(c)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for i := 0; i < len(reqs); i += batchSize {
			b := d.next()
			b.reqs = append(b.reqs, reqs[i:min(i+batchSize, len(reqs))]...)
			d.send(b)
		}
		d.wait()
		took := time.Since(t0)
		n := len(reqs) * len(lims) * len(c.Algorithms)
		t.Logf("decide, %d goroutines: %d decisions in %v, %.1f ns a decision", workers, n, took, float64(took)/float64(n))
		d.close()
	}
	reqs = nil
	runtime.GC()
	p, err := Run(context.Background(), open(), Config{Limits: lims}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the plan: %v", p.Took)
	if p.Decided != r.Requests() {
		t.Errorf("the plan decided %d, the floors %d", p.Decided, r.Requests())
	}
}
