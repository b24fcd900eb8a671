package probe

import (
	"cmp"
	"container/heap"
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
	// held, if set, decides in decide's place, and says how long an
	// admission is held before its answer goes back (a queue).
	held func(key string, t time.Time) (bool, time.Duration, http.Header)
	// backlog, if not 0, is a host that answers its admissions one after
	// another, each taking backlog (a handler that works; a loaded
	// host), and its refusals at once: it decides on arrival and holds
	// nothing, but a burst's last admissions come back late.
	backlog time.Duration
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
	answers := make([]answer, len(plan))
	events := &simEvents{}
	back := make([]time.Duration, len(plan)) // each answer's way back
	for i, r := range plan {
		sent := start.Add(r.At).Add(time.Duration(s.rng.Int64N(int64(50 * time.Microsecond))))
		answers[i] = answer{observation: observation{Key: r.Key, N: 1, Sent: sent}, Intended: start.Add(r.At)}
		heap.Push(events, simEvent{i, sent.Add(time.Duration(s.rng.Int64N(int64(s.lat) + 1))), false})
		back[i] = time.Duration(s.rng.Int64N(int64(s.lat) + 1))
	}
	stopped := time.Time{}
	var got []int
	var busy time.Time // when a backlogged host is free
	last := s.clock
	for events.Len() > 0 {
		e := heap.Pop(events).(simEvent)
		a := &answers[e.i]
		if !e.answer && !stopped.IsZero() && a.Sent.After(stopped) {
			continue // never sent
		}
		last = e.at
		if !e.answer {
			var hold time.Duration
			admitted, h := false, http.Header(nil)
			if s.held != nil {
				admitted, hold, h = s.held(plan[e.i].Key, e.at)
			} else {
				admitted, h = s.decide(plan[e.i].Key, e.at)
			}
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
			if s.backlog > 0 && admitted {
				busy = later(busy, e.at).Add(s.backlog)
				hold = busy.Sub(e.at)
			}
			a.Received = e.at.Add(hold).Add(back[e.i])
			heap.Push(events, simEvent{e.i, a.Received, true})
			continue
		}
		got = append(got, e.i)
		if !stopped.IsZero() {
			continue // the answer of a request in flight when it stopped: kept, as the wire keeps it
		}
		s.clock = e.at
		if stop != nil && !stop(*a) {
			stopped = e.at
		}
	}
	if last.After(s.clock) {
		s.clock = last
	}
	slices.Sort(got)
	out := make([]answer, len(got))
	for j, i := range got {
		out[j] = answers[i]
	}
	return out, nil
}

// simEvent is a request arriving at a simulated target, or its answer
// coming back; simEvents are them in time order (a heap).
type simEvent struct {
	i      int
	at     time.Time
	answer bool
}

type simEvents []simEvent

func (h simEvents) Len() int { return len(h) }
func (h simEvents) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || h[i].at.Equal(h[j].at) && h[i].i < h[j].i
}
func (h simEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *simEvents) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *simEvents) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// queued returns a simulated target that keeps a bucket of rate 1/T
// with a queue, per key: b at once, up to q more held and released one
// every T (a request held max(0, tat−t−(b−1)T)), refused beyond; as
// nginx's limit_req without nodelay (b = 1) or with delay=b−1, and a
// handler waiting on rate.Limiter.Wait.
func queued(T time.Duration, b, q int, seed uint64, lat time.Duration) *simulated {
	tats := map[string]int64{}
	s := &simulated{clock: time.Unix(1_800_000_000, 123_456_789), rng: rand.New(rand.NewPCG(seed, 99)), lat: lat}
	s.held = func(key string, at time.Time) (bool, time.Duration, http.Header) {
		t := at.UnixNano()
		tat, ok := tats[key]
		if !ok || tat < t {
			tat = t
		}
		wait := tat - t - int64(b-1)*int64(T)
		if wait > int64(q)*int64(T) {
			return false, 0, nil
		}
		tats[key] = tat + int64(T)
		return true, time.Duration(max(wait, 0)), nil
	}
	return s
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
