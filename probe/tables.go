package probe

import (
	"fmt"
	"strings"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// The probe's rows are the lab's: a results.File of rows of the mode
// "probe", whose tables, charts and report the lab's packages draw. A row
// is one of four kinds (its setting "kind"): a family's fit, a workload's
// accuracy, a check, or the exchange's timing.
const (
	modeName = "probe"
	kind     = "kind"

	kindFit      = "fit"
	kindAccuracy = "accuracy"
	kindCheck    = "check"
	kindTiming   = "timing"

	// A fit's metrics and settings.
	wrongSetting = "wrong"
	explained    = "explained"
	share        = "share"
	limit        = "limit"
	variant      = "variant"
	// A check's settings: what was sent, what came back, the verdict.
	sentSetting    = "sent"
	backSetting    = "back"
	verdictSetting = "verdict"
	// answerSetting is the probe's answer, on the first fit row.
	answerSetting = "answer"
	// An accuracy row's series: what the key had admitted in the trailing
	// window after each of its requests; and its setting, the judged N.
	inWindowName = "in_window"
	judgedN      = "judged_n"
	// An accuracy row's metric, for a bucket: the most admitted in any
	// interval over the bucket's promise.
	overPromiseName = "over_promise"
)

func isKind(k string) func(results.Row) bool {
	return func(r results.Row) bool { return r.Setting(kind) == k }
}

// Modes returns the probe's mode, which a report of its results file is
// given as a lab's is given the lab's: not run by bench, but tabled,
// charted and reported as the lab's modes are.
func Modes() report.Modes { return report.Modes{mode} }

// mode is the probe's.
var mode = report.Mode{
	Mode: results.Mode{
		Name:    modeName,
		About:   "a limiter behind HTTP, judged from outside (ratelab probe)",
		Order:   90,
		Outside: true,
	},
	Heading: "What the probe found",
	Tables: []report.TableSpec{
		{
			Name:   "probe-fit",
			Title:  "What the target behaves as",
			Note:   "Each family's best fit, replaying every decision the probe saw (calibration, fingerprint and the experiments asked): a decision is explained when the model decides alike at some instant between the request's send and its answer, the model following what the target decided. The token bucket, the leaky bucket and GCRA are one policy (bucket). A model is named only when one explains at least 99%.",
			Header: []string{"algorithm", "limit", "variant", "explained", "of"},
			Left:   3,
			Keep:   isKind(kindFit),
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, r.Setting(limit), r.Setting(variant),
					fmt.Sprintf("%.1f%%", 100*r.Get(share)), results.Count(r.Count(results.Decisions))}
			},
		},
		{
			Name:   "probe-wrong",
			Title:  "What each fit gets wrong",
			Note:   "The first decisions each family's best fit does not explain, in the order replayed: what the target did, where the model decides otherwise, seconds from the probe's start, and the key (the fingerprint's parts, the calibration's, the experiments').",
			Header: []string{"algorithm", "limit", "wrong", "the first of them"},
			Left:   4,
			Keep: func(r results.Row) bool {
				return r.Setting(kind) == kindFit && r.Setting(wrongSetting) != ""
			},
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, r.Setting(limit), results.Count(r.Count(results.Decisions) - r.Count(explained)), r.Setting(wrongSetting)}
			},
		},
		{
			Name:  "probe-accuracy",
			Title: "Accuracy against the policy",
			Note: "The fingerprint's requests by workload, judged against the ideal of the policy, following what the target decided: for a window algorithm the sliding window log at N per W " +
				"(a false allow is an admission when the key had N admitted in the window before it, however late in its interval it was decided; a false deny a refusal when it had fewer, however early); " +
				"for a bucket the bucket itself, whose promise is at most C + R·t in any interval t. Ideal: what the ideal admits of the same requests on its own. " +
				"Most in any W: the most admitted in any interval of the window's length, over N, counting a request only when its send and its answer both fell in it (for a bucket, the window view C per C/R, which a bucket keeping its promise exceeds). " +
				"Over its promise: for a bucket, the most admitted in any interval over C + R·t.",
			Header: []string{"workload", "requests", "admitted", "ideal", "false allows", "false denies", "most in any W", "over its promise"},
			Left:   1,
			Keep:   isKind(kindAccuracy),
			Cells: func(r results.Row) []string {
				a, _ := r.AccuracyOf()
				promise := ""
				if v, ok := r.Value(overPromiseName); ok {
					promise = report.Fixed(v, 2)
				}
				return []string{r.Workload, results.Count(r.Count(results.Decisions)), results.Count(a.Admitted), results.Count(a.Ideal),
					results.Count(a.FalseAllow), results.Count(a.FalseDeny), report.Fixed(a.MaxWindowRatio, 2), promise}
			},
		},
		{
			Name:   "probe-checks",
			Title:  "Checks",
			Header: []string{"check", "what was sent", "what came back", "verdict"},
			Left:   4,
			Keep:   isKind(kindCheck),
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, r.Setting(sentSetting), r.Setting(backSetting), r.Setting(verdictSetting)}
			},
		},
		{
			Name:   "probe-timing",
			Title:  "Latency and pace",
			Note:   "Milliseconds. Late: actual minus intended send time, the sender's.",
			Header: []string{"", "requests", "p50", "p90", "p99", "max"},
			Left:   1,
			Keep:   isKind(kindTiming),
			Cells: func(r results.Row) []string {
				l, _ := r.LatencyOf(r.Limiter)
				n := r.Count(results.Decisions)
				return []string{r.Workload, results.Count(n), ms3(l.P50), ms3(l.P90), ms3(l.P99), ms3(l.Max)}
			},
		},
	},
	Charts: charts,
	Picks:  picks,
	Page:   report.Page{Title: "ratelab probe: a limiter behind HTTP, judged from outside", Of: "A probe of", Target: "Target"},
}

func ms3(ns float64) string { return report.Fixed(ns/1e6, 2) }

// picks are the probe's answers, the first lines of its page: what the
// target behaves as, and which checks it failed (a verdict in capitals).
func picks(_ *results.File, rows []results.Row) []report.Pick {
	var out []report.Pick
	var failed, checks []string
	for _, r := range rows {
		switch r.Setting(kind) {
		case kindFit:
			if a := r.Setting(answerSetting); a != "" {
				out = append(out, report.Pick{Need: "What it behaves as", Limiter: a, Why: strings.TrimPrefix(r.Note, "Verdict: "+a+". ")})
			}
		case kindCheck:
			checks = append(checks, r.Limiter)
			if v, _, _ := strings.Cut(r.Setting(verdictSetting), " "); v != "" && strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ:") == "" {
				failed = append(failed, r.Limiter)
			}
		}
	}
	if len(checks) > 0 {
		p := report.Pick{Need: "Its checks", Limiter: "all pass", Why: fmt.Sprintf("Of %d checks (%s), none failed.", len(checks), strings.Join(checks, ", "))}
		if len(failed) > 0 {
			p.Limiter = "failed: " + strings.Join(failed, ", ")
			p.Why = fmt.Sprintf("%d of %d checks failed; the checks table says what was sent and what came back.", len(failed), len(checks))
		}
		out = append(out, p)
	}
	return out
}

// Tables are the report as the lab's tables, from its rows (File): the
// fit, the accuracy of each workload, the checks, latency and pace.
func (r *Report) Tables() []report.Table { return report.Tables(r.File(), Modes()) }
