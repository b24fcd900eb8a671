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

	"github.com/ratelab/ratelab/internal/server"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

// Replay decides each request of tr with l, at time zero plus the request's
// time, and writes one JSON object per request to w, in order: its time,
// the request and the decision, as ratelab serve echoes them (server.Echo).
// Explain adds to each line the key's tier and, for a denial, the name of
// the limit that denied (for the tiers of a configuration). It stops at the
// first malformed line, returning its *workloads.TraceError after writing
// every line before it, when ctx ends, returning ctx's error, or when the
// limiter does not decide (its backend failed), returning its error: a
// replay never prints a decision its backend did not make.
//
// A request whose line says what it really cost is reserved at its
// estimate and settled at its actual cost (its line's actual) when its
// response was done, in time order with the requests after it (l must be
// a limiters.Settler; an error names the line otherwise).
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
		line := server.EchoOf(req.Key, req.N, d)
		t := req.T.Seconds()
		line.T, line.Actual = &t, actual
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
