package harness

import (
	"context"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// The outage mode, on the test's Redis: for each way of taking it away and
// each failure mode, the server answers as the mode says while Redis is
// away, limits at half the users' asks before, decides on Redis again
// before the run ends, and leaves no key behind.
func TestLabOutage(t *testing.T) {
	url, rdb := redisURL(t)
	c := smallLab()
	c.Redis.URL = url
	c.Modes = []string{outageModeName}
	c.Limiters = []string{redisName(limiters.GCRA)}
	// After Redis is back: the breaker's cool-down, and go-redis's own
	// dial breaker's (a probe a second once PoolSize dials have failed
	// in a row, which a busy machine reaches), and a margin. At 200
	// requests a second, not 1,000: on a busy host the run's own load
	// kept Redis's answers late enough to time out now and then until the
	// run ended, and it runs beside the probes' tests, whose fits a busy
	// host blurs.
	c.Outage = outageConfig{Rate: 200, Before: 300 * time.Millisecond, Away: time.Second, After: 4 * time.Second}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	bins := int((c.Outage.Before + c.Outage.Away + c.Outage.After) / outageBin)
	seen := map[string]bool{}
	for _, r := range f.Rows {
		if r.Mode != outageModeName || !r.Measured() {
			t.Fatalf("%+v: want only outage rows", r)
		}
		o := outageFrom(r)
		name := o.Kind + ", " + o.Failure
		seen[name] = true
		share := func(k int64, a answers) float64 { return float64(k) / float64(max(a.Total(), 1)) }
		before, during := o.Before.answers, o.During.answers
		// Requests were served before Redis went. (How many depends on
		// the pace vegeta keeps, and on a busy machine a request sent
		// before the cut may be decided well after it: the 503s and 429s
		// before are not checked.)
		if before.OK == 0 {
			t.Errorf("%s: before Redis went: %+v, want requests served", name, before)
		}
		if o.Before.Errors+o.During.Errors+o.After.Errors+o.Before.Other+o.During.Other+o.After.Other != 0 {
			t.Errorf("%s: answers other than 200, 429 and 503: %+v %+v %+v", name, o.Before, o.During, o.After)
		}
		// While away: all served (open) or refused (closed), but for the
		// requests sent then and decided once Redis was back, which a busy
		// machine makes many of.
		switch o.Failure {
		case "open":
			if share(during.OK, during) < 0.7 {
				t.Errorf("%s: while away %+v, want all served", name, during)
			}
		case "closed":
			if share(during.Unavailable, during) < 0.7 {
				t.Errorf("%s: while away %+v, want all refused", name, during)
			}
		case "fallback":
			// At half the limit: fewer served than before, if the limit
			// bound before.
			if o.Fleet != 2 || during.Unavailable != 0 || before.Limited > before.Total()/10 && share(during.OK, during) >= share(before.OK, before) {
				t.Errorf("%s: while away %+v (fleet %d), want fewer served than before (%+v), none refused", name, during, o.Fleet, before)
			}
		}
		var failed int64
		for _, n := range o.Failed {
			failed += n
		}
		if failed < during.Total()/2 {
			t.Errorf("%s: %d decisions made without Redis, of %d requests while it was away", name, failed, during.Total())
		}
		if o.Recovery == nil || *o.Recovery < 0 {
			t.Errorf("%s: decisions still failing at the end of the run (recovery %v)", name, o.Recovery)
		}
		want := bins
		if o.Kind == outageFailover { // a failover is given the time the Sentinels take
			want = int((c.Outage.Before + max(c.Outage.Away, failoverAway) + c.Outage.After) / outageBin)
		}
		if o.Away <= 0 || o.Back <= o.Away || len(o.Bins) != want || len(o.Failed) != len(o.Bins) {
			t.Errorf("%s: away at %v, back at %v, %d bins, %d of failures", name, o.Away, o.Back, len(o.Bins), len(o.Failed))
		}
	}
	if len(seen) != 9 {
		t.Errorf("ran %v, want 3 ways (refused, unanswered, failover) × 3 failure modes", seen)
	}
	prefix := f.Meta.Setting("redis-prefix")
	if prefix == "" {
		t.Fatalf("no redis-prefix among the settings: %v", f.Meta.Settings)
	}
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left: %v, %v", keys, err)
	}
	if table := report.Tables(f, Modes()); len(table) != 1 || table[0].Name != "outage" || len(table[0].Rows) != 9 {
		t.Errorf("tables: %+v", table)
	}
}

