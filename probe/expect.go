package probe

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Expect is what a team says its limiter does, for CI: an algorithm (any
// of the three buckets stands for all three; none, any algorithm) and a
// limit, and how far the measured behaviour may stray, as a fraction.
type Expect struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// Queue, for a bucket with a queue ("10/s burst 9 queue 4": 9 at once,
	// 4 more held), is how many it holds; Limit's burst is then what it
	// admits at once and holds together, as its decisions go.
	Queue int
	// Also is a second, longer limit expected beside the first ("5/s,
	// 40/min"), of AlsoAlgorithm (empty: any); zero: none.
	Also          limiters.Limit
	AlsoAlgorithm limiters.Algorithm
	Tolerance     float64
}

// ParseQueued reads a limit that may end with a queue, as --limit and
// --expect write a bucket that delays: "10/s burst 9 queue 4" is 9 at
// once and 4 more held, a bucket of 13 as its decisions go (the limit
// returned), and 4.
func ParseQueued(s string) (limiters.Limit, int, error) {
	rest, q, ok := strings.Cut(strings.TrimSpace(s), " queue ")
	l, err := limiters.ParseLimit(rest)
	if err != nil || !ok {
		return l, 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(q))
	if err != nil || n < 1 {
		return l, 0, fmt.Errorf("probe: %q: after queue want how many it holds, as in \"10/s burst 9 queue 4\"", s)
	}
	if l.Burst == 0 {
		l.Burst = l.N // a rate written alone admits N at once
	}
	l.Burst += n
	return l, n, nil
}

// ParseExpect reads --expect: a limit in the lab's syntax, after an
// algorithm's name or not: "gcra 10/s burst 6", "fixed-window 100/1m",
// "10/s".
func ParseExpect(s string, tolerance float64) (Expect, error) {
	e := Expect{Tolerance: tolerance}
	if math.IsNaN(tolerance) || tolerance < 0 || tolerance >= 1 {
		return e, fmt.Errorf("probe: --tolerance %v: want a fraction, 0 or more and under 1", tolerance)
	}
	rest := strings.TrimSpace(s)
	if first, second, ok := strings.Cut(rest, ","); ok {
		// Two limits at once: "5/s, 40/min", each after its algorithm's
		// name or not.
		e, err := ParseExpect(first, tolerance)
		if err != nil {
			return e, err
		}
		o, err := ParseExpect(second, tolerance)
		if err != nil {
			return e, err
		}
		if o.Queue > 0 || o.Also.N > 0 || o.Algorithm == InFlight || e.Algorithm == InFlight || o.Limit.Window() <= e.Limit.Window() {
			return e, fmt.Errorf("probe: --expect %q: want a second limit after the first, plain and longer, as in \"5/s, 40/min\"", s)
		}
		e.Also, e.AlsoAlgorithm = o.Limit, o.Algorithm
		return e, nil
	}
	if k, ok := strings.CutPrefix(rest, string(InFlight)+" "); ok {
		// A limit in flight: "in-flight 4", K at once.
		n, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || n < 1 {
			return e, fmt.Errorf("probe: --expect %q: want in-flight and how many at once, as in \"in-flight 4\"", s)
		}
		e.Algorithm, e.Limit = InFlight, limiters.Limit{N: n}
		return e, nil
	}
	if name, limit, ok := strings.Cut(rest, " "); ok && !strings.Contains(name, "/") {
		a, err := limiters.ParseAlgorithm(name)
		if err != nil {
			return e, fmt.Errorf("probe: --expect %q: %w", s, err)
		}
		e.Algorithm, rest = a, limit
	}
	l, q, err := ParseQueued(rest)
	if err != nil {
		return e, fmt.Errorf("probe: --expect %q: %w", s, err)
	}
	if q > 0 && e.Algorithm != "" && !e.Algorithm.IsBucket() {
		return e, fmt.Errorf("probe: --expect %q: a queue is a bucket's", s)
	}
	e.Queue = q
	if e.Algorithm != "" {
		if err := l.Validate(e.Algorithm); err != nil {
			return e, fmt.Errorf("probe: --expect %q: %w", s, err)
		}
	}
	e.Limit = l
	return e, nil
}

