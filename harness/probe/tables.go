package probe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters"
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
			{"fields on 200", "the first admitted answer", fieldList(r.Headers.OnAdmitted), ""},
			{"fields on refusal", "the first refused answer", fieldList(r.Headers.OnRefused), ""},
			{"declared policy", "a fresh key's first answer", or(r.Headers.Policy, "none"), declaredVerdict(r.Headers.Policy, r.Policy)},
			{"remaining", "after each admission on a fresh key", or(r.Headers.Remaining, "not advertised"), remainingVerdict(r.Headers.Remaining)},
		},
	}
	return []results.Table{fit, r.accuracyTable(), checks, r.timingTable()}
}

// accuracyTable is the fingerprint's workloads judged as the lab judges.
func (r *Report) accuracyTable() results.Table {
	t := results.Table{
		Name:  "probe-accuracy",
		Title: "Accuracy against " + r.Policy,
		Note: "The fingerprint's requests by workload, judged against the ideal (the sliding window log at the policy; a bucket of capacity C refilled at R judged as C per C/R) " +
			"following what the target decided: a false allow is an admission when the key had N admitted in the window before it, however late in its interval it was decided; " +
			"a false deny a refusal when it had fewer, however early. Ideal: what the log admits of the same requests on its own. " +
			"Most in any W: the most admitted in any interval of the window's length, over N, counting a request only when its send and its answer both fell in it.",
		Header: []string{"workload", "requests", "admitted", "ideal", "false allows", "false denies", "most in any W"},
		Left:   1,
	}
	for _, a := range r.Accuracy {
		t.Rows = append(t.Rows, []string{a.Workload, strconv.Itoa(a.Requests), strconv.Itoa(a.Admitted), strconv.Itoa(a.Ideal),
			strconv.Itoa(a.FalseAllows), strconv.Itoa(a.FalseDenies), results.Fixed(a.MaxWindowRatio, 2)})
	}
	return t
}

// timingTable is the latency of the answers and how the sender kept pace.
func (r *Report) timingTable() results.Table {
	tm := r.Timing
	row := func(name string, l Latency) []string {
		return []string{name, strconv.Itoa(l.N), results.Fixed(l.P50, 2), results.Fixed(l.P90, 2), results.Fixed(l.P99, 2), results.Fixed(l.Max, 2)}
	}
	return results.Table{
		Name:  "probe-timing",
		Title: "Latency and pace",
		Note: fmt.Sprintf("Milliseconds. Late: actual minus intended send time. The fingerprint asked %.0f requests/s and was sent at %.0f/s. %s",
			tm.AskedRate, tm.AchievedRate, paceVerdict(tm.KeptPace)),
		Header: []string{"", "requests", "p50", "p90", "p99", "max"},
		Left:   1,
		Rows:   [][]string{row("admitted", tm.Admitted), row("refused", tm.Refused), row("late", tm.Late)},
	}
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

// fieldList names the rate-limit fields present, the three X-RateLimit
// ones as one when all are.
func fieldList(f []string) string {
	if len(f) == 0 {
		return "none"
	}
	s := strings.Join(f, ", ")
	return strings.Replace(s, "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset", "X-RateLimit-Limit/Remaining/Reset", 1)
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// declaredVerdict compares what the fields declare with the policy the
// probe judged against, by rate and quota.
func declaredVerdict(declared, policy string) string {
	d, err1 := limiters.ParseLimit(declared)
	p, err2 := limiters.ParseLimit(policy)
	switch {
	case declared == "" || err1 != nil || err2 != nil:
		return ""
	case d.Quota() == p.Quota() && d.Window() == p.Window():
		return "agrees"
	}
	return "DIFFERS"
}

func remainingVerdict(remaining string) string {
	switch {
	case strings.HasPrefix(remaining, "off"):
		return "OFF"
	case remaining != "":
		return "ok"
	}
	return ""
}

func paceVerdict(kept bool) string {
	if kept {
		return "The sender kept pace."
	}
	return "THE SENDER FELL BEHIND (under 95% of the rate asked, or a request over a tenth of a refill late): the bursts and edges that tell the algorithms apart went out otherwise than planned, and the fit says less. Probe from a quieter host."
}