// The quick lab leaves the outage runs out unless asked for them.
func TestQuickLeavesOutOutage(t *testing.T) {
	for _, quick := range []bool{false, true} {
		c := Config{Quick: quick}.Defaults()
		has := false
		for _, m := range c.Modes {
			has = has || m == outageModeName
		}
		if has == quick {
			t.Errorf("quick %v: modes %v", quick, c.Modes)
		}
	}
	c := Config{Quick: true, Modes: []string{outageModeName}}.Defaults()
	if len(c.Modes) != 1 || c.Modes[0] != outageModeName {
		t.Errorf("asked for: modes %v", c.Modes)
	}
}

// The server's count of failed decisions is read every 10ms, and once
// more when the run ends, each read timed from the run's start.
func TestSampleFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		var n atomic.Int64
		stop := sampleFailures(n.Load, time.Now())
		time.Sleep(25 * ms) // read at 10ms and 20ms
		n.Store(3)
		time.Sleep(10 * ms) // read at 30ms
		got := stop()       // read at 35ms
		want := []failure{{10 * ms, 0}, {20 * ms, 0}, {30 * ms, 3}, {35 * ms, 3}}
		if !slices.Equal(got, want) {
			t.Errorf("sampleFailures: %v, want %v", got, want)
		}
	})
}

// Recovery is the last failure before the first quiet stretch after Redis
// is back: a failure later (a slow decision on a busy machine) is not the
// outage's; failing to the end is no recovery.
func TestRecovery(t *testing.T) {
	begin := time.Unix(100, 0)
	back := begin.Add(time.Second)
	ms := time.Millisecond
	series := func(counts ...int64) []failure {
		var out []failure
		for i, n := range counts {
			out = append(out, failure{at: 900*ms + time.Duration(i)*50*ms, n: n})
		}
		return out
	}
	for _, c := range []struct {
		failed []failure
		want   time.Duration // -1: none
	}{
		{series(5, 5, 5, 5, 5), 0},                // nothing after Redis came back (at 1s)
		{series(5, 6, 7, 9, 9, 9, 9), 50 * ms},    // a failure at 1.05s, then quiet
		{series(5, 6, 7, 8, 8, 8, 9, 9), 50 * ms}, // quiet from 1.05s: the failure at 1.2s is not the outage's
		{series(5, 6, 7, 8, 9, 10), -1},           // failing to the end
	} {
		got := recovery(c.failed, begin, back)
		switch {
		case c.want < 0 && got != nil, c.want >= 0 && (got == nil || *got != c.want):
			t.Errorf("%v: recovery %v, want %v", c.failed, got, c.want)
		}
	}
}

// An outage counts each answer once, by its status: 200, 429, 503,
// another, or none at all.
func TestAnswersCount(t *testing.T) {
	var a answers
	for _, r := range []struct {
		code uint16
		err  string
	}{{200, ""}, {429, ""}, {503, ""}, {404, ""}, {0, "connection refused"}, {200, ""}} {
		a.count(r.code, r.err)
	}
	if want := (answers{OK: 2, Limited: 1, Unavailable: 1, Other: 1, Errors: 1}); a != want || a.Total() != 6 {
		t.Errorf("counted %+v (%d), want %+v (6)", a, a.Total(), want)
	}
}

