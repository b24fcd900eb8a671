package probe

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// A limiter that delays is a limiter too. nginx's limit_req without
// nodelay, Go middleware built on rate.Limiter.Wait, a shaper in front
// of an API: each admits b requests at once from a full bucket, holds up
// to q more and releases them one every 1/r, and refuses beyond. Its
// decisions are a bucket's of capacity b+q, made as each request
// arrives; its admissions are answered late, by exactly the schedule the
// limit implies: a request that finds the bucket's theoretical arrival
// time tat (GCRA's) is held max(0, tat−t−(b−1)/r). nginx without nodelay
// is b = 1 and q = burst; with delay=D, b = D+1 and q = burst−D; Wait
// with a deadline d, b = burst and q about r·d.
//
// So the answer times are data. An admission answered later than the
// target's own time to answer (its fastest admission's) was held; once
// the probe sees a target hold many, it reads each decision as made on
// arrival (a held admission's answer says when it was released, not when
// it was decided), fits the decisions as any other, and then, for a
// bucket, the split of its capacity into b at once and q held from the
// delays.

// Queue is what a limiter that delays holds, measured.
type Queue struct {
	// AtOnce are the requests a full bucket answers at once (b), Held how
	// many more it holds (q), released one every Interval; MostHeld the
	// longest a request waits, q intervals.
	AtOnce   int           `json:"at_once"`
	Held     int           `json:"held"`
	Interval time.Duration `json:"interval_ns"`
	MostHeld time.Duration `json:"most_held_ns"`
	// Service is the target's own time to answer (its fastest
	// admission), Threshold the time past which an admission was held.
	Service   time.Duration `json:"service_ns"`
	Threshold time.Duration `json:"threshold_ns"`
	// OnSchedule of Checked held admissions were answered within 10% or
	// 20ms of the release the model says (their time to answer removed).
	OnSchedule int `json:"on_schedule"`
	Checked    int `json:"checked"`
	// Nginx is the limit_req line that keeps it.
	Nginx string `json:"nginx,omitempty"`
}

// String is the queue in words: "10/s, 9 at once, 4 more held up to
// 400ms, refused beyond".
func (q Queue) String() string {
	return fmt.Sprintf("%d at once, %d more held up to %v, refused beyond", q.AtOnce, q.Held, q.MostHeld.Round(time.Millisecond))
}

// holdsAfter is the time past which an admission was held, given the
// target's own time to answer and how long its refusals take (the 90th
// percentile): twice the first, the second, and 20ms more. An answer's
// time varies, and a busy host delays many at once (ratelab serve, 76
// requests at once on a loaded host: admissions up to 92ms, the fastest
// in 56µs), refusals with them; a queue holds its admissions alone.
func holdsAfter(service, refusals time.Duration) time.Duration {
	return 2*service + refusals + 20*time.Millisecond
}

// holding reads, from every answer so far, the target's own time to
// answer (its fastest admission) and whether it holds admissions as a
// queue does: at least three answered past holdsAfter, a fifth of the
// admissions or more, the longest held three times that or more (a few
// slow answers on a busy host are not a queue). It says so the first time, and reads the decisions again as
// made on arrival.
func (p *prober) holding() {
	var service time.Duration = -1
	for _, a := range p.r.all {
		if a.Admitted {
			if d := a.Received.Sub(a.Sent); service < 0 || d < service {
				service = d
			}
		}
	}
	if service < 0 {
		return
	}
	var refused []time.Duration
	for _, a := range p.r.all {
		if a.Refused {
			refused = append(refused, a.Received.Sub(a.Sent))
		}
	}
	after := holdsAfter(service, pct(refused, 0.9))
	held, admitted := 0, 0
	var most time.Duration
	for _, a := range p.r.all {
		if a.Admitted {
			admitted++
			if d := a.Received.Sub(a.Sent); d > after {
				held++
				most = max(most, d)
			}
		}
	}
	p.service, p.holdAfter, p.longest = service, after, most
	// A queue holds a good share of what it admits (all but b of a
	// burst); a loaded host delays a few (nginx at 45 a second beside
	// two other probes: 72 of 866 up to 117ms, refusals fast).
	if p.queued || held < 3 || most < 3*after || 5*held < admitted {
		return
	}
	// And it lets them go one every 1/r, apart; a host working through
	// a backlog answers them back to back. ratelab serve, 604 at once on
	// a fresh key of 600/min, three probes on a loaded host: 602 answered
	// after 21ms, up to 393ms, 0.65ms apart, the fastest in 135µs; nginx
	// at 5r/s releases one every 200ms, Wait at 20/s one every 50ms.
	if pace := p.releasePace(after); pace >= 0 && pace < max(10*service, 2*time.Millisecond) {
		if !p.backlogSaid {
			p.backlogSaid = true
			p.say("admissions held: %d of %d answered after %v, up to %v, but %v apart, where the fastest took %v: a host working through a backlog, not a queue",
				held, admitted, after.Round(time.Millisecond), most.Round(time.Millisecond), pace.Round(time.Microsecond), service.Round(time.Microsecond))
		}
		return
	}
	p.queued = true
	p.say("admissions held: %d of %d answered after %v, up to %v, where the fastest took %v: a limiter that delays; each decision read as made on arrival",
		held, admitted, after.Round(time.Millisecond), most.Round(time.Millisecond), service.Round(time.Microsecond))
	p.obs = p.obs[:0]
	p.r.Undecided = 0
	p.observe(p.r.all)
}

