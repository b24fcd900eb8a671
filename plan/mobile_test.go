package plan

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/internal/config"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// A mobile API's log, where one number a period fails: its app users open
// with a fan-out as high in a second as a scraper sends. The one-period
// suggestion refuses none of the crawler, the scrapers and the stuck app;
// the bucket suggested (a rate and a burst) refuses every one of them and
// no app user; the carrier-NAT addresses get a tier of their own. On two
// logs of that kind.
func TestMobileNeedsTwoNumbers(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	for _, seed := range []uint64{1, 2} {
		var log bytes.Buffer
		truth, err := synthlog.WriteMobile(&log, synthlog.Mobile{Seed: seed, Users: 600, PerNAT: 30})
		if err != nil {
			t.Fatal(err)
		}
		key, _ := accesslog.ParseKey(".request.remote_ip")
		o := accesslog.Options{Format: accesslog.JSON, Key: key, Agent: ".request.headers.User-Agent", Path: ".request.uri"}
		var limits []limiters.Limit
		for _, n := range []int{10, 20, 30, 40, 60, 100} {
			limits = append(limits, limiters.PerSecond(n))
		}
		// The rates around the users' and the senders' (each a bucket the
		// frontier decides again, which the race detector makes slow).
		var rates []limiters.Limit
		for _, r := range DefaultRates {
			if perSecond(r) >= 0.1 && perSecond(r) <= 20 {
				rates = append(rates, r)
			}
		}
		// HAProxy on the first log (read again, for the test's replay, at
		// seconds a log under the race detector): the same keys, its
		// refusals to the request as the test replays them, the carrier
		// NATs' tier raised to spare them.
		var ps []products.Product
		if seed == 1 {
			ps = products.All
		}
		p := planOf(t, log.Bytes(), o, Config{Limits: limits, Rates: rates, Spare: 0.001, Algorithms: []limiters.Algorithm{limiters.SlidingLog, limiters.GCRA}, Products: ps})
		if len(ps) > 0 {
			chosen := checkProducts(t, fmt.Sprintf("seed %d", seed), p, readEntries(t, log.Bytes(), o), key)
			for _, name := range []string{"haproxy", "traefik", "caddy", "envoy", "kong", "aws-waf", "cloudflare", "cloud-armor", "envoy-rls"} {
				if c := chosen[name]; c.Strays+c.Missed > 0 || c.Clients != int64(len(truth.Sustained)) {
					t.Errorf("seed %d: %s's %s refuses %d keys, %d the plan spares, sparing %d it refuses; want the %d sustained", seed, name, choiceRules(c), c.Clients, c.Strays, c.Missed, len(truth.Sustained))
				}
			}
			// Each product's file given back as the limit run today
			// (--current) refuses what the plan said it does.
			for _, pp := range p.Products {
				if pp.Cannot != "" {
					continue // said, and checked, by checkProducts
				}
				text, err := p.ProductConfig(pp.Product, key, "mobile.json", "")
				if err != nil {
					t.Fatal(err)
				}
				cur, err := ParseCurrent("", []byte(text), pp.Product.File(), key)
				if err != nil {
					t.Fatal(err)
				}
				today := planOf(t, log.Bytes(), o, Config{Spare: 0.001, Rates: rates, Algorithms: []limiters.Algorithm{limiters.GCRA}, Current: &cur})
				if r := today.Current; r == nil || r.Clients != pp.Clients || r.Refused != pp.Refused {
					t.Errorf("seed %d: %s as --current refuses %+v; the plan said %d keys and %d requests", seed, pp.Product.File(), r, pp.Clients, pp.Refused)
				}
			}
		}
		for _, e := range p.Envelope {
			t.Logf("envelope %v: p50 %g p99 %g max %g sparing %d", e.Period, e.P50, e.P99, e.Max, e.Sparing)
		}
		for _, f := range p.Frontier {
			t.Logf("frontier %s: burst %d gap %+v (p50 %g p99 %g max %g): %d clients, %d requests refused (%d decided)", f.Rate, f.Burst, f.Gap, f.P50, f.P99, f.Max, f.Clients, f.Refused, f.decidedClients)
		}
		t.Logf("bucket %s: %d clients, %d requests; shared tier %+v", p.Bucket.Policy(), p.Bucket.Clients, p.Bucket.Refused, p.SharedTier)
		for _, s := range p.Suggestions {
			t.Logf("one number: %s %s: %d clients", s.Algorithm, s.Point.Limit, s.Point.Clients)
		}
		if l, err := limiters.ParseLimit(p.Bucket.Policy().String()); err != nil || l != p.Bucket.Policy() {
			t.Errorf("seed %d: the policy %q reads back as %v (%v)", seed, p.Bucket.Policy(), l, err)
		}
		caught := slices.Sorted(slices.Values(p.Caught))
		if want := slices.Sorted(slices.Values(truth.Sustained)); !slices.Equal(caught, want) {
			t.Errorf("seed %d: the bucket %s refuses %q; want every sustained client and no app user: %q", seed, p.Bucket.Policy(), caught, want)
		}
		if p.Bucket.decidedClients != p.Bucket.Clients || p.Bucket.Refused == 0 {
			t.Errorf("seed %d: the bucket decided refuses %d clients (%d requests); the curves say %d", seed, p.Bucket.decidedClients, p.Bucket.Refused, p.Bucket.Clients)
		}
		decided := 0
		for _, f := range p.Frontier {
			if f.decidedClients < 0 {
				continue // not decided: away from the answer
			}
			decided++
			if f.decidedClients != f.Clients {
				t.Errorf("seed %d: %s burst %d decided refuses %d clients; the curves say %d", seed, f.Rate, f.Burst, f.decidedClients, f.Clients)
			}
		}
		if decided < 3 {
			t.Errorf("seed %d: %d of the frontier's %d points decided; want the suggestion's neighbours", seed, decided, len(p.Frontier))
		}
		t.Logf("windows %s, %s: %d clients, %d requests", p.Windows.Short, p.Windows.Long, p.Windows.Clients, p.Windows.Refused)
		caught = slices.Sorted(slices.Values(p.WindowsCaught))
		if want := slices.Sorted(slices.Values(truth.Sustained)); !slices.Equal(caught, want) {
			t.Errorf("seed %d: the windows %s and %s refuse %q; want every sustained client and no app user: %q", seed, p.Windows.Short, p.Windows.Long, caught, want)
		}
		if p.Windows.decidedClients != p.Windows.Clients {
			t.Errorf("seed %d: the windows decided refuse %d clients; the envelope says %d", seed, p.Windows.decidedClients, p.Windows.Clients)
		}
		if cfg, err := config.Parse(p.TierFile("mobile.log")); err != nil {
			t.Errorf("seed %d: the tier file does not load: %v\n%s", seed, err, p.TierFile("mobile.log"))
		} else if got := cfg.Tiers.Users[truth.Shared[0]]; got != "shared" {
			t.Errorf("seed %d: the tier file puts %s in %q; want shared\n%s", seed, truth.Shared[0], got, p.TierFile("mobile.log"))
		}
		f := p.File("mobile.log", nil)
		figures := map[string]int{}
		for _, fig := range charts(f, f.Rows) {
			for _, panel := range fig.Panels {
				for _, l := range panel.Lines {
					if strings.HasPrefix(l.Name, "#") {
						figures[fig.Name]++
					}
				}
			}
		}
		if figures["plan-envelope"] != len(truth.Sustained) || figures["plan-frontier"] != len(truth.Sustained) {
			t.Errorf("seed %d: the clients refused drawn in the charts: %v; want %d in the envelope's and the frontier's", seed, figures, len(truth.Sustained))
		}
		if seed == 1 {
			// With --no-tiers the shared addresses are keys like the
			// others: no tier, and the policy chosen over them too. Thirty
			// users each, they need more than one user, far less than the
			// sustained senders, who still stand apart alone: spared.
			q := planOf(t, log.Bytes(), o, Config{Limits: limits, Rates: rates, Spare: 0.001, NoTiers: true, Algorithms: []limiters.Algorithm{limiters.SlidingLog}})
			if q.SharedTier.Keys != 0 || q.Users != p.Users+len(truth.Shared) {
				t.Errorf("--no-tiers: tier %+v, the policy chosen over %d keys; want no tier, over %d", q.SharedTier, q.Users, p.Users+len(truth.Shared))
			}
			if caught := slices.Sorted(slices.Values(q.Caught)); !slices.Equal(caught, slices.Sorted(slices.Values(truth.Sustained))) {
				t.Errorf("--no-tiers: the bucket %s refuses %q; want the sustained clients alone, %q", q.Bucket.Policy(), caught, truth.Sustained)
			}
		}
		var shared []string
		for _, c := range p.Shared {
			shared = append(shared, c.Key)
		}
		if slices.Sort(shared); !slices.Equal(shared, truth.Shared) || p.SharedTier.Keys != len(truth.Shared) {
			t.Errorf("seed %d: shared %q, tier %+v; want %q in a tier of their own", seed, shared, p.SharedTier, truth.Shared)
		}
		// One number a period misses the crawler: it sends 5 a second,
		// less than any app user's busiest second.
		for _, c := range p.Top {
			if c.Key == truth.Sustained[0] {
				t.Errorf("seed %d: the one-period suggestions refuse the crawler %s; the log is meant to show they do not", seed, c.Key)
			}
		}
	}
}
