package products

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// traefikByXRate is a key under Traefik's middlewares as
// pkg/middlewares/ratelimiter keeps it, with x/time/rate itself: a
// Limiter per middleware, got from a map whose entries expire ttl whole
// seconds after the last request (a new one, full, after), Reserve at
// the request's time, Cancel and 429 when the delay passes maxDelay, else
// the request held that long before the next middleware.
func traefikByXRate(rules []TraefikRule) func(t time.Time) (bool, time.Duration) {
	type entry struct {
		l      *rate.Limiter
		expiry int64
	}
	entries := make([]*entry, len(rules))
	return func(t time.Time) (bool, time.Duration) {
		var held time.Duration
		for i, r := range rules {
			at := t.Add(held)
			avg := rate.Limit(float64(r.Average) * float64(time.Second) / float64(r.Period))
			maxDelay := 500 * time.Millisecond
			ttl := int64(2)
			if avg >= 1 {
				maxDelay = time.Second / (time.Duration(avg) * 2)
			} else {
				ttl = 1 + int64(1/avg)
			}
			e := entries[i]
			if e == nil || at.Unix() >= e.expiry {
				e = &entry{l: rate.NewLimiter(avg, int(max(r.Burst, 1)))}
				entries[i] = e
			}
			e.expiry = at.Unix() + ttl
			res := e.l.ReserveN(at, 1)
			if d := res.DelayFrom(at); d > maxDelay {
				res.CancelAt(at)
				return false, 0
			} else {
				held += d
			}
		}
		return true, held
	}
}

// The model decides as x/time/rate does, to the request and the hold,
// over random streams of requests (bursts, pauses past the TTL, steady
// runs) under one and two middlewares, at rates below and above one a
// second.
func TestTraefikAgainstXRate(t *testing.T) {
	rules := [][]TraefikRule{
		{{Average: 10, Period: time.Second, Burst: 5}},
		{{Average: 100, Period: time.Minute, Burst: 20}},
		{{Average: 1, Period: 3 * time.Second, Burst: 2}},
		{{Average: 3, Period: time.Second, Burst: 4}, {Average: 20, Period: 10 * time.Second, Burst: 20}},
	}
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).UnixNano()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 59))
		rs := rules[seed%uint64(len(rules))]
		var generic []Rule
		for _, r := range rs {
			generic = append(generic, r)
		}
		model, truth := Traefik{}.NewKey(generic), traefikByXRate(rs)
		at := start + rng.Int64N(int64(time.Second))
		admitted, refused := 0, 0
		for i := range 3000 {
			switch rng.IntN(10) {
			case 0: // a pause, past the TTL at times
				at += rng.Int64N(int64(4 * time.Second))
			case 1, 2, 3: // a burst
			default:
				at += rng.Int64N(int64(150 * time.Millisecond))
			}
			d := model.Decide(at)
			ok, held := truth(time.Unix(0, at))
			if d.Admitted != ok || d.Held != held {
				t.Fatalf("seed %d, %v, request %d at +%v: the model %+v, x/time/rate admitted %v held %v", seed, rs, i, time.Duration(at-start), d, ok, held)
			}
			if ok {
				admitted++
			} else {
				refused++
			}
		}
		if admitted == 0 || refused == 0 {
			t.Errorf("seed %d, %v: %d admitted, %d refused: the stream asks nothing of the bucket", seed, rs, admitted, refused)
		}
	}
}

// The traits, by hand: 10/s burst 5 admits 5 at once and refuses the
// sixth, whose token is 100 ms away, past the 50 ms hold; at 60 ms the
// token is 40 ms away: admitted, held 40 ms. Below 1 a second the hold
// is 500 ms. A key idle two whole seconds finds its bucket full again.
func TestTraefikTraits(t *testing.T) {
	r := TraefikRule{Average: 10, Period: time.Second, Burst: 5}
	k := Traefik{}.NewKey([]Rule{r})
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).UnixNano()
	for i := range 5 {
		if d := k.Decide(base); !d.Admitted || d.Held != 0 {
			t.Fatalf("request %d at once: %+v, want admitted at once", i, d)
		}
	}
	if d := k.Decide(base); d.Admitted {
		t.Errorf("the sixth at once: %+v, want refused (its token 100ms away, the hold 50ms)", d)
	}
	if d := k.Decide(base + int64(60*time.Millisecond)); !d.Admitted || d.Held != 40*time.Millisecond {
		t.Errorf("at 60ms: %+v, want admitted, held 40ms", d)
	}
	// Idle from +60ms: at +1.5s (second 1, before its expiry at second
	// 2) the bucket is the one refilled; at +2.0s it is a fresh one.
	if d := k.Decide(base + int64(2*time.Second)); !d.Admitted {
		t.Errorf("after 2s idle: %+v, want admitted", d)
	}
	for i := range 4 {
		if d := k.Decide(base + int64(2*time.Second)); !d.Admitted || d.Held != 0 {
			t.Errorf("request %d after the pause: %+v, want a full bucket's", i, d)
		}
	}
	slow := TraefikRule{Average: 100, Period: time.Minute, Burst: 1}
	if got := slow.maxDelay(); got != 500*time.Millisecond || slow.ttl() != 2 {
		t.Errorf("100/min: hold %v, ttl %d s; want 500ms and 2 (1.67 a second: time.Second/(1·2))", got, slow.ttl())
	}
	if got := (TraefikRule{Average: 1, Period: 5 * time.Second, Burst: 1}).ttl(); got != 6 {
		t.Errorf("1/5s: ttl %d s, want 1+5", got)
	}
	if day, _ := (Traefik{}).Express(limiters.Limit{N: 5000, Per: 24 * time.Hour}); day.String() != "average: 5000, period: 24h, burst: 5000" {
		t.Errorf("a day: %s; want 24h (Traefik's period is a Go duration, which has no d)", day)
	}
	e, err := Traefik{}.Express(limiters.Limit{N: 739, Per: 15 * time.Minute})
	if err != nil || e.String() != "average: 739, period: 15m, burst: 739" || e.Expect() != "gcra 739/15min burst 739" {
		t.Errorf("a window of 739/15min: %v (%v), expect %q", e, err, e.Expect())
	}
}

