package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/harness"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// sweep is 1/s..100/s at ten limits, as ratelab plan's --limits 1/s..100/s.
func sweep() []limiters.Limit {
	var out []limiters.Limit
	for _, n := range []int{1, 2, 3, 5, 8, 13, 22, 36, 60, 100} {
		out = append(out, limiters.PerSecond(n))
	}
	return out
}

func planOf(t *testing.T, log []byte, o accesslog.Options, c Config) *Plan {
	t.Helper()
	r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.log", R: bytes.NewReader(log)}}, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Run(context.Background(), r, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// On the synthetic shop's log, each algorithm's suggestion at a spare of
// 0.1% refuses at most 0.1% of the normal users, and every abuser.
func TestSuggestionSparesUsersCatchesAbusers(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	var log bytes.Buffer
	truth, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 6000, Span: 10 * time.Minute, Abusers: 3, Offices: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, log.Bytes(), accesslog.Options{}, Config{Limits: sweep(), Spare: 0.001})
	ids := map[string]int{}
	for i, c := range p.clientsByID {
		ids[c] = i
	}
	t.Logf("%d lines, %d clients (%d normal users, %d abusers, %d office)", truth.Lines, p.Clients, len(truth.Normal), len(truth.Abusers), len(truth.Offices))
	if p.Requests != truth.Lines || p.Skipped != 0 {
		t.Fatalf("%d requests, %d skipped; want the %d lines written, none skipped", p.Requests, p.Skipped, truth.Lines)
	}
	for _, s := range p.Suggestions {
		if !s.Found {
			t.Errorf("%s: no suggestion (%s refuses %d clients)", s.Algorithm, s.Point.Limit, s.Point.Clients)
			continue
		}
		refused := func(key string) bool {
			id, ok := ids[key]
			return ok && id < len(s.Point.refusedOf) && s.Point.refusedOf[id] > 0
		}
		normal, seen := 0, 0
		for _, k := range truth.Normal {
			if _, ok := ids[k]; ok {
				seen++
			}
			if refused(k) {
				normal++
			}
		}
		if float64(normal) > 0.001*float64(seen) {
			t.Errorf("%s at %s: %d of %d normal users refused; want at most 0.1%%", s.Algorithm, s.Point.Limit, normal, seen)
		}
		for _, k := range truth.Abusers {
			if !refused(k) {
				t.Errorf("%s at %s: abuser %s never refused", s.Algorithm, s.Point.Limit, k)
			}
		}
		t.Logf("%-15s %-5s refuses %d normal users of %d, every abuser", s.Algorithm, s.Point.Limit, normal, seen)
	}
	if len(p.Shared) != 1 || p.Shared[0].Key != truth.Offices[0] {
		t.Errorf("keys that look like many users: %+v; want the office %s alone", p.Shared, truth.Offices[0])
	}
}

// The same traffic as JSON lines and as the combined format plans alike.
func TestJSONPlansAsCombined(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	var combined, json bytes.Buffer
	s := synthlog.Shop{Users: 1000, Span: 10 * time.Minute, Abusers: 2, Offices: 1, Seed: 3}
	if _, err := synthlog.WriteShop(&combined, s); err != nil {
		t.Fatal(err)
	}
	s.Format = "json"
	if _, err := synthlog.WriteShop(&json, s); err != nil {
		t.Fatal(err)
	}
	c := Config{Limits: sweep()[:6], Spare: 0.01}
	a := planOf(t, combined.Bytes(), accesslog.Options{}, c)
	b := planOf(t, json.Bytes(), accesslog.Options{Format: accesslog.JSON}, c)
	for _, p := range []*Plan{a, b} {
		p.Took, p.Config.Workers, p.clientsByID = 0, 0, nil
	}
	if a.Requests == 0 || a.Logged429 == 0 {
		t.Fatalf("the log: %d requests, %d refused (429); want both", a.Requests, a.Logged429)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("as combined and as JSON, the plans differ:\n%+v\n%+v", a, b)
	}
}

