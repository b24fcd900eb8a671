package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// A steady poller (an uptime monitor, a health check, a device's
// heartbeat) asks for one path, or a few, at a regular interval all
// along: the most ordinary traffic there is, and often, over the log,
// more than any customer sends. At a rate below its own its need grows
// with the log as a scraper's does; what tells it from one is the shape
// (a regular interval, not a rate's random run, and no more than a poll's
// requests at once) and the paths (a scraper walks thousands). Pollers
// are kept as the keys shared by many users are: left out of the
// arithmetic that sets keys apart, named, and given a tier where the
// bucket would refuse them.

// Pollers' bounds: how many paths and agents at most, how many requests
// at least (a shape judged on fewer is a guess), how often at most (a
// monitor polls once a second at the most; faster, one path hit steadily
// is a client stuck in a loop, or one forcing a login), and how much of
// the log it polls through at least.
const (
	pollerPaths    = 3
	pollerRequests = 30
	pollerRate     = 1.5 // a second
	pollerAlong    = 0.5 // of the log's span
)

// poller says whether key id is a steady poller, and how often it polls:
// one to pollerPaths paths, one agent at most, pollerRequests or more,
// polling at most about once a second through half the log or more, its
// most in every window of every length no more than its rate times the
// window plus two polls' requests (a poll's: its most in the shortest
// window). A rate's random run (Poisson) passes that by far at some
// length; a poll's jitter does not.
func (cs *curves) poller(cl *client, id int32, span time.Duration) (every time.Duration, ok bool) {
	if p := cl.paths.n(); p == 0 || p > pollerPaths || cl.agents.n() > 1 || cl.requests < pollerRequests || int(id) >= len(cs.of) || cs.of[id] == nil {
		return 0, false
	}
	// The longest length the log reaches.
	top := -1
	for j, d := range cs.lengths {
		if time.Duration(d) <= span {
			top = j
		}
	}
	if top < 0 {
		return 0, false
	}
	P := len(cs.lengths)
	peaks := cs.peaks[int(id)*P : int(id)*P+top+1]
	rate := float64(peaks[top]) / time.Duration(cs.lengths[top]).Seconds()
	poll := float64(peaks[0])
	if rate > pollerRate || float64(cs.of[id].total) < rate*span.Seconds()*pollerAlong {
		return 0, false
	}
	for j, most := range peaks {
		if float64(most) > rate*time.Duration(cs.lengths[j]).Seconds()+2*poll {
			return 0, false
		}
	}
	return time.Duration(math.Round(poll / rate * float64(time.Second))), true
}

// pollersOf are the keys of ids that are steady pollers, and the rest.
func (cs *curves) pollersOf(all []*client, ids []int32, span time.Duration) (pollers, rest []int32) {
	for _, id := range ids {
		if _, ok := cs.poller(all[id], id, span); ok {
			pollers = append(pollers, id)
		} else {
			rest = append(rest, id)
		}
	}
	return pollers, rest
}

// pollEvery is the pollers' interval, as a person says it: the median of
// theirs, rounded to a whole second from a second up.
func (cs *curves) pollEvery(all []*client, pollers []int32, span time.Duration) time.Duration {
	var every []time.Duration
	for _, id := range pollers {
		e, _ := cs.poller(all[id], id, span)
		every = append(every, e)
	}
	if len(every) == 0 {
		return 0
	}
	slices.Sort(every)
	e := every[(len(every)-1)/2]
	if e >= 900*time.Millisecond {
		return e.Round(time.Second)
	}
	return e.Round(10 * time.Millisecond)
}

// everyWords is an interval as a person says it: "30 s", "2 min", "250
// ms".
func everyWords(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute || d%time.Minute != 0:
		return fmt.Sprintf("%g s", d.Seconds())
	}
	return fmt.Sprintf("%g min", d.Minutes())
}

// maxPaths is the most distinct paths any of the keys ids asked for.
func maxPaths(cs *clients, ids []int32) int {
	most := 0
	for _, id := range ids {
		most = max(most, cs.all[id].paths.n())
	}
	return most
}

// requestsOf is the keys ids' requests.
func requestsOf(cs *clients, ids []int32) (n int64) {
	for _, id := range ids {
		n += cs.all[id].requests
	}
	return n
}

// clientsOf are up to n of the keys ids as a plan shows them, the most
// requests first.
func clientsOf(cs *clients, ids []int32, n int) []Client {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(x, y int32) int {
		return cmp.Or(cmp.Compare(cs.all[y].requests, cs.all[x].requests), cmp.Compare(x, y))
	})
	var out []Client
	for _, id := range ids[:min(len(ids), n)] {
		out = append(out, clientOf(cs.all[id], cs.grid))
	}
	return out
}

// pollerClass is the plan's class of steady pollers, if it has one.
func (p *Plan) pollerClass() *Class {
	for i := range p.Classes {
		if p.Classes[i].Every > 0 {
			return &p.Classes[i]
		}
	}
	return nil
}
