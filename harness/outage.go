package harness

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redisfault"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// outageConfig is how the outage mode runs: Users users, each asking for
// twice its limit per Window, attack ratelab serve's server at Rate
// requests a second for Before, while its Redis is away for Away, and for
// After once it is back; Fleet is the fleet size the fallback declares (it
// decides at the limit divided by it, rounded up).
type outageConfig struct {
	Rate                float64
	Users               int
	Window              time.Duration
	Fleet               int
	Before, Away, After time.Duration
}

func (o outageConfig) defaults(quick bool) outageConfig {
	set(&o.Rate, 2000)
	set(&o.Users, 25)
	// Windows short against the run, so that the quotas the keys start
	// with are spent long before Redis goes away.
	set(&o.Window, 100*time.Millisecond)
	set(&o.Fleet, 2)
	set(&o.Before, pick(quick, time.Second, 500*time.Millisecond))
	// Not a whole number of the server's breaker cool-downs (1s): Redis
	// comes back between two of its probes, not with one.
	set(&o.Away, pick(quick, 2500*time.Millisecond, 1500*time.Millisecond))
	set(&o.After, pick(quick, 2*time.Second, 1500*time.Millisecond))
	return o
}

// flags declares the outage mode's settings on fs.
func (o *outageConfig) flags(fs *flag.FlagSet) {
	fs.Float64Var(&o.Rate, "outage-rate", o.Rate, "the rate the outage runs attack the server at, per second (default 2000)")
	fs.IntVar(&o.Users, "outage-users", o.Users, "users of the outage runs, each asking for twice its limit (default 25)")
	fs.DurationVar(&o.Window, "outage-window", o.Window, "the window of each user's limit in the outage runs (default 100ms)")
	fs.IntVar(&o.Fleet, "outage-fleet", o.Fleet, "the fleet size the fallback declares: it decides at the limit divided by it (default 2)")
	fs.DurationVar(&o.Before, "outage-before", o.Before, "how long the outage runs attack before Redis is taken away (default 1s, quick 500ms)")
	fs.DurationVar(&o.Away, "outage-away", o.Away, "how long the outage runs take Redis away (default 2.5s, quick 1.5s)")
	fs.DurationVar(&o.After, "outage-after", o.After, "how long the outage runs attack once Redis is back (default 2s, quick 1.5s)")
}

func (o outageConfig) validate() error {
	if !(o.Rate > 0 && o.Rate <= 20_000) || o.Users < 1 || o.Fleet < 1 || o.Window <= 0 || o.Before <= 0 || o.Away <= 0 || o.After <= 0 {
		return fmt.Errorf("harness: an outage run takes a rate from 0 to 20,000 a second, positive users, fleet and window, and positive times before, away and after; got %v/s, %d, %d, %v, %v, %v, %v",
			o.Rate, o.Users, o.Fleet, o.Window, o.Before, o.Away, o.After)
	}
	return o.limit().Validate(limiters.GCRA)
}

// limit is the limit of each user: half of what it asks for in a window.
func (o outageConfig) limit() limiters.Limit {
	return limiters.Limit{N: max(int(o.Rate*o.Window.Seconds()/float64(o.Users)/2+0.5), 1), Per: o.Window}
}

// The ways the outage mode takes a server away: through a proxy (see
// redisfault.Proxy), refusing connections or answering nothing; or by
// killing the master of a Sentinel set-up of the lab's own, whose replica
// the Sentinels promote (a failover).
var (
	outageRefused    = redisfault.Refused.String()
	outageUnanswered = redisfault.Unanswered.String()
	outageFailover   = "failover"
	outageKinds      = []string{outageRefused, outageUnanswered, outageFailover}
)

// The failure modes of ratelab serve the outage mode runs in turn.
var outageFailures = []string{"open", "closed", "fallback"}

// outageBin is how finely the outage runs count answers over time.
const outageBin = 100 * time.Millisecond

// outageMode serves each subject that can be kept in a server the lab can
// take away (Subject.Outage) from ratelab serve's server, attacks it with
// vegeta at a steady rate, and takes the server away mid-run and gives it
// back: for each way of taking it away and each failure mode, the answers
// over time, the latency before, during and after, and how long the
// server took to decide again once back. The quick lab leaves it out:
// seconds of real time a run.
const outageModeName = "outage"

var outageMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:  outageModeName,
			About: "Redis taken away mid-run under ratelab serve: its answers per failure mode, and how soon it recovers (not in --quick)",
			Order: 80,
		},
		Heading: "Redis taken away",
		Tables: []report.TableSpec{{
			Name:  "outage",
			Title: "Redis taken away mid-run: what ratelab serve answers, per failure mode",
			Note: "ratelab serve's server decides on Redis through a proxy, attacked over loopback by vegeta at a steady rate, each user asking for twice its limit, " +
				"until the proxy takes Redis away (refused: as a server that is down; unanswered: as a network that drops everything) and later gives it back, " +
				"or, failover, the master of a Sentinel set-up (a master, a replica, three Sentinels, down after 500ms) is killed and the Sentinels promote the replica (back: when they name it). " +
				"The answers are 200 · 429 · 503 as shares of the requests sent before, during and after; latency is of the requests sent while Redis was away. " +
				"Open serves everyone unmetered, closed refuses everyone, fallback decides in memory at the limit divided by the declared fleet. " +
				"Recovery: from Redis given back to the server's last decision made without it (its metrics, read every 10ms). " +
				"The server's breaker opens after 5 failures in a row and sends one probe a second later, so recovery is the wait for the next probe: " +
				"it depends on where in the breaker's cycle Redis comes back, and is at most the cool-down and a timeout (1s + 250ms), " +
				"and a second more when more dials failed at once than go-redis's pool holds connections (its own dial breaker then probes once a second).",
			Header: []string{"Redis", "failing", "before", "while away", "after", "p50 away", "p99 away", "max away", "recovery"},
			Left:   2,
			Cells:  outageCells,
			More: func(rows []results.Row) string {
				o := outageFrom(rows[0])
				return fmt.Sprintf(" %s from %d users, each limited to %d per %v (%s).", report.Rate(o.Rate), o.Users, o.Limit, o.Window, rows[0].Limiter)
			},
		}},
		Charts: func(_ *results.File, rows []results.Row) []report.Figure {
			return []report.Figure{outageFigure(rows)}
		},
	},
	once:    true,
	slow:    true,
	steps:   outageSteps,
	measure: measureOutage,
	flags:   func(c *Config, fs *flag.FlagSet) { c.Outage.flags(fs) },
}

// outageWeight is an outage run's share of the progress: about eight
// seconds, as long as four accuracy runs in real time (at weight 1 the
// line sat at 81% for the last 50 s of the lab).
const outageWeight = 5

func outageSteps(c Config, subjects []Subject) int {
	n := 0
	for _, s := range subjects {
		if s.Outage != nil {
			n += outageWeight * len(outageKinds) * len(outageFailures)
		}
	}
	return n
}

