package probe

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// File is r as the lab's results: rows of the mode "probe", which the
// lab's tables, charts and report read.
func (r *Report) File() *results.File {
	f := &results.File{Schema: results.Schema, Meta: results.Meta{
		GoVersion: runtime.Version(), CPU: results.CPUModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start: r.Start, Elapsed: results.Seconds(r.Elapsed),
		Target: fmt.Sprintf("%s (users by %s; %s)", r.Target, r.Key, r.Verdict.Text),
	}}
	for _, rows := range [][]results.Row{r.fitRows(), r.accuracyRows(), r.checkRows(), r.timingRows()} {
		f.Rows = append(f.Rows, rows...)
	}
	return f
}

// fitRows are the fit's: a row a family's best model, the first with the
// verdict.
func (r *Report) fitRows() []results.Row {
	var out []results.Row
	for i, ft := range r.Fit {
		name := string(ft.Algorithm)
		if ft.Algorithm.IsBucket() {
			name = "bucket"
		}
		row := results.Row{Mode: modeName, Limiter: name, Algorithm: string(ft.Algorithm)}
		row.Set(kind, kindFit)
		row.Set(limit, ft.Limit)
		row.Set(variant, or(strings.Join(ft.Variants, ", "), "exact"))
		if ft.Algorithm == NoLimit {
			row.Set(variant, "")
		}
		if i == 0 {
			row.Note = r.verdictNote()
			row.Set(answerSetting, r.Verdict.Text)
		}
		row.Set(wrongSetting, strings.Join(ft.Wrong[:min(len(ft.Wrong), 3)], "; "))
		row.Add(explained, results.UnitCount, float64(ft.Explained))
		row.Add(results.Decisions, results.UnitCount, float64(ft.Decisions))
		row.Add(share, results.UnitFraction, ft.Share)
		out = append(out, row)
	}
	return out
}

// accuracyRows are the target's accuracy on each workload, judged
// against the policy named (or given), with what the window it kept held.
func (r *Report) accuracyRows() []results.Row {
	var out []results.Row
	series := r.inWindowSeries()
	for i, a := range r.Accuracy {
		row := results.Row{Mode: modeName, Workload: a.Workload, Limiter: "target"}
		row.Set(kind, kindAccuracy)
		if i == 0 {
			row.Note = "Judged against " + r.judgedText() + "."
		}
		if a.Note != "" {
			row.Note = strings.TrimSpace(row.Note + " " + a.Workload + ": " + a.Note + ".")
		}
		row.Add(results.Decisions, results.UnitCount, float64(a.Requests))
		n := float64(max(a.Requests, 1))
		row.SetAccuracy(results.Accuracy{Admitted: int64(a.Admitted), Ideal: int64(a.Ideal), FalseAllow: int64(a.FalseAllows), FalseDeny: int64(a.FalseDenies),
			FalseAllowRate: float64(a.FalseAllows) / n, FalseDenyRate: float64(a.FalseDenies) / n, MaxWindowRatio: a.MaxWindowRatio})
		if r.judged.Algorithm.IsBucket() {
			row.Add(overPromiseName, results.UnitRatio, a.MostOverPromise)
		}
		if s, ok := series[a.Workload]; ok {
			row.AddSeries(s)
			row.SetFloat(judgedN, float64(r.judged.quota()))
		}
		out = append(out, row)
	}
	return out
}

// checkRows are the checks', a row each: what was sent, what came back,
// the verdict.
func (r *Report) checkRows() []results.Row {
	var out []results.Row
	for i, c := range r.checks() {
		row := results.Row{Mode: modeName, Limiter: c[0]}
		row.Set(kind, kindCheck)
		if i == 0 {
			row.Note = fmt.Sprintf("%d requests in %.1fs; %d answered neither with an admission (2xx, 3xx) nor with the refusal, or not at all, counted neither as admitted nor as refused.", r.Requests, r.Elapsed, r.Undecided)
		}
		row.Set(sentSetting, c[1])
		row.Set(backSetting, c[2])
		row.Set(verdictSetting, c[3])
		out = append(out, row)
	}
	return out
}