// String is the expectation as --expect takes it.
func (e Expect) String() string {
	if e.Algorithm == InFlight {
		return fmt.Sprintf("%s %d", InFlight, e.Limit.N)
	}
	l, queue := e.Limit.String(), ""
	if e.Queue > 0 {
		b := e.Limit
		b.Burst -= e.Queue
		l, queue = b.String(), fmt.Sprintf(" queue %d", e.Queue)
	}
	s := l + queue
	if e.Algorithm != "" {
		s = string(e.Algorithm) + " " + s
	}
	if e.Also.N > 0 {
		s += ", " + Expect{Algorithm: e.AlsoAlgorithm, Limit: e.Also}.String()
	}
	return s
}

// Strays returns what of r strays from e, one line each; none when the
// target behaves as expected: a model named (one explaining at least 99%
// of the decisions), of e's family (when e names an algorithm), its rate
// and its quota within the tolerance; no workload with more in a window
// than the algorithm allows (mostAllowed; for a bucket, more than its
// promise); no over-admission under concurrency; no Retry-After that
// lies; and keys kept apart.
func (r *Report) Strays(e Expect) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(r.Fit) == 0 {
		return []string{"nothing was decided: no fit to judge"}
	}
	best := r.Fit[0]
	if best.Algorithm == NoLimit {
		return []string{fmt.Sprintf("no limit: all %d decided requests were admitted, at up to %.0f a second", best.Decisions, r.Timing.AchievedRate)}
	}
	if !r.Verdict.Named {
		return []string{r.Verdict.Text}
	}
	if best.Algorithm == InFlight || e.Algorithm == InFlight {
		return r.straysInFlight(e)
	}
	if e.Algorithm != "" && family(best.Algorithm) != family(e.Algorithm) {
		add("algorithm: behaves as %s (%s), not %s", best.Algorithm, best.Limit, e.Algorithm)
	}
	fitted, err := limiters.ParseLimit(best.Limit)
	if err != nil {
		return append(out, fmt.Sprintf("the fit's limit %q: %v", best.Limit, err))
	}
	rate := func(l limiters.Limit) float64 { return float64(l.N) / l.Per.Seconds() }
	if off := rate(fitted)/rate(e.Limit) - 1; math.Abs(off) > e.Tolerance+1e-9 {
		add("rate: %s is %+.1f%% from %s, beyond %.1f%%", fitted, 100*off, e.Limit, 100*e.Tolerance)
	}
	if got, want := fitted.Quota(), e.Limit.Quota(); math.Abs(float64(got-want)) > e.Tolerance*float64(want)+1e-9 {
		add("quota: %d at once, expected %d", got, want)
	}
	near := func(got, want int) bool { return math.Abs(float64(got-want)) <= e.Tolerance*float64(want)+1e-9 }
	out = append(out, r.straysSecond(e)...)
	switch q := r.Queue; {
	case q == nil && e.Queue > 0:
		add("queue: every admission answered at once, expected %d more held", e.Queue)
	case q != nil && e.Queue == 0:
		add("queue: %d at once and %d more held up to %v, expected every admission answered at once", q.AtOnce, q.Held, q.MostHeld.Round(time.Millisecond))
	case q != nil:
		if want := e.Limit.Quota() - e.Queue; !near(q.AtOnce, want) || !near(q.Held, e.Queue) {
			add("queue: %d at once and %d more held, expected %d and %d", q.AtOnce, q.Held, want, e.Queue)
		}
		if float64(q.OnSchedule) < 0.9*float64(q.Checked) {
			add("queue: %d of %d held answers on the schedule of its rate", q.OnSchedule, q.Checked)
		}
	}
	a := e.Algorithm
	if a == "" {
		a = best.Algorithm
	}
	// The most in a window, judged against the expected limit (against
	// the one judged before when the answers are not at hand: a report
	// read back from probe.json).
	accuracy := r.Accuracy
	if r.fp != nil {
		accuracy = judgeFingerprint(r.fp, r.prefix, model{Algorithm: a, Limit: e.Limit})
	}
	for _, acc := range accuracy {
		switch most := mostAllowed(a); {
		case a.IsBucket() && acc.MostOverPromise > 1+e.Tolerance+1e-9:
			add("%s: %.2f× what the bucket promises in one interval", acc.Workload, acc.MostOverPromise)
		case !a.IsBucket() && acc.MaxWindowRatio > most*(1+e.Tolerance)+1e-9:
			add("%s: %.2f×N admitted in one window, where %s allows %g×N", acc.Workload, acc.MaxWindowRatio, a, most)
		}
	}
	if c := r.Concurrency; c.OverAdmits() {
		add("concurrency: %d admitted of %d at once on a fresh key, where the policy allows %d", c.Admitted, c.Sent, max(c.Allowed, c.Quota))
	}
	for _, ra := range r.RetryAfter {
		if ra.Lies() {
			add("Retry-After (keys spent %s): %s", ra.Spent, ra.Verdict)
		}
	}
	if !r.Keys.Isolated {
		add("keys: a fresh key was refused right after another was exhausted")
	}
	return out
}

