package probe

import (
	"fmt"
	"strconv"

	"github.com/ratelab/ratelab/results"
)

// Tables are the report as the lab's tables: the fit, then the checks.
func (r *Report) Tables() []results.Table {
	fit := results.Table{
		Name:   "probe-fit",
		Title:  "What the target behaves as",
		Note:   fmt.Sprintf("Each algorithm's best fit near %s, replaying the fingerprint's decisions: a decision is explained when the model decides alike at some instant between the request's send and its answer, the model following what the target decided. The token bucket, the leaky bucket and GCRA are one policy.", r.Policy),
		Header: []string{"algorithm", "limit", "windows", "refusals", "explained", "of"},
		Left:   4,
	}
	for _, f := range r.Fit {
		windows, refusals := "epoch", "not counted"
		if f.Anchored {
			windows = "first request"
		}
		if f.Algorithm.IsBucket() {
			windows = ""
		}
		if f.CountsRefused {
			refusals = "counted"
		}
		fit.Rows = append(fit.Rows, []string{string(f.Algorithm), f.Limit, windows, refusals, fmt.Sprintf("%.1f%%", 100*f.Share), strconv.Itoa(f.Decisions)})
	}
	c, ra := r.Concurrency, r.RetryAfter
	concurrency := "ok"
	if c.OverAdmits() {
		concurrency = "OVER-ADMITS"
	}
	checks := results.Table{
		Name:   "probe-checks",
		Title:  "Checks",
		Note:   fmt.Sprintf("%d requests in %.1fs; %d answered with a 5xx or not at all, counted neither as admitted nor as refused.", r.Requests, r.Elapsed, r.Undecided),
		Header: []string{"check", "what was sent", "what came back", "verdict"},
		Left:   4,
		Rows: [][]string{
			{"concurrency", fmt.Sprintf("%d at once on a fresh key", c.Sent), fmt.Sprintf("%d admitted; the fitted policy allows %d", c.Admitted, max(c.Allowed, c.Quota)), concurrency},
			{"Retry-After", "a quota and one more, then at 80% of the wait and at it", retryAfterSeen(ra), ra.Verdict},
			{"key isolation", "a fresh key right after another was exhausted", isolation(r.Keys.Isolated), isolationVerdict(r.Keys.Isolated)},
			{"no key", "twice the quota without the key", r.Keys.Keyless, ""},
		},
	}
	return []results.Table{fit, checks}
}

func retryAfterSeen(ra RetryAfter) string {
	if ra.Header == "" {
		return "no wait advertised"
	}
	return fmt.Sprintf("%s %gs; at 80%%: %s, at the wait: %s", ra.Header, ra.Advertised, ra.Early, ra.AtWait)
}

func isolation(admitted bool) string {
	if admitted {
		return "admitted"
	}
	return "refused"
}

func isolationVerdict(isolated bool) string {
	if isolated {
		return "ok"
	}
	return "NOT ISOLATED"
}
