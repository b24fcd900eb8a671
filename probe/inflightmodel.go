package probe

import (
	"fmt"
	"slices"
	"time"
)

// inFlightModel is a limit of k requests in flight, per key or for all
// keys.
type inFlightModel struct {
	k      int
	shared bool
}

func (m inFlightModel) String() string {
	return fmt.Sprintf("%s %d at once, %s", InFlight, m.k, m.variant())
}

func (m inFlightModel) variant() string {
	if m.shared {
		return allKeys
	}
	return perKey
}

// held is what was in flight at one request's arrival: the admitted
// requests that surely held a slot then, and those that may have, of its
// key and of all keys.
type held struct {
	admitted                           bool
	surelyKey, maybeKey, surely, maybe int
}

// heldAt returns, for each of obs (in its order), what was in flight at
// its arrival.
// Each instant is known to an interval: a request arrives within u of
// its send, and holds its slot until its answer leaves, within u of the
// answer's coming back (u: the longest the network and the sender take,
// a refusal's round trip). Requests sent together arrive in any order, so
// an admission is judged with those it was surely in flight beside: at
// u after its send, when it has surely arrived, the admitted requests
// sent no later that surely still hold their slots (a limit of k never
// has more than k in flight, whatever the order). A refusal is judged
// against those that may have held a slot at its arrival: sent before it
// could arrive, still unanswered when it was sent.
func heldAt(obs []observation, u time.Duration) []held {
	order := make([]int, len(obs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return obs[a].Sent.Compare(obs[b].Sent) })
	byStart := make([]observation, len(obs))
	for i, j := range order {
		byStart[i] = obs[j]
	}
	out := make([]held, len(byStart))
	var active []int // admitted, sent by now+u, not yet answered
	next := 0
	for i, o := range byStart {
		for ; next < len(byStart) && !byStart[next].Sent.After(o.Sent.Add(u)); next++ {
			if byStart[next].Admitted {
				active = append(active, next)
			}
		}
		active = slices.DeleteFunc(active, func(j int) bool { return !byStart[j].Received.After(o.Sent) })
		h := held{admitted: o.Admitted}
		// At o.Sent+u o has surely arrived; if it surely holds a slot
		// then too, so do the admitted sent no later that surely hold
		// theirs: a limiter of k never has more than k in flight.
		inSurely := o.Received.Add(-u).After(o.Sent.Add(u))
		for _, j := range active {
			if j == i {
				continue
			}
			a := byStart[j]
			same := a.Key == o.Key
			h.maybe++
			if same {
				h.maybeKey++
			}
			if inSurely && !a.Sent.After(o.Sent) && a.Received.Add(-u).After(o.Sent.Add(u)) {
				h.surely++
				if same {
					h.surelyKey++
				}
			}
		}
		out[order[i]] = h
	}
	return out
}

// explain counts the decisions m explains of those hs describe: an
// admission when fewer than k surely held a slot at its arrival, a
// refusal when k or more may have.
func (m inFlightModel) explain(hs []held) int {
	n := 0
	for _, h := range hs {
		surely, maybe := h.surelyKey, h.maybeKey
		if m.shared {
			surely, maybe = h.surely, h.maybe
		}
		if h.admitted && surely < m.k || !h.admitted && maybe >= m.k {
			n++
		}
	}
	return n
}

// fitInFlight returns the in-flight model that explains most of obs,
// the smallest k of equals, per key before for all keys, and how many it
// explains.
func fitInFlight(obs []observation, most int, u time.Duration) (inFlightModel, int) {
	hs := heldAt(obs, u)
	var best inFlightModel
	top := -1
	for _, shared := range []bool{false, true} {
		for k := 1; k <= most; k++ {
			m := inFlightModel{k: k, shared: shared}
			if n := m.explain(hs); n > top {
				best, top = m, n
			}
		}
	}
	return best, top
}