// A plan decides as ratelab replay does: for every algorithm at every
// limit, each key's refusals are replay's (harness.Replay, replay's
// engine, with the limiter replay makes), on a trace of fractional times
// and costs above 1.
func TestPlanDecidesAsReplay(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	rng := rand.New(rand.NewPCG(36, 1))
	var trace bytes.Buffer
	at := 0.0
	for range 6000 {
		at += rng.ExpFloat64() * 0.002
		key := fmt.Sprintf("user-%d", int(math.Sqrt(float64(rng.IntN(1600)))))
		fmt.Fprintf(&trace, "%.6f,%s,%d\n", at, key, 1+rng.IntN(3))
	}
	limits := []limiters.Limit{limiters.PerSecond(2), limiters.PerSecond(5), limiters.PerSecond(13), limiters.PerSecond(30)}
	p := planOf(t, trace.Bytes(), accesslog.Options{Format: accesslog.CSV, Reorder: -1}, Config{Limits: limits})
	if p.Requests != 6000 {
		t.Fatalf("%d requests planned, want 6000", p.Requests)
	}
	for _, pt := range p.Sweep {
		l, err := composite.New(pt.Algorithm, []limiters.Limit{pt.Limit}, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := harness.Replay(context.Background(), workloads.NewTraceReader(bytes.NewReader(trace.Bytes())), l, false, &out); err != nil {
			t.Fatal(err)
		}
		l.Close()
		replayed := map[string]int32{}
		var total int64
		dec := json.NewDecoder(&out)
		for dec.More() {
			var line struct {
				Key     string `json:"key"`
				Allowed bool   `json:"allowed"`
			}
			if err := dec.Decode(&line); err != nil {
				t.Fatal(err)
			}
			if !line.Allowed {
				replayed[line.Key]++
				total++
			}
		}
		planned := map[string]int32{}
		for id, n := range pt.refusedOf {
			if n > 0 {
				planned[p.clientsByID[id]] = n
			}
		}
		if pt.Refused != total || !maps.Equal(planned, replayed) {
			t.Errorf("%s at %s: the plan refused %d (%d keys), replay %d (%d keys)", pt.Algorithm, pt.Limit, pt.Refused, len(planned), total, len(replayed))
		}
		if total == 0 || total == 6000 {
			t.Errorf("%s at %s: %d of 6000 refused: a limit that tells nothing apart", pt.Algorithm, pt.Limit, total)
		}
	}
}

// The requests the log's server refused (429) are demand by default; with
// DropRefused they are left out, of the decisions and of the peaks.
func TestRefusedCountOrDrop(t *testing.T) {
	log := []byte(`10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "a"
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 429 0 "-" "a"
10.0.0.1 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "a"
10.0.0.2 - - [28/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "b"
`)
	for _, c := range []struct {
		drop                bool
		decided, refused    int
		peak                float64
		clientsWithRefusals int64
	}{
		{drop: false, decided: 4, refused: 1, peak: 3, clientsWithRefusals: 1},
		{drop: true, decided: 3, refused: 0, peak: 2, clientsWithRefusals: 0},
	} {
		p := planOf(t, log, accesslog.Options{}, Config{Limits: []limiters.Limit{limiters.PerSecond(2)}, Algorithms: []limiters.Algorithm{limiters.SlidingLog}, DropRefused: c.drop})
		pt := p.Sweep[0]
		if p.Requests != 4 || p.Logged429 != 1 || p.Decided != c.decided || pt.Refused != int64(c.refused) || pt.Clients != c.clientsWithRefusals || p.Peaks.Max != c.peak {
			t.Errorf("drop %v: %d requests, %d logged 429, %d decided, %d refused of %d clients, peak %v; want 4, 1, %d, %d of %d, %v",
				c.drop, p.Requests, p.Logged429, p.Decided, pt.Refused, pt.Clients, p.Peaks.Max, c.decided, c.refused, c.clientsWithRefusals, c.peak)
		}
	}
}

// At a window's edge the fixed window alone admits what every other
// policy refuses; the three buckets, one policy, count as one.
func TestAloneAtTheEdge(t *testing.T) {
	trace := []byte("0.9,a\n0.95,a\n1.0,a\n1.05,a\n")
	p := planOf(t, trace, accesslog.Options{Format: accesslog.CSV, Reorder: -1}, Config{Limits: []limiters.Limit{limiters.PerSecond(2)}})
	for _, pt := range p.Sweep {
		wantRefused, wantLets := int64(2), int64(0)
		if pt.Algorithm == limiters.FixedWindow {
			wantRefused, wantLets = 0, 2
		}
		if pt.Refused != wantRefused || pt.OnlyLets != wantLets || pt.Only != 0 {
			t.Errorf("%s: refused %d, alone admitted %d, alone refused %d; want %d, %d, 0", pt.Algorithm, pt.Refused, pt.OnlyLets, pt.Only, wantRefused, wantLets)
		}
	}
	fam, n := familiesOf([]limiters.Algorithm{limiters.GCRA, limiters.FixedWindow, limiters.TokenBucket, limiters.SlidingLog, limiters.LeakyBucket})
	if n != 3 || !slices.Equal(fam, []int{0, 1, 0, 2, 0}) {
		t.Errorf("familiesOf = %v, %d; want [0 1 0 2 0], 3", fam, n)
	}
}

// A client's series keeps its buckets from its first on, and merges them
// in pairs as the grid widens, as a series from the log's start would.
func TestSeriesHalves(t *testing.T) {
	for from := range 5 {
		for n := 1; n < 8; n++ {
			c := &client{from: from}
			full := make([]uint32, from+n)
			for k := range n {
				c.series = append(c.series, uint32(10*k+from+1))
				full[from+k] = uint32(10*k + from + 1)
			}
			c.halve()
			var want []uint32
			for i := 0; i < len(full); i += 2 {
				v := full[i]
				if i+1 < len(full) {
					v = max(v, full[i+1])
				}
				want = append(want, v)
			}
			got := make([]uint32, c.from+len(c.series))
			copy(got[c.from:], c.series)
			if !slices.Equal(got, want) {
				t.Errorf("from %d, %d buckets: halved to %v from %d, want %v", from, n, c.series, c.from, want)
			}
		}
	}
}

// Of two policies, what one alone refuses the other alone admits.
func TestAloneOfTwo(t *testing.T) {
	trace := []byte("0.9,a\n0.95,a\n1.0,a\n1.05,a\n")
	p := planOf(t, trace, accesslog.Options{Format: accesslog.CSV, Reorder: -1},
		Config{Limits: []limiters.Limit{limiters.PerSecond(2)}, Algorithms: []limiters.Algorithm{limiters.FixedWindow, limiters.SlidingLog}})
	fixed, log := p.Sweep[0], p.Sweep[1]
	if fixed.OnlyLets != 2 || fixed.Only != 0 || log.Only != 2 || log.OnlyLets != 0 {
		t.Errorf("fixed alone admitted %d, refused %d; log alone refused %d, admitted %d; want 2, 0, 2, 0", fixed.OnlyLets, fixed.Only, log.Only, log.OnlyLets)
	}
}

func TestConfigRejected(t *testing.T) {
	one := []limiters.Limit{limiters.PerSecond(2)}
	for _, c := range []struct {
		c    Config
		want string
	}{
		{Config{Limits: one, Algorithms: []limiters.Algorithm{limiters.GCRA, limiters.GCRA}}, "gcra twice"},
		{Config{Spare: 1}, "spare"}, // no sweep (the policy alone), and still checked
		{Config{Limits: []limiters.Limit{limiters.PerSecond(5), limiters.PerSecond(2)}}, "increasing order"},
		{Config{Limits: []limiters.Limit{limiters.PerSecond(5), limiters.PerMinute(20)}}, "one period"},
		{Config{Limits: one, Spare: 1}, "spare"},
	} {
		if err := c.c.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error saying %q", c.c, err, c.want)
		}
	}
}

