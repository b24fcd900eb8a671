package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/tiers"
)

func TestLoad(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "tiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := func(n int, per time.Duration) limiters.Limit { return limiters.Limit{N: n, Per: per} }
	named := func(name string, l limiters.Limit) limiters.Limit { l.Name = name; return l }
	want := tiers.Config{
		Algorithm: limiters.SlidingCounter,
		Default:   "free",
		Tiers: map[string][]limiters.Limit{
			"free":       {r(2, time.Second), r(5, time.Minute)},
			"pro":        {r(10, time.Second), named("hourly", r(300, time.Hour))},
			"enterprise": {r(100, time.Second)},
		},
		Users:     map[string]string{"alice": "pro", "erin": "enterprise"},
		Overrides: map[string][]limiters.Limit{"carol": {r(1, time.Second)}},
	}
	if c.Backend != "memory" || c.Path != filepath.Join("testdata", "tiers.yaml") || !equal(c.Tiers, want) {
		t.Errorf("Load = %+v\nwant %+v", c, want)
	}
	if _, err := tiers.New(c.Tiers); err != nil {
		t.Errorf("tiers.New refuses what Load accepted: %v", err)
	}
}

func equal(a, b tiers.Config) bool {
	if a.Algorithm != b.Algorithm || a.Default != b.Default || len(a.Tiers) != len(b.Tiers) || len(a.Users) != len(b.Users) || len(a.Overrides) != len(b.Overrides) {
		return false
	}
	for k, v := range a.Tiers {
		if !sameLimits(v, b.Tiers[k]) {
			return false
		}
	}
	for k, v := range a.Overrides {
		if !sameLimits(v, b.Overrides[k]) {
			return false
		}
	}
	for k, v := range a.Users {
		if b.Users[k] != v {
			return false
		}
	}
	return true
}

