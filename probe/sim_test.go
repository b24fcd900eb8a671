package probe

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// simulated is a target in simulated time: decide decides each request
// on arrival, behind a network that delays each way by up to lat; the
// probe's clock is the simulation's, so that a probe of a minute runs in
// the time its fits take.
type simulated struct {
	clock  time.Time
	rng    *rand.Rand
	lat    time.Duration
	decide func(key string, t time.Time) (bool, http.Header)
	// deny is the status of a refusal (0: 429), and always, when not 0,
	// the status of every answer, none of them decided.
	deny, always int
}

// simulate returns a simulated target that decides as m, per key, and
// says nothing in its fields.
func simulate(m model, seed uint64, lat time.Duration) *simulated {
	states := map[string]state{}
	return &simulated{
		clock: time.Unix(1_800_000_000, 123_456_789),
		rng:   rand.New(rand.NewPCG(seed, 99)),
		lat:   lat,
		decide: func(key string, t time.Time) (bool, http.Header) {
			st, ok := states[key]
			if !ok {
				st = m.newState()
				states[key] = st
			}
			ns := t.UnixNano()
			if st.admits(ns, 1) {
				st.admit(ns, 1)
				return true, nil
			}
			st.refuse(ns, 1)
			return false, nil
		},
	}
}

func (s *simulated) now() time.Time { return s.clock }

func (s *simulated) send(_ context.Context, plan []request, start time.Time, stop func(answer) bool) ([]answer, error) {
	if start.IsZero() || start.Before(s.clock) {
		start = s.clock
	}
	type event struct {
		i      int
		at     time.Time
		answer bool // the answer coming back, not the request arriving
	}
	answers := make([]answer, len(plan))
	var events []event
	for i, r := range plan {
		sent := start.Add(r.At).Add(time.Duration(s.rng.Int64N(int64(50 * time.Microsecond))))
		answers[i] = answer{observation: observation{Key: r.Key, N: 1, Sent: sent}, Intended: start.Add(r.At)}
		arrive := sent.Add(time.Duration(s.rng.Int64N(int64(s.lat) + 1)))
		back := arrive.Add(time.Duration(s.rng.Int64N(int64(s.lat) + 1)))
		answers[i].Received = back
		events = append(events, event{i, arrive, false}, event{i, back, true})
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	stopped := time.Time{}
	var got []int
	for _, e := range events {
		a := &answers[e.i]
		if !stopped.IsZero() && a.Sent.After(stopped) {
			continue // never sent
		}
		if !e.answer {
			admitted, h := s.decide(plan[e.i].Key, e.at)
			a.Admitted, a.Header, a.Status = admitted, h, http.StatusOK
			switch {
			case s.always != 0:
				a.Admitted, a.Status = false, s.always
			case !admitted:
				a.Status = cmp.Or(s.deny, http.StatusTooManyRequests)
			}
			if a.Header == nil {
				a.Header = http.Header{}
			}
			continue
		}
		if !stopped.IsZero() {
			continue // the answer of a request in flight when it stopped
		}
		s.clock = e.at
		got = append(got, e.i)
		if stop != nil && !stop(*a) {
			stopped = e.at
		}
	}
	if stopped.IsZero() && len(events) > 0 {
		s.clock = events[len(events)-1].at
	}
	slices.Sort(got)
	out := make([]answer, len(got))
	for j, i := range got {
		out[j] = answers[i]
	}
	return out, nil
}

// honestFields makes a simulated target that decides as m send the
// X-RateLimit fields a careful server would: the limit, what is left,
// and when the next request is admitted (Retry-After on a refusal,
// rounded up to whole seconds as delta-seconds are).
func honestFields(s *simulated, m model) *simulated {
	states := map[string]state{}
	s.decide = func(key string, t time.Time) (bool, http.Header) {
		st, ok := states[key]
		if !ok {
			st = m.newState()
			states[key] = st
		}
		ns := t.UnixNano()
		h := http.Header{}
		h.Set("X-RateLimit-Limit", strconv.Itoa(m.quota()))
		admitted := st.admits(ns, 1)
		if admitted {
			st.admit(ns, 1)
		} else {
			st.refuse(ns, 1)
			hi := ns + int64(time.Second)
			for !st.admits(hi, 1) {
				hi += int64(time.Second)
			}
			wait := time.Duration(firstAt(st, ns, hi, 1, int64(time.Microsecond)) - ns)
			h.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		}
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left(st, ns, m.quota())))
		return admitted, h
	}
	return s
}
