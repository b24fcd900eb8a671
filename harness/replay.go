// Package harness runs limiters against workloads and measures them.
package harness

import (
	"bufio"
	"context"
	"encoding/json"
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
}

// Replay decides each request of tr with l, at time zero plus the request's
// time, and writes one JSON object per request to w, in order. It stops at
// the first malformed line, returning its *workloads.TraceError after
// writing every line before it, or when ctx ends, returning ctx's error.
func Replay(ctx context.Context, tr *workloads.TraceReader, l limiters.AtLimiter, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var err error
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		var req workloads.Request
		req, err = tr.Read()
		if err != nil {
			break
		}
		d := l.AllowAt(req.Key, time.Unix(0, int64(req.T)), req.N)
		line := ReplayLine{
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
