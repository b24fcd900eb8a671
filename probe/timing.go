package probe

import (
	"slices"
	"time"
)

// Timing is how the exchange went: the latency of admitted and refused
// requests, and how well the sender kept to the plan.
type Timing struct {
	Admitted Latency `json:"admitted"`
	Refused  Latency `json:"refused"`
	// Held, of a limiter that delays, are its held admissions' holds (the
	// time to answer past the target's own), and Unheld its admissions
	// answered at once; both empty for one that does not delay.
	Held   Latency `json:"held"`
	Unheld Latency `json:"unheld"`
	// AskedRate is the fingerprint's requests over the time it was
	// planned to take, AchievedRate over the time it took to send them.
	AskedRate    float64 `json:"asked_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// Late is how late the sender sent each request, actual minus
	// intended send time, over all the probe's requests.
	Late Latency `json:"late"`
	// KeptPace: the sender sent the fingerprint at 95% of the rate asked
	// or more, and 99% of its requests within a tenth of the policy's
	// refill interval of their time. When it did not, the requests that
	// tell the algorithms apart (a burst, the edge of a window) went out
	// otherwise than planned: the fit still holds for what was sent, but
	// says less.
	KeptPace bool `json:"kept_pace"`
	// fpLate is how late the sender sent the fingerprint's own requests,
	// what KeptPace judges (the calibration's bursts of a large quota go
	// out later than planned, and are read as sent).
	fpLate Latency
}

// Latency is percentiles of a duration, in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// latencyOf returns the percentiles of ds (nearest rank).
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := min(int(p*float64(len(ds))+0.5), len(ds)) - 1
		return ms(ds[max(i, 0)])
	}
	return Latency{N: len(ds), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timingOf summarises all, every answer of the probe, and the
// fingerprint's own (lean: the lean fingerprint's, whose bursts are not
// judged for pace).
func timingOf(all, fingerprint []answer, lean bool, held func(answer) bool, service time.Duration) Timing {
	var admitted, refused, late, holds, unheld []time.Duration
	for _, a := range all {
		if !a.Intended.IsZero() && !a.Sent.IsZero() {
			late = append(late, max(a.Sent.Sub(a.Intended), 0))
		}
		switch {
		case !a.Decided():
		case a.Admitted:
			admitted = append(admitted, a.Received.Sub(a.Sent))
			if held(a) {
				holds = append(holds, a.Received.Sub(a.Sent)-service)
			} else {
				unheld = append(unheld, a.Received.Sub(a.Sent))
			}
		default:
			refused = append(refused, a.Received.Sub(a.Sent))
		}
	}
	t := Timing{Admitted: latencyOf(admitted), Refused: latencyOf(refused), Late: latencyOf(late)}
	if len(holds) > 0 {
		t.Held, t.Unheld = latencyOf(holds), latencyOf(unheld)
	}
	var fpLate []time.Duration
	last := map[string]time.Time{} // each key's last intended instant
	for _, a := range fingerprint {
		if a.Intended.IsZero() || a.Sent.IsZero() {
			continue
		}
		prev, seen := last[a.Key]
		last[a.Key] = a.Intended
		if lean && seen && a.Intended.Sub(prev) <= 2*time.Millisecond {
			// The lean fingerprint's quota back to back: hundreds queue,
			// and what they tell is read off when they were sent.
			continue
		}
		fpLate = append(fpLate, max(a.Sent.Sub(a.Intended), 0))
	}
	t.fpLate = latencyOf(fpLate)
	if n := len(fingerprint); n > 1 {
		if span := spanOf(fingerprint, func(a answer) time.Time { return a.Intended }); span > 0 {
			t.AskedRate = float64(n-1) / span.Seconds()
		}
		if span := spanOf(fingerprint, func(a answer) time.Time { return a.Sent }); span > 0 {
			t.AchievedRate = float64(n-1) / span.Seconds()
		}
	}
	return t
}

// keptPace reports whether the sender kept to the plan of a probe of
// limit: the rate asked, and each request near its time.
func (t Timing) keptPace(interval time.Duration) bool {
	late := t.fpLate
	if late.N == 0 {
		late = t.Late
	}
	return t.AchievedRate >= 0.95*t.AskedRate && late.P99 <= ms(interval/10)
}

// spanOf is the time between the earliest and the latest of the instants
// at gives of answers, those that have one.
func spanOf(answers []answer, at func(answer) time.Time) time.Duration {
	var first, last time.Time
	for _, a := range answers {
		t := at(a)
		if t.IsZero() {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(first)
}
