package plan

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// checkProducts checks each product's policy the plan chose against the
// log, apart from the plan: its configuration as written, read back, and
// the log's requests replayed through a decision the test keeps itself
// (for HAProxy, freq_ctr.c's arithmetic as the C has it); the keys and
// requests refused must be the plan's, to the request. It returns the
// products' policies by name.
func checkProducts(t *testing.T, name string, p *Plan, entries []accesslog.Entry, key accesslog.KeySpec) map[string]products.Choice {
	t.Helper()
	out := map[string]products.Choice{}
	// Each entry's key by number, once for every product.
	number := map[string]int{}
	var names []string
	ids := make([]int, len(entries))
	for i, e := range entries {
		id, ok := number[e.Key]
		if !ok {
			id = len(names)
			number[e.Key] = id
			names = append(names, e.Key)
		}
		ids[i] = id
	}
	checkNginx(t, name, p, entries, ids, len(names), key)
	for _, pp := range p.Products {
		out[pp.Product.Name()] = pp
		text, err := p.ProductConfig(pp.Product, key, "access.log", "127.0.0.1:9000")
		if err != nil {
			t.Fatalf("%s: %s: %v", name, pp.Product.Name(), err)
		}
		if pp.Cannot != "" {
			if text != "" || pp.Clients != -1 || !strings.Contains(p.Verdict(), pp.Cannot) {
				t.Errorf("%s: %s cannot keep the policy (%s), yet wrote %q, refuses %d keys, or the verdict does not say so", name, pp.Product.Name(), pp.Cannot, text, pp.Clients)
			}
			continue
		}
		read, err := pp.Product.Read([]byte(text), pp.Product.File(), key)
		if err != nil {
			t.Fatalf("%s: %s as written does not read back: %v\n%s", name, pp.Product.File(), err, text)
		}
		var decide func(rules []products.Rule) func(at int64) bool
		switch pp.Product.(type) {
		case products.HAProxy:
			decide = haproxyByHand
		case products.Traefik:
			decide = traefikByXRate
		case products.Caddy:
			decide = caddyByLog
		case products.Envoy:
			decide = envoyByXRate
		case products.Kong:
			decide = kongByCalendar
		case products.EnvoyRLS:
			decide = rlsByWindows
		case products.AWSWAF:
			decide = wafByScan
		case products.Cloudflare:
			decide = cloudflareByWindows
		case products.CloudArmor:
			decide = cloudArmorByWindows
		case products.APIGateway:
			decide = apiGatewayByXRate
		default:
			t.Fatalf("%s: no replay of %s's decisions in the test", name, pp.Product.Name())
		}
		keys := make([]func(int64) bool, len(names))
		refused := make([]bool, len(names))
		var requests, clients int64
		for i, e := range entries {
			id := ids[i]
			k := keys[id]
			if k == nil {
				k = decide(read.RulesOf(e.Key))
				keys[id] = k
			}
			if !k(e.At) {
				if !refused[id] {
					refused[id], clients = true, clients+1
				}
				requests++
			}
		}
		if requests != pp.Refused || clients != pp.Clients {
			t.Errorf("%s: %s (%s) refuses %d requests of %d keys, replayed by the test; the plan says %d of %d\n%s",
				name, pp.Product.Name(), choiceRules(pp), requests, clients, pp.Refused, pp.Clients, text)
		}
	}
	return out
}

// haproxyByHand is a key under HAProxy's rules as src/freq_ctr.c (2.6)
// keeps each: update_freq_ctr_period at each request tracked, then
// read_freq_ctr_period, the total over the period divided by it, denied
// when above the limit of any rule.
func haproxyByHand(rules []products.Rule) func(at int64) bool {
	type ctr struct{ tick, curr, prev int64 }
	ctrs := make([]*ctr, len(rules))
	return func(at int64) bool {
		now := at / int64(time.Millisecond)
		admitted := true
		for i, r := range rules {
			hr := r.(products.HAProxyRule)
			period := int64(hr.Period / time.Millisecond)
			c := ctrs[i]
			switch {
			case c == nil: // a new entry: its first period starts now
				c = &ctr{tick: now &^ 1, curr: 1}
				ctrs[i] = c
			case now-c.tick < period:
				c.curr++
			case now-c.tick < 2*period:
				c.prev, c.curr, c.tick = c.curr, 1, (c.tick+period)&^1
			default:
				c.prev, c.curr, c.tick = 0, 1, now&^1
			}
			// freq_ctr_total with pend -1, then divided by the period.
			curr, past := c.curr, c.prev
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
			total := past*remain + curr*period
			if curr == 0 && past <= 1 {
				total = past * period
			}
			if total/period > int64(hr.Limit) {
				admitted = false
			}
		}
		return admitted
	}
}

