package products

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Nginx is nginx's limit_req (src/http/modules/ngx_http_limit_req_module.c):
// a zone per rule, each a bucket kept per key as excess, the requests
// queued beyond the one admitted, in thousandths, and last, the
// millisecond of the last request it admitted. A request at millisecond
// now makes excess max(excess − rate·(now−last)/1000 + 1000, 0), rate in
// thousandths of a request a second and the division truncated, and is
// refused when that is above burst (a thousand each); a key's first
// request leaves excess 0, so a fresh key gets burst+1 at once.
//
// Several limit_req lines on a request are asked in order, and a request
// one refuses changes no zone: the earlier ones only count it once every
// zone has admitted it (ngx_http_limit_req_account). The clock is
// nginx's cached millisecond, taken here as the request's.
//
// nginx writes a rate in whole requests a second or a minute and keeps it
// in thousandths a second, truncated: 82r/m is 1.366 a second. A window
// it cannot keep: the nearest is a bucket of N at once refilled at N a
// period, which admits up to 2N in a period after a quiet one.
type Nginx struct{}

// NginxRule is a limit_req zone and its limit_req line.
type NginxRule struct {
	// Want is the bucket meant: its rate, and its capacity as Burst (a
	// window meant as a bucket of N at once).
	Want limiters.Limit
	// Rate is the rate as written ("30r/m"), Burst the burst.
	Rate  string
	Burst int
	// Enforced is the bucket nginx keeps: the rate written, at the
	// thousandths of a request a second nginx counts in, and Want's
	// capacity; Rounded says it is not Want.
	Enforced limiters.Limit
	Rounded  bool
	// Delay is how many of the burst nginx serves at once before it
	// holds the rest (delay=; NoDelay: nodelay, all of them).
	Delay   int
	NoDelay bool
	// window is the window meant, if it was one.
	window limiters.Limit
}

func (Nginx) Name() string  { return "nginx" }
func (Nginx) Title() string { return "nginx" }
func (Nginx) File() string  { return "nginx.conf" }

// Express writes a bucket (Burst its capacity) as nginx can: a whole rate
// a second, else a whole rate a minute, else the rate a minute rounded up
// (nginx's least is 1r/m), so that nginx refuses no key the bucket meant
// spares for its rate; a window of N per Per as a bucket of N at once
// refilled at N a period. Every rule nodelay.
func (Nginx) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("nginx: the limit %s: want a count and a period", want)
	}
	if want.Burst == 0 {
		r := NginxExpress(limiters.Limit{N: want.N, Per: want.Per, Burst: want.N})
		r.window = want
		return r, nil
	}
	return NginxExpress(want), nil
}

// NginxExpress is Express of a bucket: want.Burst its capacity.
func NginxExpress(want limiters.Limit) NginxRule {
	n, per := int64(want.N), int64(want.Per)
	var r NginxRule
	switch {
	case n*int64(time.Second)%per == 0:
		r = nginxRule(n*int64(time.Second)/per, time.Second, want.Burst)
	default:
		r = nginxRule(max((n*int64(time.Minute)+per-1)/per, 1), time.Minute, want.Burst)
	}
	r.Want = want
	r.Rounded = int64(r.Enforced.N)*per != n*int64(r.Enforced.Per)
	return r
}

// nginxRule is rate=N r/s (per a second) or r/m (a minute) with a bucket
// of capacity, nodelay.
func nginxRule(n int64, per time.Duration, capacity int) NginxRule {
	r := NginxRule{Burst: max(capacity-1, 0), NoDelay: true}
	if per == time.Second {
		r.Rate, r.Enforced = fmt.Sprintf("%dr/s", n), limiters.Limit{N: int(n), Per: time.Second}
	} else if milli := n * 1000 / 60; milli*60 == n*1000 {
		r.Rate, r.Enforced = fmt.Sprintf("%dr/m", n), limiters.Limit{N: int(n), Per: time.Minute}
	} else {
		r.Rate, r.Enforced = fmt.Sprintf("%dr/m", n), limiters.Limit{N: int(milli), Per: 1000 * time.Second}
	}
	r.Enforced.Burst = max(capacity, 1)
	r.Want = limiters.Limit{N: int(n), Per: per, Burst: r.Enforced.Burst}
	return r
}

// String is the rule as limit_req writes it: "rate=30r/m burst=46".
func (r NginxRule) String() string {
	s := "rate=" + r.Rate
	if r.Burst > 0 {
		s += fmt.Sprintf(" burst=%d", r.Burst)
	}
	return s
}

// Meant is the limit the rule was expressed for: a window, or a bucket.
func (r NginxRule) Meant() limiters.Limit {
	if r.window.N > 0 {
		return r.window
	}
	return r.Want
}

