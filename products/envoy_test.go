package products

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Envoy's token bucket, request by request, against values worked out by
// hand from token_bucket_impl.cc and local_ratelimit_impl.cc: full at the
// first request, a whole token needed, a refusal takes nothing; two
// buckets on a request taken from the slowest first, a token the slower
// gave to a request the faster refused not given back.
func TestEnvoyBucket(t *testing.T) {
	const base = 1_800_000_000_000_000_000
	s := func(f float64) int64 { return base + int64(f*1e9) }
	for _, tt := range []struct {
		name  string
		rules []Rule
		steps []struct {
			at       float64
			admitted bool
		}
	}{
		{"max_tokens 2, 1 every 1s", []Rule{EnvoyRule{MaxTokens: 2, TokensPerFill: 1, FillInterval: time.Second}}, []struct {
			at       float64
			admitted bool
		}{
			{0, true}, {0, true}, {0, false}, // full, then empty
			{0.5, false},                           // half a token: refused, and it takes nothing
			{1, true},                              // a whole one
			{3.5, true}, {3.5, true}, {3.5, false}, // never more than 2
		}},
		{"a slow bucket's token lost to a refusal of the fast one", []Rule{
			EnvoyRule{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Second},
			EnvoyRule{MaxTokens: 2, TokensPerFill: 1, FillInterval: 10 * time.Second},
		}, []struct {
			at       float64
			admitted bool
		}{
			{0, true},    // the slow 2 → 1, the fast 1 → 0
			{0.1, false}, // the slow 1.01 → 0.01, the fast 0.1: refused
			{1.1, false}, // the slow 0.11 (1.11, had it been given back)
			{10.1, true}, // the slow 1.01, the fast full
		}},
	} {
		k := Envoy{}.NewKey(tt.rules)
		for i, st := range tt.steps {
			if d := k.Decide(s(st.at)); d.Admitted != st.admitted {
				t.Errorf("%s: request %d at %.1fs: admitted %v; want %v", tt.name, i, st.at, d.Admitted, st.admitted)
			}
		}
	}
}

// A bucket is kept as it is; a window as a bucket of N refilled at N a
// period, said so; a period under 50ms scaled up with its tokens.
func TestEnvoyExpress(t *testing.T) {
	for _, tt := range []struct {
		want    limiters.Limit
		rule    string
		changes string
	}{
		{limiters.Limit{N: 1, Per: time.Second, Burst: 407}, "max_tokens: 407, tokens_per_fill: 1, fill_interval: 1s", ""},
		{limiters.Limit{N: 300, Per: 15 * time.Minute}, "max_tokens: 300, tokens_per_fill: 300, fill_interval: 15m", "no window"},
		{limiters.Limit{N: 1, Per: 10 * time.Millisecond, Burst: 20}, "max_tokens: 20, tokens_per_fill: 5, fill_interval: 50ms", ""},
	} {
		r, err := Envoy{}.Express(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.rule || (tt.changes == "") != (r.Changes() == "") || !strings.Contains(r.Changes(), tt.changes) || r.Meant() != tt.want {
			t.Errorf("%s: %s, changes %q, meant %v; want %s, %q", tt.want, r, r.Changes(), r.Meant(), tt.rule, tt.changes)
		}
	}
	if _, err := (Envoy{}).Express(limiters.Limit{N: 5}); err == nil {
		t.Error("a limit of no period expressed; want an error")
	}
}

// envoyPolicy is a policy of two rules and a tier, keyed by k.
func envoyPolicy(t *testing.T, k string) Policy {
	t.Helper()
	r := func(l limiters.Limit) Rule {
		rule, err := Envoy{}.Express(l)
		if err != nil {
			t.Fatal(err)
		}
		return rule
	}
	key, _ := accesslog.ParseKey(k)
	return Policy{Key: key, Clients: 500, Notes: []string{"ratelab plan's policy, for a test."},
		Rules: []Rule{r(limiters.Limit{N: 38, Per: time.Second}), r(limiters.Limit{N: 299, Per: 15 * time.Minute})},
		Tiers: []Tier{{Name: "shared", Keys: []string{"100.64.0.1", "100.64.0.2"}, Rules: []Rule{r(limiters.Limit{N: 190, Per: time.Second}), r(limiters.Limit{N: 9828, Per: 15 * time.Minute})}}}}
}

// What Write writes, Read reads back: every key's buckets and each tier
// key's, with no note (every request enforced, no shared bucket, the
// descriptors kept written).
func TestEnvoyWriteRead(t *testing.T) {
	for _, k := range []string{"ip", "header:X-Api-Key"} {
		p := envoyPolicy(t, k)
		for _, p := range []Policy{p, {Key: p.Key, Rules: p.Rules[:1]}} {
			text, err := Envoy{}.Write(p)
			if err != nil {
				t.Fatal(err)
			}
			if !(Envoy{}).Recognizes([]byte(text)) {
				t.Errorf("--key %s: the file written is not recognized", k)
			}
			r, err := Envoy{}.Read([]byte(text), "envoy.yaml", p.Key)
			if err != nil {
				t.Fatalf("--key %s: %v\n%s", k, err, text)
			}
			if len(r.Notes) != 0 || !sameRules(r.RulesOf("203.0.113.9"), p.Rules) || len(r.Tiers) != len(p.Tiers) {
				t.Errorf("--key %s: read %s, notes %q, tiers %+v\n%s", k, r.RulesOf("203.0.113.9"), r.Notes, r.Tiers, text)
			}
			for _, tier := range p.Tiers {
				for _, key := range tier.Keys {
					if !sameRules(r.RulesOf(key), tier.Rules) {
						t.Errorf("--key %s: %s read %v; want %v", k, key, r.RulesOf(key), tier.Rules)
					}
				}
			}
		}
	}
	p := envoyPolicy(t, "ip")
	p.Tiers[0].Rules = p.Tiers[0].Rules[:1]
	if _, err := (Envoy{}).Write(p); err == nil || !strings.Contains(err.Error(), "tier shared has 1 rules") {
		t.Errorf("a tier of fewer rules: %v; want an error", err)
	}
}

// sameRules says whether two lists hold the same rules as written.
func sameRules(got, want []Rule) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].String() != want[i].String() {
			return false
		}
	}
	return true
}