// An interrupted plan is an error, not the plan of part of a log.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, _ := accesslog.NewReader([]accesslog.Input{{Name: "t", R: strings.NewReader("0,a\n1,b\n")}}, accesslog.Options{Format: accesslog.CSV})
	if _, err := Run(ctx, r, Config{Limits: sweep()}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with its context done: %v; want context.Canceled", err)
	}
}

// The least N that spares all but the spare share is exact for the
// sliding log: at it, the sliding log refuses no more; one less, more.
func TestSparingIsExact(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 2000, Span: 10 * time.Minute, Abusers: 2, Offices: 1, Seed: 11, Format: "json", Millis: true}); err != nil {
		t.Fatal(err)
	}
	const spare = 0.002
	first := planOf(t, log.Bytes(), accesslog.Options{Format: accesslog.JSON}, Config{Limits: sweep()[:1], Spare: spare, Algorithms: []limiters.Algorithm{limiters.SlidingLog}})
	n := int(first.Peaks.Sparing)
	p := planOf(t, log.Bytes(), accesslog.Options{Format: accesslog.JSON}, Config{Spare: spare, Algorithms: []limiters.Algorithm{limiters.SlidingLog},
		Limits: []limiters.Limit{limiters.PerSecond(n - 1), limiters.PerSecond(n)}})
	allowed := int64(spare * float64(p.Clients))
	below, at := p.Sweep[0], p.Sweep[1]
	t.Logf("%d clients, spare %d: N = %d; at %d the sliding log refuses %d, at %d %d", p.Clients, allowed, n, n-1, below.Clients, n, at.Clients)
	if at.Clients > allowed || below.Clients <= allowed {
		t.Errorf("N = %d: the sliding log refuses %d clients at %d and %d at %d; want at most %d at N, more below", n, below.Clients, n-1, at.Clients, n, allowed)
	}
}