// An outage row reads back as the outage it records.
func TestOutageRow(t *testing.T) {
	rec := 120 * time.Millisecond
	o := outage{Kind: "refused", Failure: "fallback", Fleet: 2, Rate: 1000, Users: 25, Limit: 2, Window: 100 * time.Millisecond,
		Away: time.Second, Back: 2 * time.Second, Bin: 100 * time.Millisecond,
		Bins:   []answers{{OK: 3}, {Limited: 2, Unavailable: 1}, {Other: 1, Errors: 4}},
		Failed: []int64{0, 5, 1}, Recovery: &rec}
	o.Before = span{answers{OK: 3}, results.Quantiles{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}}
	o.During = span{answers{Limited: 2, Unavailable: 1}, results.Quantiles{P50: 6, P99: 7, Max: 8}}
	var r results.Row
	o.row(&r)
	got := outageFrom(r)
	if got.Recovery == nil || *got.Recovery != rec {
		t.Fatalf("recovery %v, want %v", got.Recovery, rec)
	}
	got.Recovery, o.Recovery = nil, nil
	if !reflect.DeepEqual(got, o) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, o)
	}
	if cells := outageCells(r); cells[0] != "refused for 1s" || cells[1] != "fallback, fleet 2" || cells[3] != "0 · 67 · 33" || cells[8] != "120.0ms" {
		t.Errorf("cells %q", cells)
	}
}

// An outage row's panel: per bin, the shares of its answers, which stack
// to 100, and of its decisions made without Redis; a bin with no request
// is left out; Redis's going and coming back are marks. A skipped row has
// no panel.
func TestOutageFigure(t *testing.T) {
	// Four bins: {OK 3, Limited 1}, {OK 1, Limited 2, Errors 1}, none,
	// {Unavailable 2}.
	o := outage{Kind: outageRefused, Failure: "fallback", Fleet: 2, Away: 100 * time.Millisecond, Back: 200 * time.Millisecond, Bin: 100 * time.Millisecond,
		Bins:   []answers{{OK: 3, Limited: 1}, {OK: 1, Limited: 2, Errors: 1}, {}, {Unavailable: 2}},
		Failed: []int64{0, 8, 0, 2}}
	r := results.Row{Limiter: "gcra (redis)", Mode: outageModeName}
	o.row(&r)
	f := &results.File{Rows: []results.Row{r, {Limiter: "gcra (redis)", Mode: outageModeName, Skipped: "no Redis"}}}
	figs := report.Figures(f, Modes())
	if len(figs) != 1 || figs[0].Name != "outage" || len(figs[0].Panels) != 1 {
		t.Fatalf("figures %+v, want the outage chart of one panel", figs)
	}
	p := figs[0].Panels[0]
	if p.Title != "Redis down (refused), fall back (fleet of 2)" || p.Bin != 0.1 || len(p.Marks) != 2 || p.Marks[0].At != 0.1 || p.Marks[1].At != 0.2 || !p.Marks[0].OnX {
		t.Errorf("panel %q, bin %v, marks %+v", p.Title, p.Bin, p.Marks)
	}
	want := [][]report.XY{
		{{X: 0.05, Y: 75}, {X: 0.15, Y: 25}, {X: 0.35, Y: 0}},
		{{X: 0.05, Y: 25}, {X: 0.15, Y: 50}, {X: 0.35, Y: 0}},
		{{X: 0.05, Y: 0}, {X: 0.15, Y: 0}, {X: 0.35, Y: 100}},
		{{X: 0.05, Y: 0}, {X: 0.15, Y: 25}, {X: 0.35, Y: 0}},
	}
	near := func(a, b report.XY) bool { return math.Abs(a.X-b.X) < 1e-9 && math.Abs(a.Y-b.Y) < 1e-9 }
	for i, l := range p.Layers {
		if l.Name != outageLayers[i] || !slices.EqualFunc(l.Points, want[i], near) {
			t.Errorf("layer %d: %s %v, want %s %v", i, l.Name, l.Points, outageLayers[i], want[i])
		}
	}
	// More failed than answered in a bin (the metrics count a decision
	// when it fails, a request by when it was sent): drawn at 100%.
	if got := p.Lines[0].Points; len(got) != 3 || got[0].Y != 0 || got[1].Y != 100 || got[2].Y != 100 {
		t.Errorf("failed: %v", got)
	}
}
