package plan

import (
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// policyOf is the policy the plan chooses for a world's traffic, from its
// curves as Run finds them (each user of a key an agent of its own), the
// decisions left out: the curves predict them exactly
// (TestCurvesPredictTheBucket), and the rule is what is tested here.
func policyOf(t *testing.T, w synthlog.World, c Config) (*Plan, []synthlog.Request, []synthlog.KeyTruth) {
	t.Helper()
	reqs, keys := w.Generate()
	seed := maphash.MakeSeed()
	entries := make([]accesslog.Entry, len(reqs))
	for i, r := range reqs {
		// A key's one path and agent where its class has them (a
		// poller's); else one of the API's many paths, and its user's
		// agent.
		k := keys[r.Key]
		e := accesslog.Entry{At: int64(r.At), Key: k.Key, N: 1, Agent: maphash.Comparable(seed, r.User) | 1, Path: maphash.Comparable(seed, i%200+1000) | 1}
		if k.Path != "" {
			e.Path = maphash.String(seed, k.Path) | 1
		}
		if k.Agent != "" {
			e.Agent = maphash.String(seed, k.Agent) | 1
		}
		entries[i] = e
	}
	return policyFrom(t, entries, c), reqs, keys
}

// policyFrom is the policy the plan chooses for requests read (in time
// order), the decisions left out.
func policyFrom(t *testing.T, entries []accesslog.Entry, c Config) *Plan {
	t.Helper()
	c.Limits = []limiters.Limit{limiters.PerSecond(10)}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	p := &Plan{Config: c, Requests: len(entries), Decided: len(entries)}
	cs := newClients(int64(time.Second))
	cv := newCurves(c.Periods, c.Rates)
	var decided chunks
	for i := range entries {
		e := &entries[i]
		id, _ := cs.see(e, true)
		cv.see(id, e.At, int64(e.N))
		decided.add(logged{id: id, n: int32(e.N), at: e.At})
	}
	p.Span = time.Duration(entries[len(entries)-1].At - entries[0].At)
	p.Shared = shared(cs, c.Top, cs.grid)
	users := p.curves(cs, cv, decided)
	if c.Current != nil {
		if err := p.decideCurrent(cs, kept{shards: []chunks{decided}}, users); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Products) > 0 && users != nil {
		p.decideProducts(cs.keys(), &kept{shards: []chunks{decided}})
	}
	return p
}

// truth is what brute force over a world's keys says: at each rate of
// the frontier, the least any abuser needs over the most any legitimate
// key does (the keys shared by many users left out, as the plan leaves
// them); the widest of those, where the abusers are minApart above; and
// whether some pair of windows refuses every abuser and no legitimate
// key in each of its forms (each N the legitimate keys' most times 1.5
// and no less than their most in twice its length, every abuser above
// twice N in one of the two).
type truth struct {
	bucket  float64
	windows bool
}

func truthOf(reqs []synthlog.Request, keys []synthlog.KeyTruth, periods []time.Duration, span time.Duration) truth {
	times := make([][]int64, len(keys))
	for _, r := range reqs {
		times[r.Key] = append(times[r.Key], int64(r.At))
	}
	burst, peak := leastBurst, mostIn
	var tr truth
	for _, r := range DefaultRates {
		T := int64(r.Interval())
		var legit, abuser int64 = 0, math.MaxInt64
		for k, ts := range times {
			switch b := burst(ts, T); keys[k].Role {
			case synthlog.Legit:
				legit = max(legit, b)
			case synthlog.Abuser:
				abuser = min(abuser, b)
			}
		}
		if abuser < math.MaxInt64 && abuser-legit >= minApart {
			tr.bucket = max(tr.bucket, float64(abuser)/float64(max(legit, 1)))
		}
	}
	var reached []time.Duration
	for i, d := range periods {
		if i == 0 || d <= span {
			reached = append(reached, d)
		}
	}
	// Each key's most in any window of each length, and of twice it.
	peaks := make([][][2]int64, len(keys))
	for k, ts := range times {
		for _, d := range reached {
			peaks[k] = append(peaks[k], [2]int64{peak(ts, int64(d)), peak(ts, int64(2*d))})
		}
	}
	for i := range reached {
		for j := i + 1; j < len(reached); j++ {
			var n [2]int64
			for k := range times {
				// The windows spare the pollers as they spare customers.
				if keys[k].Role == synthlog.Legit || keys[k].Role == synthlog.Poller {
					for x, l := range []int{i, j} {
						n[x] = max(n[x], int64(math.Ceil(1.5*float64(peaks[k][l][0]))), peaks[k][l][1])
					}
				}
			}
			if n[0] >= n[1] {
				continue
			}
			all, some := true, false
			for k := range times {
				if keys[k].Role == synthlog.Abuser {
					some = true
					all = all && (peaks[k][i][0] > 2*n[0] || peaks[k][j][0] > 2*n[1])
				}
			}
			tr.windows = tr.windows || some && all
		}
	}
	return tr
}

// leastBurst is the least burst at rate 1/T of requests at ts: the most,
// over every stretch i..j, of its requests less the rate times its
// length.
func leastBurst(ts []int64, T int64) int64 {
	var most int64 = 1
	lead := int64(math.MinInt64)
	for j, t := range ts {
		lead = max(lead, t-T*int64(j)) // t_i − T·(requests before i)
		most = max(most, (T*int64(j+1)-t+lead+T-1)/T)
	}
	return most
}

// mostIn is the most requests at ts in any window of d.
func mostIn(ts []int64, d int64) int64 {
	var most int64
	for i, j := 0, 0; j < len(ts); j++ {
		for ts[i] <= ts[j]-d {
			i++
		}
		most = max(most, int64(j-i+1))
	}
	return most
}

// The plan's rule on 100 random worlds of other shapes than the ones it
// was built on (synthlog.RandomWorld: fan-out apps, dashboards, batch
// syncs, relays, cron jobs, shared keys, steady pollers; scrapers,
// enumerators, runaway retries, greedy batches, slow scrapers, botnets of
// 1% to 10% of the keys). Never confidently wrong: where it says keys
// stand apart, every one of them is an abuser and its bucket and windows
// refuse no other key. Where brute force says some bucket sets every
// abuser 3× (--margin) apart from every legitimate key (the pollers and
// the shared keys kept apart, as the plan keeps them), the plan's bucket
// refuses every abuser, a botnet's keys too, and no legitimate key, and
// so do its windows where some pair can in each of its forms. Every
// poller is named as one and refused nothing: by the bucket, its tier,
// or the windows. Where it says none stands apart, its bucket and
// windows keep --spare. No two classes of a plan share a name.
// strictProducts are the products held, in every random world, to refuse
// no key the plan spares (HAProxy and Traefik are judged apart: HAProxy
// by more figures, Traefik by what it cannot set apart).
var strictProducts = []string{"caddy", "envoy", "envoy-rls", "kong", "aws-waf", "cloudflare", "cloud-armor"}

func TestPolicyOnRandomWorlds(t *testing.T) {
	const worlds = 120
	var separable, separated, right, windowsSeparable, windowsRight, none, noAbuser int
	var pollerWorlds, pollers, botnets, botnetsApart int
	var haWorlds, haSame, haStrays, haMissed, haApart, haApartSame, trApart, trApartSame int
	apartSame, banned := map[string]int{}, map[string]int64{}
	for seed := range uint64(worlds) {
		w := synthlog.RandomWorld(seed + 1)
		p, reqs, keys := policyOf(t, w, Config{Spare: 0.001, Products: products.All})
		tr := truthOf(reqs, keys, DefaultPeriods, p.Span)
		entries := make([]accesslog.Entry, len(reqs))
		for i, r := range reqs {
			entries[i] = accesslog.Entry{At: int64(r.At), Key: keys[r.Key].Key, N: 1}
		}
		chosen := checkProducts(t, fmt.Sprintf("seed %d", seed+1), p, entries, accesslog.KeySpec{})
		// Every product but HAProxy and Traefik (below): no key the plan
		// spares refused, and where the plan sets keys apart, counted when
		// it refuses all of them.
		for _, name := range strictProducts {
			c := chosen[name]
			switch {
			case c.Strays > 0:
				t.Errorf("seed %d: %s's %s (%s ×%g) refuses %d keys the plan spares (%q)", seed+1, name, choiceRules(c), c.Of, c.Scale, c.Strays, c.StrayKeys)
			case p.Separated && c.Missed == 0:
				apartSame[name]++
				banned[name] += c.Banned
			}
		}
		if tr := chosen["traefik"]; tr.Strays > 0 {
			t.Errorf("seed %d: traefik's %s (%s ×%g) refuses %d keys the plan spares (%q)", seed+1, choiceRules(tr), tr.Of, tr.Scale, tr.Strays, tr.StrayKeys)
		} else if p.Separated {
			trApart++
			if tr.Missed == 0 {
				trApartSame++
			}
		}
		if ha, ok := chosen["haproxy"]; ok {
			haWorlds++
			if ha.Strays+ha.Missed == 0 {
				haSame++
			}
			if p.Separated {
				haApart++
				if ha.Strays+ha.Missed == 0 {
					haApartSame++
				}
			}
			if ha.Missed > 0 {
				haMissed++
				t.Logf("seed %d: haproxy's %s (%s ×%g) spares %d keys the plan refuses (%q)", seed+1, choiceRules(ha), ha.Of, ha.Scale, ha.Missed, ha.MissedKeys)
			}
			if ha.Strays > 0 {
				haStrays++
				t.Errorf("seed %d: haproxy's %s (%s ×%g) refuses %d keys the plan spares (%q), sparing %d", seed+1, choiceRules(ha), ha.Of, ha.Scale, ha.Strays, ha.StrayKeys, ha.Missed)
			}
		}
		role := map[string]synthlog.Role{}
		var abusers []string
		for _, k := range keys {
			role[k.Key] = k.Role
			if k.Role == synthlog.Abuser {
				abusers = append(abusers, k.Key)
			}
		}
		slices.Sort(abusers)
		caught := slices.Sorted(slices.Values(p.Caught))
		pair := slices.Sorted(slices.Values(p.WindowsCaught))
		if len(abusers) == 0 {
			noAbuser++
		}
		for _, c := range w.Classes {
			t.Logf("seed %d: %d × %s (%s) %s", seed+1, c.Keys, c.Name, c.Role, c.Shape.Describe())
		}
		t.Logf("seed %d: truth %+v; %s", seed+1, tr, p.Verdict())
		if p.Separated {
			separated++
			for _, k := range caught {
				if role[k] != synthlog.Abuser {
					t.Errorf("seed %d: the bucket %s sets apart %s, a %s key: %s", seed+1, p.Bucket.Policy(), k, role[k], p.Verdict())
				}
			}
		} else {
			none++
			if most := int64(math.Floor(p.Config.Spare * float64(p.Users))); p.Bucket.Clients > most {
				t.Errorf("seed %d: nothing stands apart, and the bucket %s refuses %d keys; --spare allows %d", seed+1, p.Bucket.Policy(), p.Bucket.Clients, most)
			}
		}
		if p.Windows.Separated {
			for _, k := range pair {
				if role[k] != synthlog.Abuser {
					t.Errorf("seed %d: the windows %s, %s set apart %s, a %s key", seed+1, p.Windows.Short, p.Windows.Long, k, role[k])
				}
			}
		} else if most := int64(math.Floor(p.Config.Spare * float64(p.Users))); p.Windows.Clients > most {
			t.Errorf("seed %d: no windows set keys apart, and %s, %s refuse %d keys; --spare allows %d", seed+1, p.Windows.Short, p.Windows.Long, p.Windows.Clients, most)
		}
		pollers += checkPollers(t, seed+1, p, reqs, keys)
		names := map[string]bool{}
		for _, c := range p.Classes {
			if c.Refused && c.Key != "" {
				continue // named by its key
			}
			if names[c.Shape()] {
				t.Errorf("seed %d: two classes named %q", seed+1, c.Shape())
			}
			names[c.Shape()] = true
		}
		if slices.ContainsFunc(keys, func(k synthlog.KeyTruth) bool { return k.Role == synthlog.Poller }) {
			pollerWorlds++
		}
		botnet := slices.ContainsFunc(w.Classes, func(c synthlog.Class) bool { return c.Name == "botnet" })
		if botnet {
			botnets++
		}
		if tr.bucket < p.Config.Margin {
			continue
		}
		separable++
		if botnet && slices.Equal(caught, abusers) {
			botnetsApart++
		}
		if !slices.Equal(caught, abusers) {
			t.Errorf("seed %d: brute force sets every abuser %.3g× apart; the bucket %s refuses %d keys (%s)", seed+1, tr.bucket, p.Bucket.Policy(), len(caught), p.Verdict())
			continue
		}
		right++
		if tr.windows {
			windowsSeparable++
			if !slices.Equal(pair, abusers) {
				t.Errorf("seed %d: some pair of windows refuses every abuser and no other key in each form; the plan's %s, %s refuse %d keys", seed+1, p.Windows.Short, p.Windows.Long, len(pair))
				continue
			}
			windowsRight++
		}
	}
	t.Logf("%d worlds (%d with no abuser): %d separable by a bucket, the plan right on %d; %d of those by windows too, right on %d; the plan set keys apart in %d, none in %d",
		worlds, noAbuser, separable, right, windowsSeparable, windowsRight, separated, none)
	t.Logf("haproxy: written for %d worlds, refusing the plan's keys exactly in %d, a key the plan spares in %d, sparing a key it refuses in %d; of the %d where the plan set keys apart, the same keys in %d", haWorlds, haSame, haStrays, haMissed, haApart, haApartSame)
	t.Logf("traefik: refusing no key the plan spares in any world; of the %d where the plan set keys apart, all of them in %d", trApart, trApartSame)
	for _, name := range strictProducts {
		t.Logf("%s: refusing no key the plan spares in any world; of the %d where the plan set keys apart, all of them and no other in %d (%d requests refused by a ban alone)", name, haApart, apartSame[name], banned[name])
	}
	if haApartSame < haApart*19/20 || apartSame["caddy"] < haApart*19/20 || apartSame["envoy"] < haApart*19/20 {
		t.Errorf("haproxy, caddy, envoy refuse the keys the plan sets apart in %d, %d, %d of %d worlds; want 19 in 20 at least", haApartSame, apartSame["caddy"], apartSame["envoy"], haApart)
	}
	t.Logf("%d worlds with pollers, %d pollers, each named and refused nothing; %d worlds with a botnet, %d of them separable and all set apart", pollerWorlds, pollers, botnets, botnetsApart)
	if pollerWorlds < worlds/5 || botnetsApart < worlds/20 {
		t.Errorf("the worlds drawn test too few pollers or botnets: %d worlds of pollers, %d of botnets set apart", pollerWorlds, botnetsApart)
	}
	if separable < worlds/4 || none < worlds/12 {
		t.Errorf("the worlds drawn are not varied enough to test the rule: %d of %d separable, %d where nothing stands apart", separable, worlds, none)
	}
}

// The B2B API whose integrations a rule fitted to fan-outs refused, two
// seeds of it, read as Traefik wrote it and keyed by its X-Api-Key
// header: the bucket and the windows refuse the four abusers and no
// customer, by a margin of 3× or more; the partner keys are spared (by
// a tier, or by the bucket as it is); the health checks, which carry no
// key, are counted apart; and the classes are the customers' own:
// dashboards, integrations and relays.
func TestB2B(t *testing.T) {
	key, err := accesslog.ParseKey("header:X-Api-Key")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{3, 4} {
		// In a file: 140 MB in memory cost seconds of page faults here,
		// the page cache a tenth of one.
		log, err := os.Create(filepath.Join(t.TempDir(), "access.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		w := synthlog.B2B(seed)
		_, keys, lines, err := w.WriteTraefik(log)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.json", R: log}}, accesslog.Options{Format: "traefik", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		var entries []accesslog.Entry
		for {
			e, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, e)
		}
		noKey, first := r.NoKey()
		if skipped, _ := r.Skipped(); skipped != noKey || noKey == 0 || len(entries)+noKey != lines || !strings.HasSuffix(first.Why, "/healthz") {
			t.Errorf("seed %d: %d requests, %d lines skipped, %d without a key (the first %v) of %d lines; want the health checks alone skipped", seed, len(entries), skipped, noKey, first, lines)
		}
		// A limit of 100 a minute, as many set by hand: it refuses every
		// integration, whose sync sends up to 300 in half a minute.
		today, err := ParseCurrent("100/min", nil, "", key)
		if err != nil {
			t.Fatal(err)
		}
		p := policyFrom(t, entries, Config{Spare: 0.001, Current: &today, Products: products.All, Key: key})
		t.Log(p.Verdict())
		// HAProxy's windows: the same keys, to the request as the test
		// replays them.
		// Traefik's, keyed by the header: none the plan spares; it
		// forgets a key idle two seconds, and misses what pauses between
		// its bursts (said, not asserted).
		chosen := checkProducts(t, fmt.Sprintf("seed %d", seed), p, entries, key)
		if ha := chosen["haproxy"]; ha.Strays+ha.Missed > 0 || ha.Clients != int64(len(p.Caught)) {
			t.Errorf("seed %d: haproxy's %s refuses %d keys, %d the plan spares, sparing %d it refuses; want the plan's %d", seed, choiceRules(ha), ha.Clients, ha.Strays, ha.Missed, len(p.Caught))
		}
		for _, name := range []string{"caddy", "envoy", "kong", "aws-waf", "cloudflare", "cloud-armor", "apigateway", "envoy-rls"} {
			if c := chosen[name]; c.Strays+c.Missed > 0 || c.Clients != int64(len(p.Caught)) {
				t.Errorf("seed %d: %s's %s refuses %d keys, %d the plan spares, sparing %d it refuses; want the plan's %d", seed, name, choiceRules(c), c.Clients, c.Strays, c.Missed, len(p.Caught))
			}
		}
		if tr := chosen["traefik"]; tr.Strays > 0 || tr.Clients == 0 {
			t.Errorf("seed %d: traefik's %s refuses %d keys, %d the plan spares; want some of the plan's and no other", seed, choiceRules(tr), tr.Clients, tr.Strays)
		} else {
			t.Logf("seed %d: traefik's %s (%s ×%g) refuses %d keys and %d requests, sparing %q of the plan's", seed, choiceRules(tr), tr.Of, tr.Scale, tr.Clients, tr.Refused, tr.MissedKeys)
		}
		var abusers, partners []string
		for _, k := range keys {
			switch k.Role {
			case synthlog.Abuser:
				abusers = append(abusers, k.Key)
			case synthlog.Shared:
				partners = append(partners, k.Key)
			}
		}
		slices.Sort(abusers)
		if caught := slices.Sorted(slices.Values(p.Caught)); !p.Separated || !slices.Equal(caught, abusers) || p.Bucket.Gap.Ratio() < 3 {
			t.Errorf("seed %d: the bucket %s (separated %v, %.3g× apart) refuses %q; want the abusers alone, %q", seed, p.Bucket.Policy(), p.Separated, p.Bucket.Gap.Ratio(), caught, abusers)
		}
		if pair := slices.Sorted(slices.Values(p.WindowsCaught)); !p.Windows.Separated || !slices.Equal(pair, abusers) {
			t.Errorf("seed %d: the windows %s, %s refuse %q; want the abusers alone", seed, p.Windows.Short, p.Windows.Long, pair)
		}
		var shared []string
		for _, c := range p.Shared {
			shared = append(shared, c.Key)
		}
		if slices.Sort(shared); !slices.Equal(shared, slices.Sorted(slices.Values(partners))) || p.SharedTier.Keys != len(partners) {
			t.Errorf("seed %d: the keys shared by many agents %q, tier %+v; want the partners', %q", seed, shared, p.SharedTier, partners)
		}
		// The integrations and the relays each a class of their own, the
		// dashboards the rest (the heaviest users, maybe, apart).
		var groups []int
		rest := 0
		for i, c := range p.Classes {
			if c.Keys == 150 && p.Current.ByClass[i] != 150 {
				t.Errorf("seed %d: 100/min refuses %d of the 150 integrations; want every one: %s", seed, p.Current.ByClass[i], p.Verdict())
			}
			if !c.Refused {
				groups = append(groups, c.Keys)
				if c.Keys != 150 && c.Keys != 40 {
					rest += c.Keys
				}
			}
		}
		if !slices.Contains(groups, 150) || !slices.Contains(groups, 40) || rest != 600 {
			t.Errorf("seed %d: classes of %v keys; want the integrations' 150 and the relays' 40 each a class, the dashboards' 600 the rest", seed, groups)
		}
	}
}

// checkPollers checks that the plan names each of a world's pollers as
// one, and refuses none of them: not its bucket, nor its windows, nor the
// pollers' tier (their least burst at its rate, by brute force, within
// its burst). It returns how many pollers there were.
func checkPollers(t *testing.T, seed uint64, p *Plan, reqs []synthlog.Request, keys []synthlog.KeyTruth) int {
	t.Helper()
	var want []string
	for _, k := range keys {
		if k.Role == synthlog.Poller {
			want = append(want, k.Key)
		}
	}
	if len(want) == 0 {
		return 0
	}
	var named []string
	for _, c := range p.Pollers {
		named = append(named, c.Key)
	}
	if slices.Sort(want); !slices.Equal(slices.Sorted(slices.Values(named)), want) || p.PollerTier.Keys != len(want) {
		t.Errorf("seed %d: pollers named %q (a tier of %d keys); want %q", seed, named, p.PollerTier.Keys, want)
	}
	tier := p.PollerTier.Policy
	T := int64(tier.Interval())
	for _, key := range want {
		if slices.Contains(p.Caught, key) || slices.Contains(p.WindowsCaught, key) {
			t.Errorf("seed %d: the poller %s refused by the bucket or the windows: %s", seed, key, p.Verdict())
		}
		var ts []int64
		for _, r := range reqs {
			if keys[r.Key].Key == key {
				ts = append(ts, int64(r.At))
			}
		}
		if T <= 0 || leastBurst(ts, T) > int64(tier.Burst) {
			t.Errorf("seed %d: the poller %s needs more than its tier %s", seed, key, tier)
		}
	}
	return len(want)
}

// The two logs of issue 57's shapes, as the plan reads them: a day behind
// a load balancer (app users, twelve partners pulling 150 orders at 8 a
// second once an hour, monitors polling every 30 seconds, four abusers),
// and a site its own monitors poll every second beside three scrapers.
// The bucket refuses the abusers alone, the partners' batches and the
// monitors kept; the monitors named as pollers and refused nothing.
func TestPollersAndBatchesKept(t *testing.T) {
	for _, w := range []synthlog.World{synthlog.ALBDay(2, 0.3), synthlog.Monitored(3, 0.5)} {
		p, reqs, keys := policyOf(t, w, Config{Spare: 0.001})
		var abusers []string
		for _, k := range keys {
			if k.Role == synthlog.Abuser {
				abusers = append(abusers, k.Key)
			}
		}
		slices.Sort(abusers)
		if caught := slices.Sorted(slices.Values(p.Caught)); !p.Separated || !slices.Equal(caught, abusers) {
			t.Errorf("%v: the bucket %s refuses %d keys; want the %d abusers alone: %s", w.Span, p.Bucket.Policy(), len(caught), len(abusers), p.Verdict())
		}
		if n := checkPollers(t, 0, p, reqs, keys); n == 0 || !strings.Contains(p.Verdict(), "poll") {
			t.Errorf("%v: %d pollers; want the monitors, and the verdict to say what they get: %s", w.Span, n, p.Verdict())
		}
		t.Log(p.Verdict())
	}
}