// A log shorter than two of the limits' periods says so.
func TestShortLogSaysSo(t *testing.T) {
	p := planOf(t, []byte("0,a\n60,a\n3600,b\n"), accesslog.Options{Format: accesslog.CSV}, Config{Limits: []limiters.Limit{limiters.PerMinute(1000)}})
	if note := p.File("t.csv", nil).Rows[0].Note; strings.Contains(note, "less than two of the limits' periods") {
		t.Errorf("a 1h log at a limit per minute: note %q; want nothing said of its span", note)
	}
	p = planOf(t, []byte("0,a\n60,a\n"), accesslog.Options{Format: accesslog.CSV}, Config{Limits: []limiters.Limit{{N: 1000, Per: 24 * time.Hour}}})
	if note := p.File("t.csv", nil).Rows[0].Note; !strings.Contains(note, "The log spans 1m0s, less than two of the limits' periods (24h0m0s)") {
		t.Errorf("a 1-minute log at a limit per day: note %q; want it said", note)
	}
}

// An agent field named wrong is said in the plan's note, with the flag
// and the field, rather than every client shown with no agents.
func TestUnseenFieldSaid(t *testing.T) {
	log := `{"ts":1795860000.1,"remote_addr":"100.64.0.1","request":{"headers":{"User-Agent":["ShopApp/4.2.1"]}}}
{"ts":1795860000.2,"remote_addr":"100.64.0.1","request":{"headers":{"User-Agent":["ShopApp/4.2.0"]}}}
`
	c := Config{Limits: []limiters.Limit{limiters.PerSecond(1)}} // the second request refused: the client is among the top
	p := planOf(t, []byte(log), accesslog.Options{Format: accesslog.JSON, Agent: ".request.headers.user_agent"}, c)
	want := "--agent .request.headers.user_agent: no line read has the field, and what it was to say counts nothing."
	if note := p.File("t.json", nil).Rows[0].Note; !strings.Contains(note, want) {
		t.Errorf("note %q; want %q", note, want)
	}
	p = planOf(t, []byte(log), accesslog.Options{Format: accesslog.JSON, Agent: ".request.headers.User-Agent"}, c)
	if len(p.Unseen) != 0 || len(p.Top) != 1 || p.Top[0].Agents != 2 {
		t.Errorf("unseen %q, top %+v; want none, and two agents (the arrays' first values)", p.Unseen, p.Top)
	}
}