// releasePace is how far apart the held admissions of one key, sent
// together, were answered: the median gap between one and the next, in
// the order they came back (a queue's interval; a backlog's time to
// answer one); -1 when no two were sent together.
func (p *prober) releasePace(after time.Duration) time.Duration {
	together := max(p.lat, time.Millisecond)
	byKey := map[string][]answer{}
	for _, a := range p.r.all {
		if a.Admitted && a.Key != "" {
			byKey[a.Key] = append(byKey[a.Key], a)
		}
	}
	var gaps []time.Duration
	for _, as := range byKey {
		slices.SortStableFunc(as, func(x, y answer) int { return x.Sent.Compare(y.Sent) })
		for i := 0; i < len(as); {
			j := i + 1
			for j < len(as) && as[j].Sent.Sub(as[j-1].Sent) <= together {
				j++
			}
			var back []time.Time
			for _, a := range as[i:j] {
				if a.Received.Sub(a.Sent) > after {
					back = append(back, a.Received)
				}
			}
			slices.SortFunc(back, time.Time.Compare)
			for k := 1; k < len(back); k++ {
				gaps = append(gaps, back[k].Sub(back[k-1]))
			}
			i = j
		}
	}
	if len(gaps) == 0 {
		return -1
	}
	return pct(gaps, 0.5)
}

// mostHeld is the longest an admission was held so far (0 for a target
// that does not delay): how much later than its decision an answer may
// still come. holding keeps it, with the answers it reads: the press's
// stop asks it of every answer.
func (p *prober) mostHeld() time.Duration {
	if !p.queued {
		return 0
	}
	return p.longest
}

// held reports whether a was an admission held past the target's own
// time to answer, once the probe reads the target as one that delays.
func (p *prober) held(a answer) bool {
	return p.queued && a.Admitted && a.Received.Sub(a.Sent) > p.holdAfter
}

// decided is a's observation as the fit reads it: a held admission was
// decided on arrival, within the target's own time to answer of being
// sent; its answer came when it was released.
func (p *prober) decided(a answer) observation {
	o := a.observation
	if p.held(a) {
		o.Received = o.Sent.Add(p.holdAfter)
	}
	return o
}

