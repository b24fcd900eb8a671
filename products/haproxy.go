package products

import (
	"fmt"
	"math"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// HAProxy is HAProxy's stick tables: a key's http_req_rate(period) and a
// deny when it is above a limit (haproxy.cfg).
//
// Its rate is a freq_ctr (src/freq_ctr.c, the same from 2.6 to 3.5): a
// count of the current period and of the previous one, the periods
// anchored at the key's first request and moved on by whole periods (two
// or more idle, and they start again at the next request). A request is
// counted when it is tracked, before the deny is decided, so the requests
// it denies count too: a key that keeps sending over its limit stays
// refused. The rate read is curr + ⌊prev·remain/period⌋, remain the part
// of the previous period still inside the window: an estimate, which
// passes the window's true count when the previous period's requests came
// early in it, and falls short when they came late.
type HAProxy struct{}

// HAProxyRule is a stick table's http_req_rate(Period), refused above
// Limit.
type HAProxyRule struct {
	Period time.Duration
	Limit  int
	meant  limiters.Limit
}

func (HAProxy) Name() string  { return "haproxy" }
func (HAProxy) Title() string { return "HAProxy" }
func (HAProxy) File() string  { return "haproxy.cfg" }

// Express keeps a window of N per Per as http_req_rate(Per) gt N (the
// period in whole milliseconds), and a bucket of capacity b refilled at
// r as its nearest window: b per b/r, the time the bucket takes to fill
// again.
func (HAProxy) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("haproxy: the limit %s: want a count and a period", want)
	}
	r := HAProxyRule{Period: want.Per, Limit: want.N, meant: want}
	if want.Burst > 0 {
		r.Limit = want.Burst
		r.Period = time.Duration(math.Round(float64(want.Per) * float64(want.Burst) / float64(want.N)))
	}
	r.Period = max(r.Period.Round(time.Millisecond), time.Millisecond)
	return r, nil
}

func (r HAProxyRule) String() string {
	return fmt.Sprintf("http_req_rate(%s) gt %d", configDuration(r.Period), r.Limit)
}

// Meant is the limit the rule was expressed for; a rule read back from a
// configuration means what it says, as a window.
func (r HAProxyRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: r.Limit, Per: r.Period}
	}
	return r.meant
}

func (r HAProxyRule) Changes() string {
	s := fmt.Sprintf("%d per %s estimated over two periods from the key's first request, the requests denied counted", r.Limit, configDuration(r.Period))
	if m := r.meant; m.Burst > 0 {
		s = fmt.Sprintf("no bucket: %s, the nearest window to %s (the time it takes to fill again)", s, m)
	}
	return s
}

// Expect: from outside, a window of Limit per Period, refusals counted;
// the probe names it a sliding counter whose windows start at a key's
// first request (freq_ctr) or a sliding log, as the decisions it saw
// allow (by hand, alone: one run in three each, the third "cannot tell
// apart"), so no algorithm is named.
func (r HAProxyRule) Expect() string {
	return limiters.Limit{N: r.Limit, Per: r.Period}.String()
}

// Spares: a key is refused only once its rate is above the limit, and
// the rate counts the requests of the current period and the one before
// (the requests denied only after the first is), shorter than two
// periods: a key that never sends more than the limit in two periods is
// never refused.
func (r HAProxyRule) Spares() (int, time.Duration) { return r.Limit, 2 * r.Period }

// configDuration is d as HAProxy's and Caddy's configurations write it:
// the largest unit that divides it ("10s", "1500ms", "2h", "1d").
func configDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// freqCtr is HAProxy's freq_ctr of one key in one table: the current
// period's start (an even millisecond), its count and the previous
// period's.
type freqCtr struct {
	tick       int64
	curr, prev int64
	used       bool
}

// update counts one request at millisecond now, as
// update_freq_ctr_period does: within the period, curr grows; past it,
// the period moves on by one (the count becomes the previous one), and
// past two, both start again at now. A fresh counter (tick 0) starts at
// its first request.
func (c *freqCtr) update(now, period int64) {
	if c.used && now-c.tick < period {
		c.curr++
		return
	}
	c.prev, c.curr = c.curr, 1
	c.tick += period
	if !c.used || now-c.tick >= period {
		c.prev, c.tick = 0, now
	}
	c.tick &^= 1
	c.used = true
}

// rate is read_freq_ctr_period at now: the previous period's count
// weighed by the part of it still inside the window, plus the current
// one's, in requests (rounded down); with the flapping correction (no
// request this period and one or none in the last: the last's count).
func (c *freqCtr) rate(now, period int64) int64 {
	past, curr := c.prev, c.curr
	remain := c.tick + period - now
	if remain < 0 {
		remain += period
		if remain >= 0 {
			past = curr
		} else {
			past = 0
		}
		curr = 0
	}
	if curr == 0 && past <= 1 {
		return past
	}
	return (past*remain + curr*period) / period
}

type haproxyKey struct {
	rules []HAProxyRule
	ctrs  []freqCtr
}

// NewKey tracks the key in a table of each rule; a request is denied when
// any rule's rate, its own request counted, is above its limit.
func (HAProxy) NewKey(rules []Rule) Key {
	k := &haproxyKey{ctrs: make([]freqCtr, len(rules))}
	for _, r := range rules {
		k.rules = append(k.rules, r.(HAProxyRule))
	}
	return k
}

func (k *haproxyKey) Decide(t int64) Decision {
	now := floorDiv(t, int64(time.Millisecond))
	admitted := true
	for i, r := range k.rules {
		p := int64(r.Period / time.Millisecond)
		k.ctrs[i].update(now, p)
		if k.ctrs[i].rate(now, p) > int64(r.Limit) {
			admitted = false
		}
	}
	return Decision{Admitted: admitted}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// haKey is how HAProxy fetches the plan's key: the client's address, or
// a request header; a field of the log HAProxy does not see is read from
// a header of its name, said so.
func haKey(key accesslog.KeySpec) (fetch, table, note string) {
	switch {
	case key.Header != "":
		return fmt.Sprintf("req.hdr(%s)", key.Header), "string len 128", "A request without the " + key.Header + " header tracks nothing and is never refused; keys longer than 128 characters are cut (HAProxy keeps 32 unless told)"
	case key.Field == "":
		return "src", "ip", "The client's address is the connection's: behind a proxy, take it from a header (req.hdr_ip(X-Forwarded-For)); an IPv6 client needs type ipv6"
	default:
		return fmt.Sprintf("req.hdr(%s)", key.Field), "string len 128", fmt.Sprintf("The log's field %s is the key, which HAProxy does not see: these lines key on a request header of its name; put the fetch that holds it in its place", key.Field)
	}
}
