// Package harness runs limiters against workloads and measures them.
package harness

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// ReplayLine is what Replay writes for each request: the request and the
// limiter's decision, times in seconds. RetryAfter is null when the request
// can never be admitted (its cost is above the limit).
type ReplayLine struct {
	T          float64  `json:"t"`
	Key        string   `json:"key"`
	N          int      `json:"n"`
	Allowed    bool     `json:"allowed"`
	Limit      int      `json:"limit"`
	Remaining  int      `json:"remaining"`
	RetryAfter *float64 `json:"retry_after"`
	ResetAfter float64  `json:"reset_after"`
	// Tier and DeniedBy are set for a tiered limiter: the key's tier
	// (absent for a key with an override of its own) and, for a denial,
	// the name of the limit that denied.
	Tier     string `json:"tier,omitempty"`
	DeniedBy string `json:"denied_by,omitempty"`
	// Actual is, for a request whose trace line says what it really cost,
	// that cost: the request was decided at its estimate, N, and is
	// settled at Actual when its response is done (the line's took).
	Actual *int `json:"actual,omitempty"`
}

// Tiered is what a limiter of tiers adds (package limiters/tiers): the
// key's tier, for a denial the name of the limit that denied, and the
// error when its backend did not decide.
type Tiered interface {
	Explain(ctx context.Context, key string, t time.Time, n int) (d limiters.Decision, tier, deniedBy string, err error)
}

// Fallible is what a limiter whose backend can fail adds (package
// limiters/redislimit): the decision at an explicit time, with the error
// when the backend did not make it.
type Fallible interface {
	DecideAt(ctx context.Context, key string, t time.Time, n int) (limiters.Decision, int, error)
}

// Replay decides each request of tr with l, at time zero plus the request's
// time, and writes one JSON object per request to w, in order. It stops at
// the first malformed line, returning its *workloads.TraceError after
// writing every line before it, when ctx ends, returning ctx's error, or
// when a Fallible limiter's backend fails, returning its error: a replay
// never prints a decision its backend did not make.
//
// A request whose line says what it really cost is reserved at its
// estimate and settled at its actual cost when its response was done, in
// time order with the requests after it (l must be a
// limiters.AtSettler; an error names the line otherwise).
func Replay(ctx context.Context, tr *workloads.TraceReader, l limiters.AtLimiter, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var err error
	var due settles
	settler, _ := l.(limiters.AtSettler)
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		var req workloads.Request
		req, err = tr.Read()
		if err != nil {
			break
		}
		if err = settleDue(settler, &due, req.T); err != nil {
			break
		}
		at := time.Unix(0, int64(req.T))
		var d limiters.Decision
		var tier, deniedBy string
		var actual *int
		if req.After != nil {
			if settler == nil {
				err = fmt.Errorf("line %d: an actual cost, but the limiter (%T) cannot settle", tr.Line(), l)
				break
			}
			r := settler.ReserveAt(req.Key, at, req.N)
			d = r.Decision
			if r.Allowed {
				heap.Push(&due, settle{at: req.T + req.After.Took, r: r, actual: int(req.After.Actual)})
			}
			if tl, ok := l.(interface{ TierOf(string) string }); ok {
				tier = tl.TierOf(req.Key)
			}
			a := int(req.After.Actual)
			actual = &a
		} else if tl, ok := l.(Tiered); ok {
			if d, tier, deniedBy, err = tl.Explain(ctx, req.Key, at, req.N); err != nil {
				break
			}
		} else if fl, ok := l.(Fallible); ok {
			if d, _, err = fl.DecideAt(ctx, req.Key, at, req.N); err != nil {
				break
			}
		} else {
			d = l.AllowAt(req.Key, at, req.N)
		}
		line := ReplayLine{
			Actual:     actual,
			Tier:       tier,
			DeniedBy:   deniedBy,
			T:          req.T.Seconds(),
			Key:        req.Key,
			N:          req.N,
			Allowed:    d.Allowed,
			Limit:      d.Limit,
			Remaining:  d.Remaining,
			ResetAfter: d.ResetAfter.Seconds(),
		}
		if d.RetryAfter != limiters.Never {
			s := d.RetryAfter.Seconds()
			line.RetryAfter = &s
		}
		if err = enc.Encode(line); err != nil {
			break
		}
	}
	if ferr := bw.Flush(); err == io.EOF || err == nil {
		err = ferr
	}
	return err
}

// settleDue settles, in time order, the reservations of due whose
// responses were done by t.
func settleDue(s limiters.AtSettler, due *settles, t time.Duration) error {
	for len(*due) > 0 && (*due)[0].at <= t {
		p := heap.Pop(due).(settle)
		if _, err := s.SettleAt(p.r, time.Unix(0, int64(p.at)), p.actual); err != nil {
			return err
		}
	}
	return nil
}