// straysSecond is what strays of a second, longer limit: none found
// where one was expected (or one where none was, when the probe looked),
// or one of another family, rate or quota.
func (r *Report) straysSecond(e Expect) []string {
	var found model
	if l := r.Longer; l != nil && l.Second != "" {
		lim, err := limiters.ParseLimit(l.Limit)
		if err != nil {
			return []string{fmt.Sprintf("the second limit %q: %v", l.Limit, err)}
		}
		found = model{Algorithm: l.Algorithm, Limit: lim}
	}
	switch {
	case e.Also.N == 0 && found.Limit.N == 0:
		return nil
	case e.Also.N == 0:
		return []string{fmt.Sprintf("a second limit: %s, expected none", found)}
	case found.Limit.N == 0:
		looked := "the probe did not look (--look)"
		if r.Longer != nil {
			looked = r.Longer.Looked
		}
		return []string{fmt.Sprintf("second limit: %s, expected %s", looked, Expect{Algorithm: e.AlsoAlgorithm, Limit: e.Also})}
	}
	var out []string
	if e.AlsoAlgorithm != "" && family(found.Algorithm) != family(e.AlsoAlgorithm) {
		out = append(out, fmt.Sprintf("second limit: behaves as %s, not %s", found, e.AlsoAlgorithm))
	}
	rate := func(l limiters.Limit) float64 { return float64(l.N) / l.Per.Seconds() }
	if off := rate(found.Limit)/rate(e.Also) - 1; math.Abs(off) > e.Tolerance+1e-9 {
		out = append(out, fmt.Sprintf("second limit: %s is %+.1f%% from %s, beyond %.1f%%", found.Limit, 100*off, e.Also, 100*e.Tolerance))
	}
	if got, want := found.Limit.Quota(), e.Also.Quota(); math.Abs(float64(got-want)) > e.Tolerance*float64(want)+1e-9 {
		out = append(out, fmt.Sprintf("second limit: %d, expected %d", got, want))
	}
	return out
}

// mostAllowed is the most in any window an algorithm admits, over N (of
// a bucket, C over C/R): N for the sliding log; up to 2N for the fixed
// window at an edge, for the sliding counter, whose estimate lets more
// through, and for a bucket, which admits its capacity at once and
// refills meanwhile.
func mostAllowed(a limiters.Algorithm) float64 {
	if a == limiters.SlidingLog {
		return 1
	}
	return 2
}

// straysInFlight is Strays where the target or e is a limit in flight:
// the family, K within the tolerance, no more than K of 2K at once, and
// keys kept apart.
func (r *Report) straysInFlight(e Expect) []string {
	best := r.Fit[0]
	if best.Algorithm != e.Algorithm {
		return []string{fmt.Sprintf("algorithm: behaves as %s (%s), not %s", best.Algorithm, best.Limit, e)}
	}
	var out []string
	k, _ := strconv.Atoi(strings.TrimSuffix(best.Limit, " at once"))
	if want := e.Limit.N; math.Abs(float64(k-want)) > e.Tolerance*float64(want)+1e-9 {
		out = append(out, fmt.Sprintf("in flight: %d at once, expected %d", k, want))
	}
	if c := r.Concurrency; c.OverAdmits() {
		out = append(out, fmt.Sprintf("concurrency: %d admitted of %d at once on a fresh key, where %d in flight allows %d", c.Admitted, c.Sent, k, c.Quota))
	}
	if !r.Keys.Isolated && !slices.Contains(best.Variants, allKeys) {
		out = append(out, "keys: a fresh key was refused while another's were in flight")
	}
	return out
}
