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

// replayLine is what Replay writes for each request: the request and the
// limiter's decision, times in seconds. RetryAfter is null when the request
// can never be admitted (its cost is above the limit).
type replayLine struct {
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

// Replay decides each request of tr with l, at time zero plus the request's
// time, and writes one JSON object per request to w, in order; explain
// adds to each line the key's tier and, for a denial, the name of the
// limit that denied (for the tiers of a configuration). It stops at the
// first malformed line, returning its *workloads.TraceError after writing
// every line before it, when ctx ends, returning ctx's error, or when the
// limiter does not decide (its backend failed), returning its error: a
// replay never prints a decision its backend did not make.
//
// A request whose line says what it really cost is reserved at its
// estimate and settled at its actual cost when its response was done, in
// time order with the requests after it (l must be a limiters.Settler; an
// error names the line otherwise).
func Replay(ctx context.Context, tr *workloads.TraceReader, l limiters.Limiter, explain bool, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var err error
	var due settles
	settler, _ := l.(limiters.Settler)
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
		r := limiters.Request{Key: req.Key, N: req.N, At: time.Unix(0, int64(req.T))}
		var d limiters.Decision
		var actual *int
		if req.After != nil {
			if settler == nil {
				err = fmt.Errorf("line %d: an actual cost, but the limiter (%T) cannot settle", tr.Line(), l)
				break
			}
			var res limiters.Reservation
			if res, err = settler.Reserve(ctx, r); err != nil {
				break
			}
			d = res.Decision()
			if res.Allowed() {
				heap.Push(&due, settle{at: req.T + req.After.Took, r: res, actual: int(req.After.Actual)})
			}
			a := int(req.After.Actual)
			actual = &a
		} else if d, err = l.Decide(ctx, r); err != nil {
			break
		}
		line := replayLine{
			Actual:     actual,
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
		if explain {
			line.Tier = d.Tier()
			if by, ok := d.DeniedBy(); ok && actual == nil { // a reservation's line names its tier only
				line.DeniedBy = by.Name
			}
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
func settleDue(s limiters.Settler, due *settles, t time.Duration) error {
	for len(*due) > 0 && (*due)[0].at <= t {
		p := heap.Pop(due).(settle)
		if _, err := s.Settle(context.Background(), limiters.Settlement{Reservation: p.r, Actual: p.actual, At: time.Unix(0, int64(p.at))}); err != nil {
			return err
		}
	}
	return nil
}