// readEntries are the requests of log as o reads them, in time order.
func readEntries(t *testing.T, log []byte, o accesslog.Options) []accesslog.Entry {
	t.Helper()
	r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.log", R: bytes.NewReader(log)}}, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []accesslog.Entry
	for {
		e, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// traefikByXRate is a key under Traefik's rateLimit middlewares, as
// pkg/middlewares/ratelimiter keeps each, with x/time/rate itself: a
// Limiter got from a map whose entries expire their TTL in whole seconds
// after the last request (a fresh, full one after), Reserve at the
// request's time, Cancel and 429 past maxDelay, else held that long
// before the next middleware.
func traefikByXRate(rules []products.Rule) func(at int64) bool {
	type entry struct {
		l      *rate.Limiter
		expiry int64
	}
	entries := make([]*entry, len(rules))
	return func(at int64) bool {
		var held time.Duration
		for i, r := range rules {
			tr := r.(products.TraefikRule)
			now := time.Unix(0, at).Add(held)
			limit := rate.Limit(float64(tr.Average) * float64(time.Second) / float64(tr.Period))
			maxDelay, ttl := 500*time.Millisecond, int64(2)
			if limit >= 1 {
				maxDelay = time.Second / (time.Duration(limit) * 2)
			} else {
				ttl = 1 + int64(1/limit)
			}
			e := entries[i]
			if e == nil || now.Unix() >= e.expiry {
				e = &entry{l: rate.NewLimiter(limit, int(max(tr.Burst, 1)))}
				entries[i] = e
			}
			e.expiry = now.Unix() + ttl
			res := e.l.ReserveN(now, 1)
			d := res.DelayFrom(now)
			if d > maxDelay {
				res.CancelAt(now)
				return false
			}
			held += d
		}
		return true
	}
}

// caddyByLog is a key under Caddy's rate_limit zones as the handler
// decides: asked by events/window, the largest first, each admitting
// while fewer than its events of the times it admitted lie within its
// window, and keeping the time at once.
// checkNginx checks the plan's nginx figures against its nginx.conf and
// nginx-windows.conf, read back and replayed by nginxByHand: the bucket
// as nginx keeps it, and the windows as two buckets, refuse the keys and
// requests the plan says (each entry's key by number in ids, of n).
func checkNginx(t *testing.T, name string, p *Plan, entries []accesslog.Entry, ids []int, n int, key accesslog.KeySpec) {
	t.Helper()
	n2 := p.NginxPolicy
	tiered := map[string]bool{}
	for _, t := range p.tiers() {
		for _, c := range t.keys {
			tiered[c.Key] = true
		}
	}
	for _, c := range []struct {
		file                      string
		text                      string
		wantClients, wantRequests int64
	}{
		{"nginx.conf", p.Nginx(key, "access.log"), n2.Clients, n2.Refused},
		{"nginx-windows.conf", p.NginxWindows(key, "access.log"), n2.PairClients, n2.PairRefused},
	} {
		if c.text == "" || c.wantRequests < 0 {
			continue
		}
		read, err := products.Nginx{}.Read([]byte(c.text), c.file, key)
		if err != nil {
			t.Fatalf("%s: %s does not read back: %v\n%s", name, c.file, err, c.text)
		}
		keys := make([]func(int64) bool, n)
		refused := make([]bool, n)
		var requests, clients int64
		for i, e := range entries {
			if tiered[e.Key] {
				continue // the plan's figures are of the users
			}
			if keys[ids[i]] == nil {
				keys[ids[i]] = nginxByHand(read.RulesOf(e.Key))
			}
			if !keys[ids[i]](e.At) {
				if !refused[ids[i]] {
					refused[ids[i]], clients = true, clients+1
				}
				requests++
			}
		}
		if requests != c.wantRequests || clients != c.wantClients {
			t.Errorf("%s: %s refuses %d requests of %d keys, replayed by the test; the plan says %d of %d\n%s", name, c.file, requests, clients, c.wantRequests, c.wantClients, c.text)
		}
	}
}

// nginxByHand decides as ngx_http_limit_req_module.c does: each zone's
// node an excess in thousandths and the millisecond it was last
// counted, the rate in thousandths a second (N r/s: N·1000; N r/m:
// N·1000/60, truncated), each zone looked up in order and a request
// refused by one counted by none.
func nginxByHand(rules []products.Rule) func(at int64) bool {
	type node struct {
		excess, last int64
		made         bool
	}
	nodes := make([]node, len(rules))
	rates := make([]int64, len(rules))
	for i, r := range rules {
		nr := r.(products.NginxRule)
		num, unit, _ := strings.Cut(nr.Rate, "r/")
		v, _ := strconv.ParseInt(num, 10, 64)
		rates[i] = v * 1000
		if unit == "m" {
			rates[i] = v * 1000 / 60
		}
	}
	return func(at int64) bool {
		now := at / int64(time.Millisecond)
		next := make([]int64, len(rules))
		for i, r := range rules {
			if !nodes[i].made {
				continue // a new node: excess 0, admitted
			}
			ms := max(now-nodes[i].last, 0)
			e := max(nodes[i].excess-rates[i]*ms/1000+1000, 0)
			if e > int64(r.(products.NginxRule).Burst)*1000 {
				return false
			}
			next[i] = e
		}
		for i := range nodes {
			if nodes[i].made && now == nodes[i].last {
				nodes[i].excess = next[i]
				continue
			}
			nodes[i] = node{excess: next[i], last: now, made: true}
		}
		return true
	}
}

// envoyByXRate decides as Envoy's local rate limit does, with
// x/time/rate's Limiter for each descriptor's bucket (full at first, a
// whole token taken, none by a refusal), the slowest first, stopping at
// the first that refuses.
func envoyByXRate(rules []products.Rule) func(at int64) bool {
	rs := make([]products.EnvoyRule, len(rules))
	for i, r := range rules {
		rs[i] = r.(products.EnvoyRule)
	}
	perSecond := func(r products.EnvoyRule) float64 { return float64(r.TokensPerFill) / r.FillInterval.Seconds() }
	slices.SortStableFunc(rs, func(a, b products.EnvoyRule) int { return cmp.Compare(perSecond(a), perSecond(b)) })
	ls := make([]*rate.Limiter, len(rs))
	for i, r := range rs {
		ls[i] = rate.NewLimiter(rate.Limit(perSecond(r)), r.MaxTokens)
	}
	return func(at int64) bool {
		for _, l := range ls {
			if !l.AllowN(time.Unix(0, at), 1) {
				return false
			}
		}
		return true
	}
}

// kongByCalendar decides as Kong's rate-limiting plugin does: a count a
// period in the UTC calendar's window (time.Time's own reckoning of
// it), a request refused where a count has reached its limit, and
// counted in every period only when admitted.
func kongByCalendar(rules []products.Rule) func(at int64) bool {
	type counter struct {
		window time.Time
		n      int
	}
	counters := make([]counter, len(rules))
	window := func(period string, t time.Time) time.Time {
		switch period {
		case "month":
			return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		case "year":
			return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return t.Truncate(map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[period])
	}
	return func(at int64) bool {
		now := time.Unix(0, at).UTC()
		for i, r := range rules {
			kr := r.(products.KongRule)
			if w := window(kr.Period, now); !w.Equal(counters[i].window) {
				counters[i] = counter{window: w}
			}
			if counters[i].n >= kr.Limit {
				return false
			}
		}
		for i := range counters {
			counters[i].n++
		}
		return true
	}
}

// wafByScan decides as the model of AWS WAF's rule says it does: at
// each tenth second past, every request of the key before it counted
// again, blocked while a rule counts more than its limit in its window.
func wafByScan(rules []products.Rule) func(at int64) bool {
	var times []int64
	check, blocked := int64(-1), false
	return func(at int64) bool {
		if c := at - at%int64(10*time.Second); c != check {
			check, blocked = c, false
			for _, r := range rules {
				wr := r.(products.AWSWAFRule)
				n := 0
				for _, t := range times {
					if t >= c-int64(wr.Window) && t < c {
						n++
					}
				}
				blocked = blocked || n > wr.Limit
			}
		}
		times = append(times, at)
		return !blocked
	}
}

// cloudflareByWindows decides as the model of Cloudflare's rule says it
// does: each window of the period its own count of the key's requests,
// a request acted on when the count before it exceeds the limit, and
// the key refused until the mitigation timeout after.
func cloudflareByWindows(rules []products.Rule) func(at int64) bool {
	counts := make([]map[int64]int, len(rules))
	bans := make([]int64, len(rules))
	for i := range counts {
		counts[i] = map[int64]int{}
	}
	return func(at int64) bool {
		admitted := true
		for i, r := range rules {
			cr := r.(products.CloudflareRule)
			w := at / int64(cr.Period)
			if counts[i][w] > cr.RequestsPerPeriod {
				admitted = false
				if at >= bans[i] {
					bans[i] = at + int64(cr.Timeout)
				}
			} else if at < bans[i] {
				admitted = false
			}
			counts[i][w]++
		}
		return admitted
	}
}

// cloudArmorByWindows decides as the model of Cloud Armor's rule says
// it does: the first rule alone (the one a request matches first), each
// interval's window its own count, a request over the count refused,
// and a ban till the interval's end and its duration more.
func cloudArmorByWindows(rules []products.Rule) func(at int64) bool {
	if len(rules) == 0 {
		return func(int64) bool { return true }
	}
	r := rules[0].(products.CloudArmorRule)
	counts := map[int64]int{}
	var banUntil int64
	return func(at int64) bool {
		w := at / int64(r.Interval)
		counts[w]++
		if counts[w] > r.Count {
			if r.Ban > 0 && at >= banUntil {
				banUntil = (w+1)*int64(r.Interval) + int64(r.Ban)
			}
			return false
		}
		return at >= banUntil
	}
}

// apiGatewayByXRate decides as the model of API Gateway's throttle says
// it does, with x/time/rate's Limiter: full at first, a whole token a
// request, none taken by a refusal.
func apiGatewayByXRate(rules []products.Rule) func(at int64) bool {
	if len(rules) == 0 {
		return func(int64) bool { return true }
	}
	r := rules[0].(products.APIGatewayRule)
	l := rate.NewLimiter(rate.Limit(r.RateLimit), r.BurstLimit)
	return func(at int64) bool { return l.AllowN(time.Unix(0, at), 1) }
}

// rlsByWindows decides as Envoy's rate limit service does: a counter a
// limit and window of the unit on the epoch (its key the window's start,
// as cache_key.go makes it), every request counted, refused where a
// count is over its limit.
func rlsByWindows(rules []products.Rule) func(at int64) bool {
	counts := map[string]int{}
	return func(at int64) bool {
		admitted := true
		for i, r := range rules {
			er := r.(products.EnvoyRLSRule)
			div := map[string]int64{"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800, "month": 2592000, "year": 31536000}[er.Unit]
			key := fmt.Sprintf("%d_%d", i, at/int64(time.Second)/div*div)
			counts[key]++
			if counts[key] > er.RequestsPerUnit {
				admitted = false
			}
		}
		return admitted
	}
}

func caddyByLog(rules []products.Rule) func(at int64) bool {
	zones := make([]products.CaddyRule, len(rules))
	for i, r := range rules {
		zones[i] = r.(products.CaddyRule)
	}
	slices.SortStableFunc(zones, func(a, b products.CaddyRule) int {
		return cmp.Compare(float64(b.Events)/b.Window.Seconds(), float64(a.Events)/a.Window.Seconds())
	})
	admitted := make([][]int64, len(zones))
	return func(at int64) bool {
		for i, z := range zones {
			// The times within the window are the last ones: drop the rest.
			kept := admitted[i]
			for len(kept) > 0 && at-kept[0] > int64(z.Window) {
				kept = kept[1:]
			}
			admitted[i] = kept
			if len(kept) >= z.Events {
				return false
			}
			admitted[i] = append(kept, at)
		}
		return true
	}
}
