package products

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/caddytest"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// caddyByLog is a key under Caddy's zones as the handler decides: the
// zones asked by events/window, the largest first; each keeps the times
// it admitted; a zone admits when fewer than events of them lie within
// window of now (the oldest of the last events more than window ago),
// and records now at once, before the zones after it are asked.
func caddyByLog(rules []CaddyRule) func(t int64) bool {
	zones := slices.Clone(rules)
	slices.SortStableFunc(zones, func(a, b CaddyRule) int {
		ra, rb := float64(a.Events)/a.Window.Seconds(), float64(b.Events)/b.Window.Seconds()
		switch {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return 0
	})
	admitted := make([][]int64, len(zones))
	return func(t int64) bool {
		for i, z := range zones {
			within := 0
			for _, at := range admitted[i] {
				if t-at <= int64(z.Window) {
					within++
				}
			}
			if within >= z.Events {
				return false
			}
			admitted[i] = append(admitted[i], t)
		}
		return true
	}
}

// The model decides as the handler does over random streams: one zone
// and two (the minute's asked first, its slot taken by a request the
// hour's refuses).
func TestCaddyAgainstLog(t *testing.T) {
	rules := [][]CaddyRule{
		{{Events: 10, Window: time.Second}},
		{{Events: 20, Window: 2 * time.Second}, {Events: 10, Window: time.Second}},
		{{Events: 60, Window: time.Hour}, {Events: 8, Window: 10 * time.Second}},
	}
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).UnixNano()
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 61))
		rs := rules[seed%uint64(len(rules))]
		var generic []Rule
		for _, r := range rs {
			generic = append(generic, r)
		}
		model, truth := Caddy{}.NewKey(generic), caddyByLog(rs)
		at := start
		refused := 0
		for i := range 2000 {
			if rng.IntN(8) == 0 {
				at += rng.Int64N(int64(3 * time.Second))
			} else {
				at += rng.Int64N(int64(120 * time.Millisecond))
			}
			d := model.Decide(at)
			if want := truth(at); d.Admitted != want {
				t.Fatalf("seed %d, %v, request %d at +%v: the model admits %v, the log %v", seed, rs, i, time.Duration(at-start), d.Admitted, want)
			}
			if !d.Admitted {
				refused++
			}
		}
		if refused == 0 {
			t.Errorf("seed %d: nothing refused; the stream asks nothing of the zones", seed)
		}
	}
	// The edge, by hand: 2 per second admits at 0 and 0.5 s, refuses at
	// 1.0 s (the oldest exactly a window ago is within it), admits at
	// 1.0 s and a nanosecond.
	k := Caddy{}.NewKey([]Rule{CaddyRule{Events: 2, Window: time.Second}})
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {500 * time.Millisecond, true}, {time.Second, false}, {time.Second + 1, true}} {
		if got := k.Decide(start + int64(c.at)).Admitted; got != c.want {
			t.Errorf("2 per 1s at +%v: admitted %v, want %v", c.at, got, c.want)
		}
	}
}

// What Write writes, Read reads back; by a header and by address, with a
// tier; a bad zone names its line.
func TestCaddyRoundTrip(t *testing.T) {
	for _, spec := range []string{"header:X-Api-Key", "ip"} {
		key, _ := accesslog.ParseKey(spec)
		rule := func(l limiters.Limit) Rule {
			r, err := Caddy{}.Express(l)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		keys := []string{"key_a", "key_b"}
		if spec == "ip" {
			keys = []string{"100.64.0.1", "100.64.0.2"}
		}
		p := Policy{Key: key, Notes: []string{"ratelab plan's windows."}, Backend: "127.0.0.1:9000", Listen: "127.0.0.1:8000",
			Rules: []Rule{rule(limiters.Limit{N: 38, Per: time.Second}), rule(limiters.Limit{N: 299, Per: 15 * time.Minute})},
			Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{rule(limiters.Limit{N: 190, Per: time.Second})}}}}
		text, err := Caddy{}.Write(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", text)
		if Of([]byte(text)) != (Caddy{}) {
			t.Errorf("%s: the Caddyfile is not recognized as Caddy's alone", spec)
		}
		r, err := Caddy{}.Read([]byte(text), "Caddyfile", key)
		if err != nil {
			t.Fatal(err)
		}
		if got := rulesText(r.Rules); got != "events 38 window 1s, events 299 window 15m" || len(r.Notes) != 0 {
			t.Errorf("%s: every key's rules %s, notes %q", spec, got, r.Notes)
		}
		if len(r.Tiers) != 1 || strings.Join(r.Tiers[0].Keys, " ") != strings.Join(keys, " ") || rulesText(r.RulesOf(keys[1])) != "events 190 window 1s" {
			t.Errorf("%s: tiers %+v", spec, r.Tiers)
		}
		if strings.Count(text, "127.0.0.1:9000") != 1 {
			t.Errorf("%s: the backend is not named once", spec)
		}
	}
	key, _ := accesslog.ParseKey("ip")
	for _, bad := range []struct{ cfg, want string }{
		{":80 {\n\trate_limit {\n\t\tzone z {\n\t\t\tkey {remote_host}\n\t\t\tevents ten\n", "Caddyfile:5: zone z: events ten"},
		{":80 {\n\trate_limit {\n\t\tzone z {\n\t\t\tevents 5\n\t\t\twindow -1s\n", "Caddyfile:5: zone z: window -1s"},
		{":80 {\n\trate_limit {\n\t\tzone z {\n\t\t\tevents 5\n\t\t}\n\t}\n}\n", "Caddyfile:3: zone z: want events and window"},
		{":80 {\n\treverse_proxy app\n}\n", "no rate_limit zone"},
	} {
		if _, err := (Caddy{}).Read([]byte(bad.cfg), "Caddyfile", key); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.cfg, err, bad.want)
		}
	}
}

// What Write writes, caddy validate passes, by a header and by address
// (where a Caddy with the plugin is named: make test-clocked's).
func TestCaddyChecks(t *testing.T) {
	for _, spec := range []string{"header:X-Api-Key", "ip"} {
		key, _ := accesslog.ParseKey(spec)
		keys := []string{"key_a", "key_b"}
		if spec == "ip" {
			keys = []string{"100.64.0.1", "100.64.0.2"}
		}
		rule := func(l limiters.Limit) Rule {
			r, _ := Caddy{}.Express(l)
			return r
		}
		text, err := Caddy{}.Write(Policy{Key: key, Rules: []Rule{rule(limiters.Limit{N: 38, Per: time.Second}), rule(limiters.Limit{N: 2, Per: time.Second, Burst: 38})},
			Tiers: []Tier{{Name: "shared", Keys: keys, Rules: []Rule{rule(limiters.Limit{N: 190, Per: time.Second})}}}})
		if err != nil {
			t.Fatal(err)
		}
		if out, ok := caddytest.Validate(t, text); !ok {
			t.Errorf("--key %s: caddy validate:\n%s\n%s", spec, out, text)
		}
	}
}