// trPolicy is a policy of two windows and a tier, in Traefik's terms.
func trPolicy(t *testing.T, keySpec string) Policy {
	t.Helper()
	key, err := accesslog.ParseKey(keySpec)
	if err != nil {
		t.Fatal(err)
	}
	rule := func(l limiters.Limit) Rule {
		r, err := Traefik{}.Express(l)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return Policy{
		Key:     key,
		Notes:   []string{"ratelab plan's bucket for b2b.json."},
		Rules:   []Rule{rule(limiters.Limit{N: 1, Per: time.Second, Burst: 407}), rule(limiters.Limit{N: 2220, Per: time.Hour})},
		Tiers:   []Tier{{Name: "shared", Keys: []string{"key_a", "key_b"}, Rules: []Rule{rule(limiters.Limit{N: 5, Per: time.Second, Burst: 2035})}}},
		Backend: "127.0.0.1:9000",
	}
}

// What Write writes, Read reads back: every key's two middlewares, the
// tier's router and its keys, the backend named once; keyed by a header
// or by address.
func TestTraefikRoundTrip(t *testing.T) {
	for _, k := range []string{"header:X-Api-Key", "ip"} {
		p := trPolicy(t, k)
		if k == "ip" {
			p.Tiers[0].Keys = []string{"100.64.0.1", "100.64.0.2"}
		}
		text, err := Traefik{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", text)
		if !(Traefik{}).Recognizes([]byte(text)) || (HAProxy{}).Recognizes([]byte(text)) || Of([]byte(text)) != (Traefik{}) {
			t.Errorf("--key %s: the file is not recognized as Traefik's alone", k)
		}
		r, err := Traefik{}.Read([]byte(text), "traefik.yaml", p.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Notes) != 0 {
			t.Errorf("--key %s: notes %q, want none", k, r.Notes)
		}
		if got := rulesText(r.Rules); got != "average: 1, period: 1s, burst: 407, average: 2220, period: 1h, burst: 2220" {
			t.Errorf("--key %s: every key's rules: %s", k, got)
		}
		if len(r.Tiers) != 1 || strings.Join(r.Tiers[0].Keys, " ") != strings.Join(p.Tiers[0].Keys, " ") || rulesText(r.RulesOf(p.Tiers[0].Keys[1])) != "average: 5, period: 1s, burst: 2035" {
			t.Errorf("--key %s: tiers %+v", k, r.Tiers)
		}
		if strings.Count(text, "127.0.0.1:9000") != 1 {
			t.Errorf("--key %s: the backend is not named once", k)
		}
	}
}

// Traefik's other spellings are read (a period in whole seconds, no
// burst: 1); a bad value names its line; a middleware keyed otherwise is
// said.
func TestTraefikRead(t *testing.T) {
	key, _ := accesslog.ParseKey("header:X-Api-Key")
	cfg := "http:\n  routers:\n    api:\n      rule: Host(`api`)\n      middlewares: [rl@file]\n      service: s\n  middlewares:\n    rl:\n      rateLimit:\n        average: 50\n        period: 60\n        sourceCriterion:\n          requestHost: true\n"
	r, err := Traefik{}.Read([]byte(cfg), "dyn.yaml", key)
	if err != nil {
		t.Fatal(err)
	}
	if got := rulesText(r.Rules); got != "average: 50, period: 1m, burst: 1" || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "host") {
		t.Errorf("rules %s, notes %q", got, r.Notes)
	}
	for _, bad := range []struct{ cfg, want string }{
		{"http:\n  routers:\n    api:\n      middlewares: [rl]\n  middlewares:\n    rl:\n      rateLimit:\n        average: 5\n        period: soon\n", "dyn.yaml:9: rl: period \"soon\""},
		{"http:\n  routers:\n    api:\n      middlewares: [other]\n  middlewares:\n    rl:\n      rateLimit:\n        average: 5\n", "no router passes a rateLimit"},
		{"http:\n  routers: [\n", "dyn.yaml: yaml: line"},
		{"http:\n  routers:\n    api:\n      middlewares: [rl]\n  middlewares:\n    rl:\n      rateLimit:\n        average: lots\n", "dyn.yaml:7: rl:"},
	} {
		if _, err := (Traefik{}).Read([]byte(bad.cfg), "dyn.yaml", key); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.cfg, err, bad.want)
		}
	}
}
