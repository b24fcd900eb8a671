package products

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Caddy is Caddy's rate_limit handler (github.com/mholt/caddy-ratelimit,
// ringbuffer.go unchanged since v0.1.0): per key and zone, a ring of the
// times of the last max_events requests it admitted. A request is
// admitted when the oldest of them is more than window ago (strictly),
// and its time then takes that slot: an exact sliding log of the
// admitted, the refused not recorded.
//
// Several zones on a request are asked in order of max_events/window,
// the most permissive first, and a zone that admits takes its slot at
// once: a request a later, stricter zone refuses has used a slot of the
// earlier ones.
type Caddy struct{}

// CaddyRule is a zone: Events admitted in any Window.
type CaddyRule struct {
	Events int
	Window time.Duration
	meant  limiters.Limit
}

func (Caddy) Name() string  { return "caddy" }
func (Caddy) Title() string { return "Caddy" }
func (Caddy) File() string  { return "Caddyfile" }

// Express keeps a window of N per Per as a zone of events N, window Per;
// a bucket of capacity b refilled at r as its nearest window, b per b/r
// (Caddy has no bucket). The window is whole milliseconds.
func (Caddy) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("caddy: the limit %s: want a count and a period", want)
	}
	r := CaddyRule{Events: want.N, Window: want.Per, meant: want}
	if want.Burst > 0 {
		r.Events = want.Burst
		r.Window = time.Duration(float64(want.Per) * float64(want.Burst) / float64(want.N))
	}
	r.Window = max(r.Window.Round(time.Millisecond), time.Millisecond)
	return r, nil
}

func (r CaddyRule) String() string {
	return fmt.Sprintf("events %d window %s", r.Events, configDuration(r.Window))
}

// Meant is the limit the rule was expressed for; a zone read back means
// its window.
func (r CaddyRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.Events, Per: r.Window}
	}
	return r.meant
}

func (r CaddyRule) Changes() string {
	if m := r.meant; m.Burst > 0 {
		return fmt.Sprintf("no bucket: a sliding log of %d admitted per %s, the nearest window to %s (the time it takes to fill again)", r.Events, configDuration(r.Window), m)
	}
	return ""
}

// Expect: from outside, a sliding log of the admitted.
func (r CaddyRule) Expect() string {
	return "sliding-log " + limiters.Limit{N: r.Events, Per: r.Window}.String()
}

// Spares: a zone refuses only a key that sends more than Events in one
// Window.
func (r CaddyRule) Spares() (int, time.Duration) { return r.Events, r.Window }

// caddyKey is a key's rings, one a zone, in the order the zones are
// asked.
type caddyKey struct {
	rules  []CaddyRule
	rings  [][]int64 // admitted times, nanoseconds; 0: an unused slot
	cursor []int
}

// NewKey is a key under the zones, asked the most permissive first.
func (Caddy) NewKey(rules []Rule) Key {
	k := &caddyKey{}
	for _, r := range rules {
		k.rules = append(k.rules, r.(CaddyRule))
	}
	slices.SortStableFunc(k.rules, func(a, b CaddyRule) int {
		// events/window, the larger first: a/wa > b/wb as a·wb > b·wa.
		return cmp.Compare(float64(b.Events)*float64(a.Window), float64(a.Events)*float64(b.Window))
	})
	for _, r := range k.rules {
		k.rings = append(k.rings, make([]int64, r.Events))
	}
	k.cursor = make([]int, len(k.rules))
	return k
}

// Decide asks each zone in turn: one whose oldest admitted time is
// within its window refuses (the zones after it not asked); one that
// admits writes the request's time over that slot.
func (k *caddyKey) Decide(t int64) Decision {
	for i, r := range k.rules {
		ring, c := k.rings[i], k.cursor[i]
		if oldest := ring[c]; oldest != 0 && t-oldest <= int64(r.Window) {
			return Decision{}
		}
		ring[c] = t
		k.cursor[i] = (c + 1) % len(ring)
	}
	return Decision{Admitted: true}
}