// An Envoy configuration written by hand, as products.md's example has
// it (the route's rate_limits, a default bucket every request would take
// from were it not turned off, the default of 20 clients kept), is read
// with what Envoy does otherwise said; one Envoy would refuse is refused
// with its line.
func TestEnvoyRead(t *testing.T) {
	ip, _ := accesslog.ParseKey("ip")
	conf := `http_filters:
- name: envoy.filters.http.local_ratelimit
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
    stat_prefix: per_client
    token_bucket: {max_tokens: 1000000, tokens_per_fill: 1000000, fill_interval: 1s}
    filter_enabled:  {runtime_key: rl_enabled,  default_value: {numerator: 100, denominator: HUNDRED}}
    always_consume_default_token_bucket: false
    descriptors:
    - entries: [{key: remote_address}]
      token_bucket: {max_tokens: 20, tokens_per_fill: 10, fill_interval: 1s}
    - entries: [{key: remote_address, value: "10.0.0.9"}]
      token_bucket: {max_tokens: 200, tokens_per_fill: 100, fill_interval: 1s}
routes:
- match: {prefix: "/"}
  route: {cluster: app}
  rate_limits: [{actions: [{remote_address: {}}]}]
`
	r, err := Envoy{}.Read([]byte(conf), "envoy.yaml", ip)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.RulesOf("203.0.113.9"); len(got) != 1 || got[0].String() != "max_tokens: 20, tokens_per_fill: 10, fill_interval: 1s" {
		t.Errorf("every key's: %v", got)
	}
	if got := r.RulesOf("10.0.0.9"); len(got) != 1 || got[0].String() != "max_tokens: 200, tokens_per_fill: 100, fill_interval: 1s" {
		t.Errorf("10.0.0.9's: %v", got)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"filter_enforced is not set", "the 20 clients seen last"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q: want %q said", r.Notes, want)
		}
	}
	if strings.Contains(notes, "default token_bucket") {
		t.Errorf("notes %q: the default bucket is turned off", r.Notes)
	}
	for _, tt := range []struct{ edit, want string }{
		{"fill_interval: 1s}\n    - entries: [{key: remote_address, value", "fill_interval: 0.010s}\n    - entries: [{key: remote_address, value"},
		{"max_tokens: 20,", "max_tokens: many,"},
		{"    - entries: [{key: remote_address}]\n", "    - entries: []\n"},
	} {
		bad := strings.Replace(conf, tt.edit, tt.want, 1)
		if bad == conf {
			t.Fatalf("%q is not in the configuration", tt.edit)
		}
		if _, err := (Envoy{}).Read([]byte(bad), "envoy.yaml", ip); err == nil || !strings.Contains(err.Error(), "envoy.yaml:") {
			t.Errorf("%q: %v; want an error naming the line", tt.want, err)
		}
	}
	if _, err := (Envoy{}).Read([]byte("static_resources: {}\n"), "envoy.yaml", ip); err == nil {
		t.Error("no local rate limit filter read; want an error")
	}
}

// The files Write writes pass Envoy's own protos' rules (go-control-plane's
// ValidateAll, by tools/envoycheck), where make test has built the
// checker (ENVOYCHECK).
func TestEnvoyChecks(t *testing.T) {
	bin := os.Getenv("ENVOYCHECK")
	if bin == "" {
		if os.Getenv("ENVOYCHECK_REQUIRED") != "" {
			t.Fatal("ENVOYCHECK_REQUIRED is set, ENVOYCHECK is not")
		}
		t.Skip("ENVOYCHECK is not set (make test builds tools/envoycheck)")
	}
	var paths []string
	for _, k := range []string{"ip", "header:X-Api-Key"} {
		text, err := Envoy{}.Write(envoyPolicy(t, k))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "envoy.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	if out, err := exec.Command(bin, paths...).CombinedOutput(); err != nil {
		t.Errorf("envoycheck: %v\n%s", err, out)
	}
	// The check can fail: a file Envoy's protos refuse.
	bad := filepath.Join(t.TempDir(), "envoy.yaml")
	text, _ := Envoy{}.Write(envoyPolicy(t, "ip"))
	os.WriteFile(bad, []byte(strings.Replace(text, "stat_prefix: ratelab\n              filter_enabled", "stat_prefix: \"\"\n              filter_enabled", 1)), 0o644)
	if out, err := exec.Command(bin, bad).CombinedOutput(); err == nil {
		t.Errorf("envoycheck passed a local rate limit with an empty stat_prefix\n%s", out)
	}
}