// queueOf measures the queue of the bucket m named for a target that
// delays: its capacity split into b at once and q held, the b that best
// explains when each admission was answered (the answer's time less the
// target's own, against max(0, tat−t−(b−1)/r) replayed through m's
// decisions), and how many held admissions came on that schedule; none
// when none is held, or fewer than four in five keep it (a busy host).
func (p *prober) queueOf(m model) *Queue {
	if !p.queued || !m.Algorithm.IsBucket() {
		return nil
	}
	T := int64(m.Limit.Interval())
	C := m.Limit.Burst
	if T <= 0 || C < 2 {
		return nil
	}
	adm := p.admissions(T)
	if len(adm) == 0 {
		return nil
	}
	b := atOnce(adm, C, T)
	q := &Queue{AtOnce: b, Held: C - b, Interval: time.Duration(T), Service: p.service, Threshold: p.holdAfter}
	q.MostHeld = time.Duration(int64(q.Held) * T)
	for _, x := range adm {
		want := max(x.wait-int64(b-1)*T, 0)
		if want == 0 {
			continue
		}
		q.Checked++
		if d := math.Abs(float64(x.held - want)); d <= max(0.1*float64(want), float64(20*time.Millisecond)) {
			q.OnSchedule++
		}
	}
	if q.Held == 0 || q.Checked < 3 || float64(q.OnSchedule) < 0.8*float64(q.Checked) {
		// Admissions answered late, but not as a queue lets them go: a
		// busy host's, or a slow handler's (the decisions still read as
		// made on arrival).
		return nil
	}
	q.Nginx = nginxQueue(m, *q)
	return q
}

// admission is an admission's wait before release if the bucket let none
// through at once (tat−t at its decision), and how long it was held.
type admission struct{ wait, held int64 }

// admissions replays the admissions per key, in the order sent, at
// arrival, through a bucket of one request per T nanoseconds. Requests
// sent at once arrive in any order, and the first to arrive is the first
// released: within a run sent closer together than the exchange's own
// time, the waits and the holds are paired in order.
func (p *prober) admissions(T int64) []admission {
	var adm []admission
	byKey := map[string][]answer{}
	var order []string
	for _, a := range p.r.all {
		if !a.Admitted || a.Key == "" {
			continue // a refusal consumes nothing
		}
		if _, ok := byKey[a.Key]; !ok {
			order = append(order, a.Key)
		}
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	together := max(p.lat, time.Millisecond)
	for _, k := range order {
		as := byKey[k]
		slices.SortStableFunc(as, func(x, y answer) int { return x.Sent.Compare(y.Sent) })
		var tat int64 = math.MinInt64
		for i := 0; i < len(as); {
			j := i + 1
			for j < len(as) && as[j].Sent.Sub(as[j-1].Sent) <= together {
				j++
			}
			var waits, helds []int64
			for _, a := range as[i:j] {
				t := a.Sent.UnixNano() + int64(p.service/2)
				tat = max(tat, t)
				waits = append(waits, tat-t)
				helds = append(helds, max(int64(a.Received.Sub(a.Sent)-p.service), 0))
				tat += T
			}
			slices.Sort(waits)
			slices.Sort(helds)
			for x := range waits {
				adm = append(adm, admission{wait: waits[x], held: helds[x]})
			}
			i = j
		}
	}
	return adm
}

// atOnce is the b, 1 to c, whose schedule the admissions keep best: the
// least total distance between each one's hold and max(0, wait−(b−1)T).
func atOnce(adm []admission, c int, T int64) int {
	best, bestErr := 1, math.Inf(1)
	for b := 1; b <= c; b++ {
		var e float64
		for _, x := range adm {
			e += math.Abs(float64(x.held - max(x.wait-int64(b-1)*T, 0)))
		}
		if e < bestErr {
			best, bestErr = b, e
		}
	}
	return best
}

// nginxQueue is the limit_req that keeps the bucket m with queue q: its
// rate in whole requests a second (within 2%), else a minute; burst b+q−1
// (nginx admits its burst and one more), delay=b−1 (none for b = 1,
// nginx's default without nodelay).
func nginxQueue(m model, q Queue) string {
	perSecond := float64(m.Limit.N) / m.Limit.Per.Seconds()
	var rate string
	switch r := math.Round(perSecond); {
	case r >= 1 && math.Abs(perSecond-r) <= 0.02*r:
		rate = fmt.Sprintf("%dr/s", int(r))
	default:
		rate = fmt.Sprintf("%dr/m", max(int(math.Round(perSecond*60)), 1))
	}
	s := fmt.Sprintf("limit_req_zone $binary_remote_addr zone=z:10m rate=%s; limit_req zone=z burst=%d", rate, q.AtOnce+q.Held-1)
	if q.AtOnce > 1 {
		s += fmt.Sprintf(" delay=%d", q.AtOnce-1)
	}
	return s + ";"
}