// Changes says how nginx keeps the rule otherwise than meant: a window as
// a bucket, a rate it cannot write rounded up, one it keeps truncated.
func (r NginxRule) Changes() string {
	var s []string
	if w := r.window; w.N > 0 {
		s = append(s, fmt.Sprintf("no window: a bucket of %d at once refilled at %s, which admits up to %d in %s after a quiet one", w.N, RateWords(w), 2*w.N, w.Per))
	}
	if c := r.rounding(); c != "" {
		s = append(s, c)
	}
	return strings.Join(s, "; ")
}

// rounding says where the rate nginx keeps is not the one meant: written
// rounded up (nginx has no such rate), or written exactly and kept
// truncated in thousandths.
func (r NginxRule) rounding() string {
	if !r.Rounded {
		return ""
	}
	want := perSecond(r.Want)
	if strings.HasSuffix(r.Rate, "r/m") && perSecond(r.Enforced) < want {
		if n, _ := strconv.Atoi(strings.TrimSuffix(r.Rate, "r/m")); float64(n) == math.Round(want*60) && math.Abs(float64(n)-want*60) < 1e-9 {
			return fmt.Sprintf("nginx keeps %s as %.3f a second, not %.5g (in thousandths)", r.Rate, perSecond(r.Enforced), want)
		}
	}
	return fmt.Sprintf("nginx has no rate of %s (%.4g a minute): %s, rounded up, kept as %.3f a second", RateWords(r.Want), want*60, r.Rate, perSecond(r.Enforced))
}

// Says is what the rule's lines mean, in words, and where nginx keeps it
// otherwise: "20/s, 38 at once (rate=20r/s burst=37: nginx admits the
// burst and one more)".
func (r NginxRule) Says() string {
	s := fmt.Sprintf("%s, %d at once (rate=%s burst=%d: nginx admits the burst and one more)", RateWords(r.Want), r.Want.Burst, r.Rate, r.Burst)
	if c := r.rounding(); c != "" {
		s += "; " + c
	}
	return s
}

// Expect: from outside, the bucket nginx keeps; without nodelay, a bucket
// with a queue: delay= and one more answered at once, the rest of the
// burst held (ratelab probe --expect's "queue").
func (r NginxRule) Expect() string {
	if r.NoDelay || r.Burst <= r.Delay {
		return "gcra " + r.Enforced.String()
	}
	now := r.Enforced
	now.Burst = r.Delay + 1
	return fmt.Sprintf("gcra %s queue %d", now, r.Burst-r.Delay)
}

// milli is the rate nginx keeps, in thousandths of a request a second.
func (r NginxRule) milli() int64 {
	return int64(r.Enforced.N) * 1000 * int64(time.Second) / int64(r.Enforced.Per)
}

// RateWords says a bucket's rate: "1 a second", "1 every 2s", "10/s".
func RateWords(l limiters.Limit) string {
	if l.N == 1 && l.Per == time.Second {
		return "1 a second"
	}
	if l.N == 1 {
		return "1 every " + l.Per.String()
	}
	return limiters.Limit{N: l.N, Per: l.Per}.String()
}

func perSecond(l limiters.Limit) float64 { return float64(l.N) / l.Per.Seconds() }

// nginxZone is one key's node in one zone.
type nginxZone struct {
	rate, burst, delay int64 // thousandths
	excess, last       int64
	used               bool
}

// next is the excess a request at millisecond now leaves.
func (z *nginxZone) next(now int64) int64 {
	if !z.used {
		return 0
	}
	return max(z.excess-z.rate*max(now-z.last, 0)/1000+1000, 0)
}

type nginxKey struct{ zones []nginxZone }

// NewKey is a key in a zone of each rule, asked in order.
func (Nginx) NewKey(rules []Rule) Key {
	k := &nginxKey{zones: make([]nginxZone, len(rules))}
	for i, r := range rules {
		r := r.(NginxRule)
		z := &k.zones[i]
		z.rate, z.burst, z.delay = r.milli(), int64(r.Burst)*1000, int64(r.Delay)*1000
		if r.NoDelay {
			z.delay = z.burst
		}
	}
	return k
}

// Decide admits the request when every zone does, and then counts it in
// each; held, where a zone's excess is past its delay, the longest
// (excess − delay)·1000/rate milliseconds a zone asks.
func (k *nginxKey) Decide(t int64) Decision {
	now := floorDiv(t, int64(time.Millisecond))
	for i := range k.zones {
		if k.zones[i].next(now) > k.zones[i].burst {
			return Decision{}
		}
	}
	var held int64
	for i := range k.zones {
		z := &k.zones[i]
		z.excess, z.last, z.used = z.next(now), now, true
		if z.excess > z.delay {
			held = max(held, (z.excess-z.delay)*1000/z.rate)
		}
	}
	return Decision{Admitted: true, Held: time.Duration(held) * time.Millisecond}
}
