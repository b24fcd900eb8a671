package probe

import (
	"fmt"
	"strings"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
)

// Tables are the report as the lab's tables, from its rows (File): the
// fit, the accuracy of each workload, the checks, latency and pace.
func (r *Report) Tables() []results.Table { return results.Tables(r.File()) }

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