// --current reads the limit a user runs today: ratelab's words (an
// algorithm or not, several limits), a tier file, nginx's limit_req lines
// (a bucket of the zone's rate and burst+1, the zones a map applies to a
// key, none where its key is empty); and says what is wrong with one it
// cannot read, naming the line.
func TestParseCurrent(t *testing.T) {
	ip, _ := accesslog.ParseKey("ip")
	for _, tt := range []struct {
		arg, file string
		want      string // Name
		tiers     map[string][]limiters.Limit
		product   products.Product // a product's configuration: read as its own
	}{
		{arg: "100/min", want: "100/min (sliding-log)", tiers: map[string][]limiters.Limit{"current": {{N: 100, Per: time.Minute}}}},
		{arg: "gcra 10/s burst 20", want: "10/s burst 20 (gcra)", tiers: map[string][]limiters.Limit{"current": {{N: 10, Per: time.Second, Burst: 20}}}},
		{arg: "5/s, 40/min", want: "5/s, 40/min (sliding-log)", tiers: map[string][]limiters.Limit{"current": {{N: 5, Per: time.Second}, {N: 40, Per: time.Minute}}}},
		{arg: "tiers.yaml", file: "algorithm: fixed-window\ndefault_tier: free\ntiers:\n  free: [10/s]\n", want: "tiers.yaml",
			tiers: map[string][]limiters.Limit{"free": {{N: 10, Per: time.Second}}}},
		{arg: "nginx.conf", file: "limit_req_zone $binary_remote_addr zone=one:10m rate=5r/s; # the example\nlocation / {\n  limit_req zone=one burst=10;\n}\n",
			want: "nginx.conf: one rate=5r/s burst=10", product: products.Nginx{}},
		{arg: "haproxy.cfg", file: "backend t\n    stick-table type ip size 1k expire 20s store http_req_rate(10s)\n    http-request track-sc0 src table t\n    http-request deny if { sc_http_req_rate(0) gt 100 }\n",
			want: "haproxy.cfg: http_req_rate(10s) gt 100", product: products.HAProxy{}},
	} {
		var file []byte
		if tt.file != "" {
			file = []byte(tt.file)
		}
		c, err := ParseCurrent(tt.arg, file, tt.arg, ip)
		if err != nil {
			t.Errorf("ParseCurrent(%q): %v", tt.arg, err)
			continue
		}
		if c.Name != tt.want || !reflect.DeepEqual(c.Tiers.Tiers, tt.tiers) || c.product != tt.product {
			t.Errorf("ParseCurrent(%q) = %q, %v, %v; want %q, %v, %v", tt.arg, c.Name, c.Tiers.Tiers, c.product, tt.want, tt.tiers, tt.product)
		}
	}
	for _, tt := range []struct{ arg, file, want string }{
		{"100/fortnight", "", "not a rate"},
		{"nginx.conf", "limit_req zone=api burst=5;\n", "no limit_req_zone names it"},
		{"nginx.conf", "limit_req_zone $binary_remote_addr zone=api:10m rate=5r/h;\nlimit_req zone=api;\n", "nginx.conf:1: rate=5r/h"},
		{"tiers.yaml", "tiers: [", "neither nginx's limit_req lines nor a tier file"},
	} {
		var file []byte
		if tt.file != "" {
			file = []byte(tt.file)
		}
		if _, err := ParseCurrent(tt.arg, file, tt.arg, ip); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCurrent(%q, %q): %v; want an error saying %q", tt.arg, tt.file, err, tt.want)
		}
	}
}

// The sweep is asked for, and the policy does not rest on it: a plan with
// none (Limits empty, a client's peak over a second) sets the same bucket,
// refusing the same keys and requests, the same windows and classes, and
// no sweep or one-number suggestion.
func TestPolicyWithoutSweep(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 2000, Span: 10 * time.Minute, Abusers: 3, Offices: 1, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	with := planOf(t, log.Bytes(), accesslog.Options{}, Config{Limits: sweep(), Spare: 0.001})
	alone := planOf(t, log.Bytes(), accesslog.Options{}, Config{Spare: 0.001})
	if len(alone.Sweep) != 0 || len(alone.Suggestions) != 0 || len(with.Sweep) == 0 {
		t.Fatalf("%d points and %d suggestions without a sweep, %d with one", len(alone.Sweep), len(alone.Suggestions), len(with.Sweep))
	}
	if alone.Bucket != with.Bucket || !slices.Equal(alone.Caught, with.Caught) || alone.Windows != with.Windows || alone.SharedTier != with.SharedTier {
		t.Errorf("without a sweep: %s refusing %d keys, %d requests; windows %+v; shared %+v\nwith one: %s refusing %d keys, %d requests; windows %+v; shared %+v",
			alone.Bucket.Policy(), alone.Bucket.Clients, alone.Bucket.Refused, alone.Windows, alone.SharedTier,
			with.Bucket.Policy(), with.Bucket.Clients, with.Bucket.Refused, with.Windows, with.SharedTier)
	}
	if len(alone.Classes) != len(with.Classes) || alone.Verdict() != with.Verdict() {
		t.Errorf("%d classes without a sweep, %d with; verdicts\n%s\n%s", len(alone.Classes), len(with.Classes), alone.Verdict(), with.Verdict())
	}
	if with.Bucket.Clients == 0 {
		t.Errorf("the bucket %s refuses no key: the comparison proves little", with.Bucket.Policy())
	}
}