func sameLimits(a, b []limiters.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every mistake names its line and field and says what was expected.
func TestParseRefuses(t *testing.T) {
	const base = "algorithm: gcra\ndefault_tier: free\ntiers:\n  free: [10/s]\n"
	for _, tt := range []struct{ in, says string }{
		{"", "the file is empty"},
		{"- a\n- b\n", "1: want a mapping of algorithm, backend, default_tier, tiers, users, overrides, got a list"},
		{"algorithm: gcra\ntiers: {free: [1/s]}\n", "1: default_tier is missing"},
		{"algoritm: gcra\n", `1: algoritm: unknown field: did you mean algorithm?`},
		{"algorithm: gcra\nlimits: 5\n", "2: limits: unknown field (want one of algorithm, backend"},
		{"algorithm: magic\n", `1: algorithm: "magic" is not an algorithm (want one of fixed-window, sliding-log`},
		{"algorithm: [gcra]\n", "1: algorithm: want one of fixed-window"},
		{base + "algorithm: gcra\n", "5: algorithm: given twice (first on line 1)"},
		{base + "backend: valkey\n", `5: backend: "valkey" is not a backend this ratelab has (want one of memory, redis)`},
		{"algorithm: gcra\ndefault_tier: gold\ntiers:\n  free: [10/s]\n", `2: default_tier: "gold" is not one of the tiers (free)`},
		{base + "  pro: [10/x]\n", `5: tiers.pro[0]: limiters: not a rate: "10/x": the period "x" is not a unit`},
		{base + "  pro:\n    - 10/s\n    - 5/min burst\n", `7: tiers.pro[1]: limiters: not a rate: "5/min burst": after the rate comes nothing, or burst and a number`},
		{base + "  pro: []\n", "5: tiers.pro: want a list of limits, as in [10/s, 1000/day], got an empty list"},
		{base + "  pro:\n    - {rate: 10/s, nmae: fast}\n", "6: tiers.pro[0].nmae: unknown field: did you mean name? (want one of rate, name)"},
		{base + "  pro:\n    - {name: fast}\n", "6: tiers.pro[0]: rate is missing"},
		{base + "  pro: [10/s, 10/s]\n", `5: tiers.pro: composite: limiters: invalid parameter: limits 1 and 2 are both named "10/s"`},
		{"algorithm: fixed-window\ndefault_tier: free\ntiers:\n  free:\n    - 10/s\n    - 100/min burst 200\n", "6: tiers.free[1]: limiters: invalid parameter: fixed-window has no burst"},
		{base + "users:\n  alice: gold\n", `6: users.alice: "gold" is not one of the tiers (free)`},
		{base + "users:\n  alice: [free]\n", "6: users.alice: want a tier's name, got a list"},
		{base + "users: [alice]\n", "5: users: want a mapping of each user to a tier"},
		{base + "overrides:\n  carol: 1/0s\n", `6: overrides.carol[0]: limiters: not a rate: "1/0s": the period "0s" is zero or too long`},
		{"algorithm: gcra\ntiers:\n  free: [10/s\n", "3: not YAML: did not find expected ',' or ']' in the list or mapping that begins here"},
		{"algorithm: gcra\n\tdefault_tier: free\n", "2: not YAML: found a tab character"},
		{base + "---\nalgorithm: bogus\n", "5: a second document (after ---): a configuration is one"},
		{base + "users:\n  &u bob: free\n  *u : free\n", "6: anchors and aliases (& and *) are not supported"},
		{"base: &b [1/s]\n" + base, "1: anchors and aliases"},
		{base + "  ? [a, b]\n  : [5/s]\n", "5: a key must be a plain name, got a list"},
		{base + "  pro: [{rate: 10/s, rate: 1/s}]\n", "5: tiers.pro[0].rate: given twice"},
	} {
		_, err := Parse([]byte(tt.in))
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Parse(%q) = %v, want an *Error saying %q", tt.in, err, tt.says)
		}
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ratelab.yaml")
	if err := os.WriteFile(path, []byte("algorithm: gcra\ndefault_tier: free\ntiers:\n  free:\n    - 10/s\n    - {rate: 100/min, nmae: minute}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want := path + ":6: tiers.free[1].nmae: unknown field: did you mean name?"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load = %v, want it to start %q", err, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load(missing) = %v", err)
	}
}

// A running limiter takes a new file without losing its users' quotas,
// and keeps its configuration when the new file is wrong.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ratelab.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("algorithm: gcra\ndefault_tier: free\ntiers:\n  free: [3/min]\n  pro: [10/s]\n")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tiers.New(c.Tiers)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	frank := limiters.Request{Key: "frank", N: 1, At: t0}
	for range 3 {
		l.Decide(t.Context(), frank)
	}
	write("algorithm: gcra\ndefault_tier: free\ntiers:\n  free: [3/min]\n  pro: [20/s]\nusers:\n  paula: pro\n")
	if _, err := Reload(l, path); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Decide(t.Context(), frank); d.Allowed {
		t.Error("frank's spent quota came back with the reload")
	}
	if l.TierOf("paula") != "pro" {
		t.Errorf("paula is in %q after the reload, want pro", l.TierOf("paula"))
	}
	write("algorithm: gcra\ndefault_tier: free\ntiers:\n  free: [3/min]\nusers:\n  paula: pro\n")
	if _, err := Reload(l, path); err == nil || !strings.Contains(err.Error(), `:6: users.paula: "pro" is not one of the tiers (free)`) {
		t.Errorf("Reload(bad) = %v", err)
	}
	if l.TierOf("paula") != "pro" {
		t.Errorf("a bad file moved paula to %q", l.TierOf("paula"))
	}
}

// FuzzParse: no input panics, and what Parse accepts tiers.New builds.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "tiers.yaml")); err == nil {
		f.Add(string(data))
	}
	f.Add("algorithm: gcra\ndefault_tier: free\ntiers:\n  free: [10/s burst 5, {rate: 1/day, name: d}]\n")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Parse([]byte(in))
		if err != nil {
			return
		}
		l, err := tiers.New(c.Tiers)
		if err != nil {
			t.Fatalf("Parse accepted %q, tiers.New refuses it: %v", in, err)
		}
		l.Close()
	})
}
