package products

import (
	"fmt"
	"math"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Traefik is Traefik's rateLimit middleware (v2.11 and v3,
// pkg/middlewares/ratelimiter): a golang.org/x/time/rate bucket per
// source, rate average/period and burst, kept exactly as that package
// keeps it (float tokens, refilled by the elapsed time).
//
// Two traits set it apart from the textbook bucket. A request whose
// token comes within maxDelay (half a token's time: time.Second /
// (2·⌊rate⌋), or 500 ms below 1 a second) is held that long and then
// served, not refused; a refused request gives its token back. And a
// key idle for its TTL (2 s from 1 a second up, 1 + ⌊1/rate⌋ s below),
// counted in whole Unix seconds, is forgotten: its next request finds a
// full bucket, so that average: 100, period: 1m, burst: 100 refills
// whole after any pause of two seconds.
type Traefik struct{}

// TraefikRule is one rateLimit middleware: Average requests per Period,
// Burst at once.
type TraefikRule struct {
	Average int64
	Period  time.Duration
	Burst   int64
	meant   limiters.Limit
}

func (Traefik) Name() string  { return "traefik" }
func (Traefik) Title() string { return "Traefik" }
func (Traefik) File() string  { return "traefik.yaml" }

// Express keeps a bucket as average N per Per, burst its capacity, and a
// window of N per Per as the bucket that holds N and refills them in Per
// (Traefik has no window). Traefik reads average and burst as whole
// numbers, period as a duration.
func (Traefik) Express(want limiters.Limit) (Rule, error) {
	if want.N < 1 || want.Per <= 0 {
		return nil, fmt.Errorf("traefik: the limit %s: want a count and a period", want)
	}
	r := TraefikRule{Average: int64(want.N), Period: want.Per, Burst: int64(want.N), meant: want}
	if want.Burst > 0 {
		r.Burst = int64(want.Burst)
	}
	return r, nil
}

func (r TraefikRule) String() string {
	return fmt.Sprintf("average: %d, period: %s, burst: %d", r.Average, traefikDuration(r.Period), r.Burst)
}

// Meant is the limit the rule was expressed for; a rule read back means
// its bucket.
func (r TraefikRule) Meant() limiters.Limit {
	if r.meant.N == 0 {
		return limiters.Limit{N: int(r.Average), Per: r.Period, Burst: int(r.Burst)}
	}
	return r.meant
}

func (r TraefikRule) Changes() string {
	s := fmt.Sprintf("a request up to %s early held and served; a key idle %d s given a full bucket again", r.maxDelay(), r.ttl())
	if r.meant.N > 0 && r.meant.Burst == 0 {
		s = fmt.Sprintf("no window: the bucket of %d refilled in %s, the nearest to %s; %s", r.Burst, traefikDuration(r.Period), r.meant, s)
	}
	return s
}

// Expect: from outside, the bucket it is (the hold and the forgetting
// are traits the probe does not name yet).
func (r TraefikRule) Expect() string {
	return "gcra " + limiters.Limit{N: int(r.Average), Per: r.Period, Burst: int(r.Burst)}.String()
}

// Spares: a bucket of burst b refilled at r refuses no key that sends at
// most b in any window of b/r (in k such windows, at most k·b, within
// what it refills); the hold and the forgetting only admit more.
func (r TraefikRule) Spares() (int, time.Duration) {
	return int(r.Burst), time.Duration(float64(r.Period) * float64(r.Burst) / float64(r.Average))
}

// rate is the bucket's rate a second, as rate.Limit.
func (r TraefikRule) rate() float64 {
	return float64(r.Average) * float64(time.Second) / float64(r.Period)
}

// maxDelay is how long a request may be held: time.Second over twice
// the rate truncated to a whole number, 500 ms below 1 a second.
func (r TraefikRule) maxDelay() time.Duration {
	rate := r.rate()
	if rate < 1 {
		return 500 * time.Millisecond
	}
	return time.Second / (time.Duration(rate) * 2)
}

// ttl is how many seconds an idle key is kept.
func (r TraefikRule) ttl() int64 {
	rate := r.rate()
	if rate >= 1 {
		return 2
	}
	return 1 + int64(1/rate)
}

// traefikDuration is d as Traefik reads a period: a Go duration, which
// has no days.
func traefikDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return configDuration(d)
}

// xrate is one golang.org/x/time/rate.Limiter's state, as reserveN,
// advance and CancelAt keep it (v0.16.0).
type xrate struct {
	limit  float64 // tokens a second
	burst  int64
	tokens float64
	last   int64 // nanoseconds
}

// advance is the tokens at t: refilled by the time since last, at most
// burst.
func (x *xrate) advance(t int64) float64 {
	last := min(x.last, t)
	elapsed := time.Duration(t - last)
	tokens := x.tokens + elapsed.Seconds()*x.limit
	return min(tokens, float64(x.burst))
}

// reserve takes a token at t and returns how long until it is due, as
// Reserve and Delay do (a future beyond maxDelay is cancelled by the
// caller with cancel).
func (x *xrate) reserve(t int64) time.Duration {
	tokens := x.advance(t) - 1
	var wait time.Duration
	if tokens < 0 {
		wait = time.Duration(float64(time.Second) * (-tokens / x.limit))
	}
	x.last, x.tokens = t, tokens
	return wait
}

// cancel gives the token of the reservation just made at t back, as
// CancelAt(t) does right after it (no other reservation between).
func (x *xrate) cancel(t int64) {
	tokens := x.advance(t) + 1
	x.last, x.tokens = t, math.Min(tokens, float64(x.burst))
}

// traefikKey is a key's buckets, one a middleware, and when each
// expires (Unix seconds).
type traefikKey struct {
	rules   []TraefikRule
	buckets []xrate
	expiry  []int64 // 0: no bucket yet
}

// NewKey is a key passing each rule's middleware in turn.
func (Traefik) NewKey(rules []Rule) Key {
	k := &traefikKey{}
	for _, r := range rules {
		k.rules = append(k.rules, r.(TraefikRule))
	}
	k.buckets = make([]xrate, len(k.rules))
	k.expiry = make([]int64, len(k.rules))
	return k
}

// Decide passes the request through each middleware in order: each
// finds its bucket (a fresh, full one where the key expired), sets its
// expiry, and reserves a token; a wait beyond maxDelay is cancelled and
// refused (the middlewares after it not reached), else the request is
// held that long and goes on. The holds add up.
func (k *traefikKey) Decide(t int64) Decision {
	var held time.Duration
	for i, r := range k.rules {
		at := t + int64(held)
		sec := floorDiv(at, int64(time.Second))
		b := &k.buckets[i]
		if k.expiry[i] == 0 || sec >= k.expiry[i] {
			*b = xrate{limit: r.rate(), burst: max(r.Burst, 1), tokens: float64(max(r.Burst, 1)), last: at}
		}
		k.expiry[i] = sec + r.ttl()
		wait := b.reserve(at)
		if wait > r.maxDelay() {
			b.cancel(at)
			return Decision{}
		}
		held += wait
	}
	return Decision{Admitted: true, Held: held}
}