func measureOutage(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	var out []results.Row
	for _, s := range subjects {
		if s.Outage == nil {
			continue
		}
		for _, kind := range outageKinds {
			for _, fail := range outageFailures {
				if why := s.failed(); why != "" {
					return append(out, skipped(s, outageModeName, outageModeName, why)), nil
				}
				if _, err := exec.LookPath("redis-server"); err != nil && kind == outageFailover {
					out = append(out, skipped(s, outageModeName, outageModeName, "a failover runs servers of the lab's own: no redis-server here (Debian: apt-get install redis-server)"))
					continue
				}
				what := fmt.Sprintf("its server %s for %v", kind, l.c.Outage.Away)
				if kind == outageFailover {
					what = "its master killed, a replica promoted"
				}
				l.p.step(fmt.Sprintf("%s over HTTP, %s, failing %s", s.Name, what, fail), outageWeight)
				r, err := l.outage(ctx, s, kind, fail)
				if err != nil {
					return nil, fmt.Errorf("harness: %s, its server %s, failing %s: %w", s.Name, kind, fail, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func outageCells(r results.Row) []string {
	o := outageFrom(r)
	fail := o.Failure
	if o.Fleet > 0 {
		fail = fmt.Sprintf("%s, fleet %d", fail, o.Fleet)
	}
	recovery := "not in " + (o.Bin * time.Duration(len(o.Bins))).String()
	if o.Recovery != nil {
		recovery = report.Nanos(float64(*o.Recovery))
	}
	l := o.During.Latency
	return []string{
		outageSpan(o), fail,
		mix(o.Before.answers), mix(o.During.answers), mix(o.After.answers),
		report.Nanos(l.P50), report.Nanos(l.P99), report.Nanos(l.Max), recovery,
	}
}

// outageSpan says how Redis went and for how long: "refused for 2.5s",
// or "failover in 1.7s" (from the kill to the Sentinels naming another
// master).
func outageSpan(o outage) string {
	span := (o.Back - o.Away).Round(100 * time.Millisecond)
	if o.Kind == outageFailover {
		return fmt.Sprintf("failover in %v", span)
	}
	return fmt.Sprintf("%s for %v", o.Kind, span)
}

// mix is the shares of a's answers that were 200, 429 and 503, in
// percent, and of the rest if any.
func mix(a answers) string {
	n := a.Total()
	if n == 0 {
		return ""
	}
	p := func(k int64) string { return strconv.FormatFloat(100*float64(k)/float64(n), 'f', 0, 64) }
	s := p(a.OK) + " · " + p(a.Limited) + " · " + p(a.Unavailable)
	if rest := a.Other + a.Errors; rest > 0 {
		s += " (+" + p(rest) + " other)"
	}
	return s
}

// outageLayers name an outage panel's layers: the shares of the requests
// sent in each bin answered 200, 429, 503, and otherwise or not at all.
var outageLayers = []string{"200 served", "429 limited", "503 refused", "other, or no answer"}

// outageFigure is a panel per outage run, in run order (by how Redis was
// taken away, then by failure mode): the shares of its answers in each
// bin, stacked, and of the decisions the server made without Redis (by
// when it counted them), with when Redis went and came back.
func outageFigure(rows []results.Row) report.Figure {
	fig := report.Figure{Name: "outage", Title: "Redis taken away mid-run: what ratelab serve answers over time",
		Caption: "Each panel is a run of ratelab serve deciding on Redis, attacked at a steady rate by users each asking for twice their limit, " +
			"with Redis taken away between the dashed lines (down: a server that refuses connections; silent: a network that drops everything) and given back, " +
			"or its master killed at the first line and a replica promoted by the Sentinels at the second (failover). " +
			"The colours are the shares of the requests sent in each " + outageBin.String() + " answered 200, 429 and 503; the black line is the share of decisions the server made without Redis. " +
			"Fail open serves everyone, fail closed refuses everyone, fall back keeps limiting at the fleet's share; the gap after the second line is the wait for the breaker's next probe.",
		Cols: 3, Width: 10, RowHeight: 2.5, LegendWidth: 1.9}
	for _, r := range rows {
		if o := outageFrom(r); len(o.Bins) > 0 {
			fig.Panels = append(fig.Panels, outagePanel(o))
		}
	}
	return fig
}

// outagePanel is o's panel of outageFigure.
func outagePanel(o outage) report.Panel {
	fail := "fail " + o.Failure
	if o.Fleet > 0 {
		fail = fmt.Sprintf("fall back (fleet of %d)", o.Fleet)
	}
	how := map[string]string{outageRefused: "down (refused)", outageUnanswered: "silent", outageFailover: "failover"}[o.Kind]
	if how == "" {
		how = o.Kind
	}
	bin := o.Bin.Seconds()
	pn := report.Panel{Title: fmt.Sprintf("Redis %s, %s", how, fail), Bin: bin, Layers: make([]report.Line, len(outageLayers)),
		Lines: []report.Line{{Name: "decided without Redis"}},
		Marks: []report.Mark{{Name: "Redis away, back", OnX: true, At: o.Away.Seconds()}, {Name: "Redis away, back", OnX: true, At: o.Back.Seconds()}},
		X:     report.Axis{Label: "seconds from the start", Ticks: report.TicksPlain, Min: 0, Max: o.Back.Seconds()},
		Y:     report.Axis{Label: "share of requests (%)", Ticks: report.TicksPlain, Min: 0, Max: 100}}
	for i, name := range outageLayers {
		pn.Layers[i].Name = name
	}
	for i, a := range o.Bins {
		layers := []int64{a.OK, a.Limited, a.Unavailable, a.Other + a.Errors}
		n := float64(a.Total())
		if n == 0 {
			continue
		}
		x := (float64(i) + 0.5) * bin
		for j, k := range layers {
			pn.Layers[j].Points = append(pn.Layers[j].Points, report.XY{X: x, Y: 100 * float64(k) / n})
		}
		if i < len(o.Failed) {
			pn.Lines[0].Points = append(pn.Lines[0].Points, report.XY{X: x, Y: min(100*float64(o.Failed[i])/n, 100)})
		}
	}
	return pn
}

// An outage is what an outage run measured: the server of ratelab serve
// deciding on Redis through a proxy, attacked over loopback at Rate
// requests a second by Users users each asking for twice its limit (Limit
// per Window), with Redis taken away at Away from the start (Kind:
// "refused", as a server that is down; "unanswered", as a network that
// drops everything) and given back at Back, the server failing as Failure
// says ("open", "closed", or "fallback": in memory at the limit divided by
// Fleet). Its row holds it (row, outageFrom).
type outage struct {
	Kind, Failure string
	Fleet         int
	Rate          float64
	Users, Limit  int
	Window        time.Duration
	Away, Back    time.Duration
	// Bins count the answers to the requests sent in each Bin of the run,
	// from its start; Failed the decisions the server made without Redis
	// (it failed, or the breaker was open), from its count of them.
	Bin    time.Duration
	Bins   []answers
	Failed []int64
	// Before, During and After are the requests sent before Redis was
	// taken away, while it was away, and after it was given back.
	Before, During, After span
	// Recovery is how long after Redis was given back the server's last
	// failed decision came: from then on Redis decided every request.
	// (The count is read every 10ms, which bounds its precision.) Nil
	// when decisions were still failing at the end of the run.
	Recovery *time.Duration
}

// answers count the answers to some requests: 200, 429, 503, any other
// status, and none at all.
type answers struct {
	OK, Limited, Unavailable, Other, Errors int64
}

// count counts an answer of status code (0 with err: none).
func (a *answers) count(code uint16, err string) {
	switch {
	case code == 0 && err != "":
		a.Errors++
	case code == 200:
		a.OK++
	case code == 429:
		a.Limited++
	case code == 503:
		a.Unavailable++
	default:
		a.Other++
	}
}

// Total is how many answers, or none, a counts.
func (a answers) Total() int64 { return a.OK + a.Limited + a.Unavailable + a.Other + a.Errors }

// fields are a's counts by the names its row gives them.
func (a *answers) fields() []struct {
	name string
	n    *int64
} {
	return []struct {
		name string
		n    *int64
	}{{"ok", &a.OK}, {"limited", &a.Limited}, {"unavailable", &a.Unavailable}, {"other", &a.Other}, {"errors", &a.Errors}}
}

// A span is the requests of a stretch of an outage run: their answers,
// and the latency of those answered.
type span struct {
	answers
	Latency results.Quantiles
}

// The names an outage's parts have in its row.
var spanNames = [3]string{"before", "during", "after"}

func (o *outage) spans() [3]*span { return [3]*span{&o.Before, &o.During, &o.After} }

// row records o in r: its settings, its spans as metrics, its bins as
// series.
func (o *outage) row(r *results.Row) {
	r.Set("fault", o.Kind)
	r.Set("failure", o.Failure)
	if o.Fleet > 0 {
		r.SetInt("fleet", o.Fleet)
	}
	r.SetFloat("rate", o.Rate)
	r.SetInt("users", o.Users)
	r.SetInt("limit", o.Limit)
	r.Set("per", o.Window.String())
	r.Add("away", results.UnitSeconds, o.Away.Seconds())
	r.Add("back", results.UnitSeconds, o.Back.Seconds())
	r.Add("bin", results.UnitSeconds, o.Bin.Seconds())
	if o.Recovery != nil {
		r.Add("recovery", results.UnitSeconds, o.Recovery.Seconds())
	}
	for i, sp := range o.spans() {
		for _, f := range sp.fields() {
			r.Add(spanNames[i]+"."+f.name, results.UnitCount, float64(*f.n))
		}
		r.SetLatency(spanNames[i]+"."+results.Latency, sp.Latency)
	}
	bins := make([]results.Series, 5)
	for i := range o.Bins {
		for j, f := range o.Bins[i].fields() {
			bins[j].Name, bins[j].Unit = "bins."+f.name, results.UnitCount
			bins[j].Y = append(bins[j].Y, float64(*f.n))
		}
	}
	failed := results.Series{Name: "failed", Unit: results.UnitCount}
	for _, n := range o.Failed {
		failed.Y = append(failed.Y, float64(n))
	}
	for _, b := range append(bins, failed) {
		if b.Name != "" {
			r.AddSeries(b)
		}
	}
}

// outageFrom reads back the outage row records.
func outageFrom(r results.Row) outage {
	seconds := func(name string) time.Duration { return time.Duration(math.Round(r.Get(name) * 1e9)) }
	o := outage{Kind: r.Setting("fault"), Failure: r.Setting("failure"), Fleet: r.SettingInt("fleet"), Rate: r.SettingFloat("rate"),
		Users: r.SettingInt("users"), Limit: r.SettingInt("limit"), Window: r.SettingDuration("per"),
		Away: seconds("away"), Back: seconds("back"), Bin: seconds("bin")}
	if r.Has("recovery") {
		rec := seconds("recovery")
		o.Recovery = &rec
	}
	for i, sp := range o.spans() {
		for _, f := range sp.fields() {
			*f.n = r.Count(spanNames[i] + "." + f.name)
		}
		sp.Latency, _ = r.LatencyOf(spanNames[i] + "." + results.Latency)
	}
	var a answers
	for j, f := range a.fields() {
		s := r.Curve("bins." + f.name)
		if s == nil {
			continue
		}
		if j == 0 {
			o.Bins = make([]answers, len(s.Y))
		}
		for i, v := range s.Y {
			if i < len(o.Bins) {
				*o.Bins[i].fields()[j].n = int64(v)
			}
		}
	}
	if s := r.Curve("failed"); s != nil {
		for _, v := range s.Y {
			o.Failed = append(o.Failed, int64(v))
		}
	}
	return o
}
