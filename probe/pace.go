package probe

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// errOverRate is returned for a plan that would pass --max-rate.
var errOverRate = errors.New("probe: over --max-rate")

// pace returns the earliest instant from start (a zero start: now) at
// which plan can be sent without sending more than --max-rate in any one
// second, the requests sent before counted: at most a second on. A plan
// that passes it by itself is an error.
func (p *prober) pace(plan []request, start time.Time) (time.Time, error) {
	if start.IsZero() {
		start = p.x.now()
	}
	if n := busiest(plan); n > p.c.MaxRate {
		return start, fmt.Errorf("%w: %d requests would go in one second, more than --max-rate %d", errOverRate, n, p.c.MaxRate)
	}
	before := p.sentSince(start.Add(-time.Second))
	if len(before) == 0 {
		return start, nil
	}
	for delay := time.Duration(0); ; delay += 5 * time.Millisecond {
		if busiestWith(before, plan, start.Add(delay)) <= p.c.MaxRate {
			return start.Add(delay), nil
		}
	}
}

// thin returns plan, sent from start, without the requests that would
// pass --max-rate with those sent before and those it keeps.
func (p *prober) thin(plan []request, start time.Time) []request {
	window := p.sentSince(start.Add(-time.Second)) // the last second's, in order
	var kept []request
	for _, r := range plan {
		at := start.Add(r.At)
		for len(window) > 0 && at.Sub(window[0]) >= time.Second {
			window = window[1:]
		}
		if len(window) < p.c.MaxRate {
			kept = append(kept, r)
			window = append(window, at)
		}
	}
	return kept
}

// sentSince returns the instants the requests sent from from on were
// sent at, in order.
func (p *prober) sentSince(from time.Time) []time.Time {
	var out []time.Time
	for _, a := range p.r.all {
		if !a.Sent.IsZero() && !a.Sent.Before(from) {
			out = append(out, a.Sent)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// busiest is the most requests plan sends in any one second.
func busiest(plan []request) int { return busiestWith(nil, plan, time.Time{}) }

// busiestWith is the most requests in any one second of sent (sorted)
// and plan sent from start.
func busiestWith(sent []time.Time, plan []request, start time.Time) int {
	all := slices.Clone(sent)
	for _, r := range plan {
		all = append(all, start.Add(r.At))
	}
	slices.SortFunc(all, time.Time.Compare)
	most, lo := 0, 0
	for hi := range all {
		for all[hi].Sub(all[lo]) >= time.Second {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// spreadOf returns the 99th percentile of the answers' latency (but
// those held: a queue's release says nothing of the exchange's own time)
// and of the sender's lateness.
func spreadOf(all []answer, held func(answer) bool) (lat, late time.Duration) {
	var ls, ds []time.Duration
	for _, a := range all {
		if a.Decided() && !held(a) {
			ls = append(ls, a.Received.Sub(a.Sent))
		}
		if !a.Intended.IsZero() && !a.Sent.IsZero() {
			ds = append(ds, max(a.Sent.Sub(a.Intended), 0))
		}
	}
	return pct(ls, 0.99), pct(ds, 0.99)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(int(p*float64(len(ds))), len(ds)-1)]
}