// timingRows are the answers' latencies: admitted (at once and held, for
// a queue), refused, and how late the requests went.
func (r *Report) timingRows() []results.Row {
	var out []results.Row
	timings := []struct {
		name string
		l    Latency
	}{{"admitted", r.Timing.Admitted}, {"refused", r.Timing.Refused}, {"late", r.Timing.Late}}
	if r.Timing.Held.N > 0 {
		timings = append(timings[:1], append([]struct {
			name string
			l    Latency
		}{{"admitted at once", r.Timing.Unheld}, {"held", r.Timing.Held}}, timings[1:]...)...)
	}
	for _, t := range timings {
		row := results.Row{Mode: modeName, Workload: t.name, Limiter: t.name}
		row.Set(kind, kindTiming)
		if t.name == "held" && r.Queue != nil {
			q := r.Queue
			row.Note = fmt.Sprintf("Held: an admission answered past %v (twice the target's own time, %v, and 20ms), less that time: when the queue let it go. %d of %d on the schedule of %s (within 10%% or 20ms).",
				q.Threshold.Round(time.Millisecond), q.Service.Round(time.Microsecond), q.OnSchedule, q.Checked, q)
		}
		if t.name == "late" {
			row.Note = fmt.Sprintf("The fingerprint asked %.0f requests/s and was sent at %.0f/s. %s", r.Timing.AskedRate, r.Timing.AchievedRate, paceVerdict(r.Timing.KeptPace))
			if len(r.fp) == 0 {
				row.Note = "No fingerprint was sent (a limit in flight is asked otherwise, or the probe stopped before it)."
			}
		}
		row.Add(results.Decisions, results.UnitCount, float64(t.l.N))
		row.SetLatency(t.name, results.Quantiles{P50: t.l.P50 * 1e6, P90: t.l.P90 * 1e6, P99: t.l.P99 * 1e6, Max: t.l.Max * 1e6})
		out = append(out, row)
	}
	return out
}

// verdictNote is the fit table's note: the answer, what was declared
// against it, what the probe could not tell apart, and what it asked.
func (r *Report) verdictNote() string {
	v := r.Verdict
	parts := []string{"Verdict: " + v.Text + "."}
	if v.Expect != "" {
		parts = append(parts, "As --expect takes it: "+v.Expect+".")
	}
	if v.Declared != "" {
		parts = append(parts, "The target "+v.Declared+".")
	}
	if q := r.Queue; q != nil && q.Nginx != "" {
		parts = append(parts, "In nginx: "+q.Nginx)
	}
	for _, u := range v.Unresolved {
		parts = append(parts, "Not told apart: "+u+".")
	}
	if n := len(r.Asked); n > 0 {
		asked := 0
		for _, a := range r.Asked {
			asked += len(a.Asked)
		}
		parts = append(parts, fmt.Sprintf("Asked to tell the models apart: %d experiments in %d rounds.", asked, n))
	}
	return strings.Join(parts, " ")
}

// judgedText says what the accuracy was judged against.
func (r *Report) judgedText() string {
	m := r.judged
	switch {
	case m.Algorithm.IsBucket():
		return fmt.Sprintf("the bucket %s, its promise at most %d + %s·t in any interval t", m.Limit, m.quota(), limiters.Limit{N: m.Limit.N, Per: m.Limit.Per})
	case r.Verdict.Named:
		return fmt.Sprintf("%d per %v, the sliding log's ideal", m.quota(), m.Limit.Window())
	}
	return fmt.Sprintf("%d per %v (the policy given or declared; no model named)", m.quota(), m.Limit.Window())
}

