package harness

import (
	"context"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/slidinglog"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads"
)

// simulate decides every arrival of w with d, at time zero plus the
// arrival's time, and returns which were admitted, in arrival order. The
// harness owns the clock: the result depends only on w and on d.
func simulate(w *workloads.Workload, d limiters.Limiter) []bool {
	allowed := make([]bool, len(w.Arrivals))
	keys := keysOf(w)
	ctx := context.Background()
	for i, a := range w.Arrivals {
		dec, _ := d.Decide(ctx, limiters.Request{Key: keys[a.User], N: int(a.N), At: time.Unix(0, int64(a.T))})
		allowed[i] = dec.Allowed
	}
	return allowed
}

// decideAt is l's decision of n events for key at t (a denial when l did
// not decide).
func decideAt(l limiters.Limiter, key string, t time.Time, n int) limiters.Decision {
	d, _ := l.Decide(context.Background(), limiters.Request{Key: key, N: n, At: t})
	return d
}

// keysOf returns every user's key, indexed by user.
func keysOf(w *workloads.Workload) []string {
	keys := make([]string, w.Params.Users)
	for u := range keys {
		keys[u] = w.Key(int32(u))
	}
	return keys
}

// idealOf returns the ideal's decisions for "limit" on w: the sliding window
// log, which admits a request exactly when what its key was admitted in the
// last W, plus the request, is at most N.
func idealOf(w *workloads.Workload, limit limiters.Limit) ([]bool, error) {
	l, err := slidinglog.New(limit, limiters.WithSweepInterval(-1))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return simulate(w, l), nil
}

// judge measures allowed against the ideal's decisions on the same
// arrivals, judged as "limit".
func judge(w *workloads.Workload, allowed, ideal []bool, limit limiters.Limit) results.Accuracy {
	var acc results.Accuracy
	for i := range allowed {
		switch {
		case allowed[i] && !ideal[i]:
			acc.FalseAllow++
		case !allowed[i] && ideal[i]:
			acc.FalseDeny++
		}
		if allowed[i] {
			acc.Admitted++
		}
		if ideal[i] {
			acc.Ideal++
		}
	}
	if n := float64(len(allowed)); n > 0 {
		acc.FalseAllowRate = float64(acc.FalseAllow) / n
		acc.FalseDenyRate = float64(acc.FalseDeny) / n
	}
	most, _, _ := maxInWindow(w, allowed, limit.Per)
	acc.MaxWindowRatio = float64(most) / float64(limit.N)
	return acc
}

// edgeWindows is how many windows an edge series spans.
const edgeWindows = 4

// inWindow names the edge series.
const inWindow = "in_window"

// edgeSeries returns what one user had admitted in the trailing window of
// length, in cost, after each of its requests (at X seconds), over windows
// windows: the series inWindow. The user and the windows are those of the
// most any user had admitted in a window (maxInWindow), the windows
// aligned to the epoch and, where they can be, centred on it: the stretch
// that holds the figure the accuracy table gives.
func edgeSeries(w *workloads.Workload, allowed []bool, length time.Duration, windows int) results.Series {
	s := results.Series{Name: inWindow, Unit: "cost", XUnit: results.UnitSeconds}
	_, user, at := maxInWindow(w, allowed, length)
	begin := max(0, (at/length-time.Duration(windows/2))*length)
	end := begin + time.Duration(windows)*length
	var mine []workloads.Arrival // the user's admitted requests, in order
	sum, lo := int64(0), 0
	for i, a := range w.Arrivals {
		if int(a.User) != user || a.T <= begin-length {
			continue
		}
		if a.T >= end {
			break
		}
		if allowed[i] {
			mine = append(mine, a)
			sum += int64(a.N)
		}
		for lo < len(mine) && mine[lo].T <= a.T-length {
			sum -= int64(mine[lo].N)
			lo++
		}
		if a.T >= begin {
			s.X = append(s.X, a.T.Seconds())
			s.Y = append(s.Y, float64(sum))
		}
	}
	return s
}

// maxInWindow returns the most cost any one user had admitted in an
// interval (t - length, t], and the first user and t that reached it.
func maxInWindow(w *workloads.Workload, allowed []bool, length time.Duration) (most int64, user int, at time.Duration) {
	// Group the admitted arrivals by user (a counting sort keeps each
	// user's in time order), then slide a window over each user's.
	start := make([]int32, w.Params.Users+1)
	for i, a := range w.Arrivals {
		if allowed[i] {
			start[a.User+1]++
		}
	}
	for u := 1; u < len(start); u++ {
		start[u] += start[u-1]
	}
	byUser := make([]workloads.Arrival, start[len(start)-1])
	next := append([]int32(nil), start[:len(start)-1]...)
	for i, a := range w.Arrivals {
		if allowed[i] {
			byUser[next[a.User]] = a
			next[a.User]++
		}
	}
	for u := 0; u < w.Params.Users; u++ {
		mine := byUser[start[u]:start[u+1]]
		sum, lo := int64(0), 0
		for _, a := range mine {
			sum += int64(a.N)
			for mine[lo].T <= a.T-length {
				sum -= int64(mine[lo].N)
				lo++
			}
			if sum > most {
				most, user, at = sum, u, a.T
			}
		}
	}
	return most, user, at
}