// inWindowSeries is, for each workload of the fingerprint, what its key
// had admitted in the trailing window of the judged length after each of
// its requests, at seconds from the fingerprint's first request: the
// chart's line, against N.
func (r *Report) inWindowSeries() map[string]results.Series {
	out := map[string]results.Series{}
	if len(r.fp) == 0 || r.judged.Algorithm == "" {
		return out
	}
	w := r.judged.Limit.Window()
	start := r.fp[0].Sent
	for _, a := range r.fp {
		if !a.Sent.IsZero() && a.Sent.Before(start) {
			start = a.Sent
		}
	}
	for _, wl := range workloadOf {
		var mine []answer
		for _, a := range r.fp {
			if a.Key == r.prefix+wl.part && a.Decided() {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 {
			continue
		}
		slices.SortStableFunc(mine, func(a, b answer) int { return a.Sent.Compare(b.Sent) })
		s := results.Series{Name: inWindowName, Unit: results.UnitCount, XUnit: results.UnitSeconds}
		var admitted []time.Time
		for _, a := range mine {
			if a.Admitted {
				admitted = append(admitted, a.Sent)
			}
			n := 0
			for _, t := range admitted {
				if t.After(a.Sent.Add(-w)) {
					n++
				}
			}
			s.X = append(s.X, a.Sent.Sub(start).Seconds())
			s.Y = append(s.Y, float64(n))
		}
		out[wl.workload] = s
	}
	return out
}

// charts are the probe's figures: what each workload's key had admitted
// in the trailing window over time, against N; and the share of the
// decisions each family's best fit explains.
func charts(_ *results.File, rows []results.Row) []report.Figure {
	var panels []report.Panel
	var fits []results.Row
	for _, r := range rows {
		switch r.Setting(kind) {
		case kindFit:
			fits = append(fits, r)
		case kindAccuracy:
			s := r.Curve(inWindowName)
			if s == nil {
				continue
			}
			line := report.Line{Name: "admitted in the last W"}
			for i := range s.X {
				line.Points = append(line.Points, report.XY{X: s.X[i], Y: s.Y[i]})
			}
			panels = append(panels, report.Panel{Title: r.Workload, X: report.Axis{Label: "seconds"}, Y: report.Axis{Label: "admitted", Min: 0, Max: r.SettingFloat(judgedN)},
				Lines: []report.Line{line}, Steps: true, Marks: []report.Mark{{Name: "N, the policy", At: r.SettingFloat(judgedN)}}})
		}
	}
	var out []report.Figure
	if len(panels) > 0 {
		out = append(out, report.Figure{Name: "probe-windows", Title: "What the target admitted in any window, against the policy",
			Caption: "For each workload of the fingerprint, on its own key: after each request, how many the key had been admitted in the window before it (the judged W). The dashed line is N: a limiter that keeps to its policy stays on or under it; a fixed window at its edge goes to 2N.",
			Panels:  panels, Cols: 2, Width: 9, RowHeight: 2.6})
	}
	if len(fits) > 0 {
		b := &report.Bars{Series: []string{"explained"}, Digits: 1}
		for _, r := range fits {
			b.Groups = append(b.Groups, r.Limiter+" "+r.Setting(limit))
			b.Values = append(b.Values, []float64{100 * r.Get(share)})
		}
		out = append(out, report.Figure{Name: "probe-fit", Title: "What the target behaves as",
			Caption: "The share of every decision the probe saw that each family's best fit explains, in percent: the best names the algorithm the target runs when one explains 99% or more (the three buckets are one policy).",
			Panels:  []report.Panel{{X: report.Axis{Label: "% of decisions explained", Min: 0, Max: 100}, Bars: b}}, Width: 7, NoLegend: true})
	}
	return out
}

// checks are the check table's rows: check, what was sent, what came
// back, verdict.
func (r *Report) checks() [][]string {
	c := r.Concurrency
	concurrency := "ok"
	if c.OverAdmits() {
		concurrency = "OVER-ADMITS"
	}
	out := [][]string{{"refusal", "what a refused request is answered", r.Refusal.String(), ""}}
	if c.Sent > 0 { // else not run, and said below
		out = append(out, []string{"concurrency", strconv.Itoa(c.Sent) + " at once on a fresh key", fmt.Sprintf("%d admitted; %s allows %d", c.Admitted, or(r.Policy, "the policy"), max(c.Allowed, c.Quota)), concurrency})
	}
	for _, ra := range r.RetryAfter {
		out = append(out, []string{"Retry-After", "keys spent " + ra.Spent + ", then at 80% of the wait and at it", retryAfterSeen(ra), ra.Verdict})
	}
	out = append(out,
		[]string{"key isolation", "a fresh key right after another was exhausted", isolation(r.Keys.Isolated), isolationVerdict(r.Keys.Isolated)},
	)
	if r.Keys.Keyless != "" { // else not run, and said below
		out = append(out, []string{"no key", "twice the quota without the key", r.Keys.Keyless, ""})
	}
	out = append(out,
		[]string{"fields on 200", "the first admitted answer", fieldList(r.Headers.OnAdmitted), ""},
		[]string{"fields on refusal", "the first refused answer", fieldList(r.Headers.OnRefused), ""},
		[]string{"declared policy", "a fresh key's first answer", or(r.Claims.PolicyText, "none"), declaredVerdict(r)},
		[]string{"remaining", "one at a time on a fresh key, each after the last answer", remainingSeen(r.Remaining), remainingVerdict(r.Remaining)},
	)
	for _, m := range r.Headers.Malformed {
		out = append(out, []string{"malformed field", "any answer", m, "MALFORMED"})
	}
	for _, s := range r.Skipped {
		what, why, _ := strings.Cut(s, ": not run: ")
		out = append(out, []string{"not run", what, why, ""})
	}
	return out
}

func retryAfterSeen(ra RetryAfter) string {
	if ra.Header == "" {
		return "no wait advertised"
	}
	s := fmt.Sprintf("%s %gs", ra.Header, ra.Advertised)
	if ra.AdvertisedEarly != 0 && ra.AdvertisedEarly != ra.Advertised {
		s = fmt.Sprintf("%s %gs and %gs (the two keys)", ra.Header, ra.AdvertisedEarly, ra.Advertised)
	}
	if ra.Needed > 0 {
		s += fmt.Sprintf(" (needed %.2fs)", ra.Needed)
	}
	return s + fmt.Sprintf("; at 80%%: %s, at the wait: %s", or(ra.Early, "not asked"), or(ra.AtWait, "not asked"))
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
	s = strings.Replace(s, "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset", "RateLimit-Limit/Remaining/Reset", 1)
	return strings.Replace(s, "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset", "X-RateLimit-Limit/Remaining/Reset", 1)
}

// declaredVerdict compares what the fields declare with the verdict.
func declaredVerdict(r *Report) string {
	switch {
	case r.Claims.PolicyText == "" || !r.Verdict.Named:
		return ""
	case strings.HasPrefix(r.Verdict.Declared, "declares"):
		return "DIFFERS"
	}
	return "agrees"
}

func remainingSeen(rem Remaining) string {
	switch {
	case strings.HasPrefix(rem.Verdict, "not asked"):
		return rem.Verdict
	case rem.Checked == 0:
		return "not advertised"
	}
	seen := make([]string, len(rem.Seen))
	for i, n := range rem.Seen {
		seen[i] = strconv.Itoa(n)
	}
	return strings.Join(seen, ", ")
}

func remainingVerdict(rem Remaining) string {
	switch {
	case strings.HasPrefix(rem.Verdict, "off"):
		return "OFF: " + strings.TrimPrefix(rem.Verdict, "off: ")
	case rem.Verdict == "exact":
		return "exact"
	}
	return ""
}

func paceVerdict(kept bool) string {
	if kept {
		return "The sender kept pace."
	}
	return "THE SENDER FELL BEHIND (under 95% of the rate asked, or a request over a tenth of a refill late): the bursts and edges that tell the algorithms apart went out otherwise than planned, and the fit says less. Probe from a quieter host."
}
