package plan

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// A plan's rows are the lab's: a results.File of rows of the mode "plan"
// (plan.json), whose tables, charts and report the lab's packages draw.
// A row is one of five kinds (its setting "kind"): the log read, the
// clients' peaks, an algorithm at a limit, an algorithm's suggestion, or
// a client (one the suggestions refuse most, or one that looks like many
// users).
const (
	modeName = "plan"
	kind     = "kind"

	kindLog     = "log"
	kindPeaks   = "peaks"
	kindPoint   = "point"
	kindSuggest = "suggestion"
	kindTop     = "top"
	kindShared  = "shared"
	kindEnv     = "envelope"
	kindFront   = "frontier"
	kindPolicy  = "policy"
	kindCaught  = "caught"
	kindSource  = "source"

	// Settings.
	limitSetting  = "limit"   // a limit as written
	limitN        = "limit_n" // its N, which the sweep's columns are headed by
	foundSetting  = "found"   // a suggestion's: "true" if the sweep had one
	belowSetting  = "below"   // a suggestion's: the limit below it, which refuses too many
	keySetting    = "key"     // a client's key
	periodSetting = "period"  // the limits' period, as written (1s)

	// Metrics.
	refusedName    = "refused"         // requests refused
	refusedShare   = "refused_share"   // of the requests decided
	clientsName    = "clients_refused" // clients refused at least once
	clientsShare   = "clients_share"   // of the clients
	clients90Name  = "clients_90"      // clients with 90% of the refusals
	onlyName       = "only_refused"    // requests it alone refused
	onlyLetsName   = "only_admitted"   // requests it alone admitted
	requestsName   = "requests"        // a client's, or the log's
	logged429Name  = "logged_429"      // refused by the log's own server
	peakName       = "peak"            // a client's most in any window
	agentsName     = "agents"          // distinct user agents, to maxDistinct
	pathsName      = "paths"           // distinct paths, to maxDistinct
	linesName      = "lines"           // the log's lines
	skippedName    = "skipped"         // lines not read
	freeName       = "free"            // lines of cost 0
	clientsCount   = "clients"         // the log's clients
	spanName       = "span"            // the log's first to last request
	cdfName        = "clients_at_most" // the peaks' CDF
	seriesName     = "peak_over_time"  // a client's peak by bucket
	envelopeName   = "envelope"        // a client's most in any window, by its length
	burstsName     = "least_burst"     // a client's least burst, by rate
	tookName       = "took"            // the plan's time
	refusedByName  = "refused_by_"     // a top client's, by algorithm, at its suggestion
	belowClients   = "below_clients"   // the clients the limit below a suggestion refuses
	belowShare     = "below_share"     // of the clients
	p50, p90       = "p50", "p90"      // the peaks' quantiles
	p99, p999      = "p99", "p999"     //
	maxName        = "max"             //
	spareName      = "spare"           // the share of clients a suggestion may refuse
	sparingName    = "sparing_n"       // the least N a sliding log spares all but spare with
	burstName      = "burst"           // a frontier point's least burst sparing all but spare
	usersName      = "users_burst"     // the kept keys' burst (all but spare of them)
	usersMostName  = "users_most"      // the most any kept key needs
	keptMostName   = "kept_most"       // a gap's: the most any key below it needs
	outLeastName   = "out_least"       // the least any key above it needs
	outName        = "out"             // the keys above it
	gapName        = "gap"             // its ratio
	separatedName  = "separated"       // 1 if it is --margin wide or more
	marginName     = "margin"          // a pair of windows': how far apart what it refuses stands
	kindClass      = "class"           // a class of keys
	kindCurrent    = "current"         // the limit run today (--current)
	byClassSetting = "by_class"        // what it refuses, by class
	letterSetting  = "letter"          // a class's letter in the charts
	shapeSetting   = "shape"           // a class's, in words
	lengthsSet     = "lengths"         // the windows a class's typical envelope is given at
	typicalName    = "typical_"        // a class's typical most in each of them, by index
	rateOverName   = "rate_over_log"   // a class's median requests a second over the log
	needName       = "need"            // the most any of its keys needs at the rate suggested
	classBursts    = "class_bursts"    // a class's median least burst by rate (least and most: _least, _most)
	classEnvelope  = "class_envelope"  // a class's median envelope by period (and _least, _most)
	policyRefused  = "policy_refused"  // of the keys the policy refuses, how many a one-number limit does
	policyKeys     = "policy_keys"     // of how many (the first 100)
	rateName       = "rate"            // a bucket's rate, a second
	scaleName      = "scale"           // the shared keys' tier: the policy times it
	shareName      = "share"           // the shared keys' share of the requests
	caughtSetting  = "caught"          // the keys the bucket suggested refuses, the first few
	filesName      = "files"           // a source's files
	firstName      = "first"           // a source's first request, seconds since 1970
	lastName       = "last"            // and its last
	atOnceName     = "at_once"         // how many of a source's files overlap at most
	policySetting  = "policy"          // a policy in --limit's words
)

func isKind(k string) func(results.Row) bool {
	return func(r results.Row) bool { return r.Setting(kind) == k }
}

// Modes returns the plan's mode, which a report of its file is given as a
// lab's is given the lab's.
func Modes() report.Modes { return report.Modes{mode} }

// File returns p as the lab's rows; log names the log read.
func (p *Plan) File(log string, settings map[string]string) *results.File {
	f := &results.File{Schema: results.Schema, Meta: results.Meta{
		GoVersion: runtime.Version(), CPU: results.CPUModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start: time.Now().Add(-p.Took), Elapsed: results.Seconds(p.Took.Seconds()),
		Target: log, Settings: settings,
	}}
	add := func(r results.Row) {
		r.Mode = modeName
		f.Rows = append(f.Rows, r)
	}
	per := p.Config.period()
	row := results.Row{Workload: log, Limiter: "log"}
	row.Set(kind, kindLog)
	row.Set(periodSetting, per.String())
	var notes []string
	if p.NoKey > 0 {
		notes = append(notes, fmt.Sprintf("%s lines were requests without the key, counted and not decided; the first, %s.", results.Count(int64(p.NoKey)), p.FirstNoKey))
	}
	if p.Skipped > p.NoKey {
		var first []string
		for _, s := range p.Skips {
			first = append(first, s.String())
		}
		notes = append(notes, fmt.Sprintf("%s lines were not read; the first: %s.", results.Count(int64(p.Skipped-p.NoKey)), strings.Join(first, "; ")))
	}
	for _, u := range p.Unseen {
		notes = append(notes, fmt.Sprintf("%s, and what it was to say counts nothing.", u))
	}
	if p.Logged429 > 0 {
		how := "decided as the others: demand (--refused count)"
		if p.Config.DropRefused {
			how = "left out: their clients would have sent them again (--refused drop)"
		}
		notes = append(notes, fmt.Sprintf("The log's server refused %s requests (429), %s.", results.Count(int64(p.Logged429)), how))
	}
	if p.Span < 2*per {
		notes = append(notes, fmt.Sprintf("The log spans %v, less than two of the limits' periods (%v): a client's peak is what it sent in that span, and a limit per %v is judged on less than the traffic it would see; a longer log says more.",
			p.Span.Round(time.Second), per, per))
	}
	if p.WholeSeconds && per < time.Minute {
		notes = append(notes, fmt.Sprintf("The log's times are whole seconds (as the combined format writes them): each request is decided at the start of its second, "+
			"so a limit per %v is judged on whole seconds, and the sliding counter, which weighs the window before by how little of this one has passed, weighs it in full: "+
			"its refusals here are the most it could make. A log of finer times (nginx's $msec, $time_iso8601 with milliseconds) decides them as they came.", per))
	}
	row.Note = strings.Join(notes, " ")
	row.Add(linesName, results.UnitCount, float64(p.Lines))
	row.Add(requestsName, results.UnitCount, float64(p.Requests))
	row.Add(skippedName, results.UnitCount, float64(p.Skipped))
	row.Add(freeName, results.UnitCount, float64(p.Free))
	row.Add(logged429Name, results.UnitCount, float64(p.Logged429))
	row.Add(results.Decisions, results.UnitCount, float64(p.Decided))
	row.Add(clientsCount, results.UnitCount, float64(p.Clients))
	row.Add(spanName, results.UnitSeconds, p.Span.Seconds())
	row.Add(tookName, results.UnitSeconds, p.Took.Seconds())
	add(row)
	if len(p.Sources) > 1 {
		for _, src := range p.Sources {
			row := results.Row{Workload: log, Limiter: src.Name}
			row.Set(kind, kindSource)
			row.Add(filesName, results.UnitCount, float64(src.Files))
			row.Add(linesName, results.UnitCount, float64(src.Lines))
			row.Add(requestsName, results.UnitCount, float64(src.Requests))
			row.Add(skippedName, results.UnitCount, float64(src.Skipped))
			row.Add(firstName, results.UnitSeconds, float64(src.First)/1e9)
			row.Add(lastName, results.UnitSeconds, float64(src.Last)/1e9)
			row.Add(atOnceName, results.UnitCount, float64(src.AtOnce))
			add(row)
		}
	}

	row = results.Row{Workload: log, Limiter: "clients"}
	row.Set(kind, kindPeaks)
	row.Set(periodSetting, per.String())
	pk := p.Peaks
	for _, q := range []struct {
		name string
		v    float64
	}{{p50, pk.P50}, {p90, pk.P90}, {p99, pk.P99}, {p999, pk.P999}, {maxName, pk.Max}} {
		row.Add(q.name, results.UnitCount, q.v)
	}
	row.Add(spareName, results.UnitFraction, p.Config.Spare)
	row.Add(sparingName, results.UnitCount, pk.Sparing)
	row.Add(clientsCount, results.UnitCount, float64(p.Clients))
	cdf := results.Series{Name: cdfName, Unit: results.UnitFraction, XUnit: results.UnitCount}
	for _, pt := range pk.CDF {
		cdf.X, cdf.Y = append(cdf.X, pt[0]), append(cdf.Y, pt[1])
	}
	row.AddSeries(cdf)
	add(row)

	if b := p.Bucket; b.Rate.N > 0 {
		row := results.Row{Workload: log, Limiter: "bucket"}
		row.Set(kind, kindPolicy)
		row.Set(policySetting, b.Policy().String())
		row.Set(caughtSetting, strings.Join(p.Caught[:min(len(p.Caught), 5)], " "))
		row.Add(clientsName, results.UnitCount, float64(b.Clients))
		addRefused(&row, b.Refused, p.Decided)
		row.Add(clientsCount, results.UnitCount, float64(p.Users))
		row.Add(spareName, results.UnitFraction, p.Config.Spare)
		addGap(&row, b.Gap, p.Separated)
		add(row)
		if n := p.NginxPolicy; n.Bucket.Rate != "" {
			row := results.Row{Workload: log, Limiter: "nginx bucket"}
			row.Set(kind, kindPolicy)
			row.Set(policySetting, nginxLine(n.Bucket))
			addCount(&row, clientsName, n.Clients)
			addRefused(&row, n.Refused, p.Decided)
			add(row)
		}
		if w := p.Windows; w.Short.N > 0 {
			row := results.Row{Workload: log, Limiter: "windows"}
			row.Set(kind, kindPolicy)
			row.Set(policySetting, w.Short.String()+", "+w.Long.String())
			row.Set(caughtSetting, strings.Join(p.WindowsCaught[:min(len(p.WindowsCaught), 5)], " "))
			row.Add(marginName, results.UnitRatio, w.Margin)
			row.Add(separatedName, results.UnitCount, float64(boolInt(w.Separated)))
			row.Add(clientsName, results.UnitCount, float64(w.Clients))
			addRefused(&row, w.Refused, p.Decided)
			add(row)
		}
		if n := p.NginxPolicy; n.Short.Rate != "" {
			row := results.Row{Workload: log, Limiter: "nginx windows"}
			row.Set(kind, kindPolicy)
			row.Set(policySetting, nginxLine(n.Short)+"; "+nginxLine(n.Long))
			addCount(&row, clientsName, n.PairClients)
			addRefused(&row, n.PairRefused, p.Decided)
			add(row)
		}
		for _, o := range p.WindowsOthers {
			row := results.Row{Workload: log, Limiter: "windows " + string(o.Algorithm)}
			row.Set(kind, kindPolicy)
			row.Set(policySetting, o.Short.String()+", "+o.Long.String())
			row.Add(clientsName, results.UnitCount, float64(o.Clients))
			addRefused(&row, o.Refused, p.Decided)
			add(row)
		}
		for _, tier := range []struct {
			name string
			t    Tier
		}{{"shared keys", p.SharedTier}, {"pollers", p.PollerTier}} {
			if t := tier.t; t.Keys > 0 {
				row := results.Row{Workload: log, Limiter: tier.name}
				row.Set(kind, kindPolicy)
				row.Set(policySetting, t.Policy.String())
				row.Add(scaleName, results.UnitCount, t.Scale)
				row.Add(clientsCount, results.UnitCount, float64(t.Keys))
				row.Add(shareName, results.UnitFraction, t.Share)
				add(row)
			}
		}
	}
	if r := p.Current; r != nil {
		row := results.Row{Workload: log, Limiter: "current"}
		row.Set(kind, kindCurrent)
		row.Set(policySetting, r.Name)
		row.Set(caughtSetting, strings.Join(r.Caught, " "))
		row.Set(byClassSetting, r.byClassWords(p.Classes))
		row.Note = strings.Join(r.Notes, "; ")
		row.Add(clientsName, results.UnitCount, float64(r.Clients))
		addRefused(&row, r.Refused, p.Decided)
		if r.Nodes > 1 {
			row.Set(policySetting, fmt.Sprintf("%s, across the %d nodes", r.Name, r.Nodes))
			add(row)
			row = results.Row{Workload: log, Limiter: "current on each node"}
			row.Set(kind, kindCurrent)
			row.Set(policySetting, fmt.Sprintf("%s, on each node apart", r.Name))
			row.Add(clientsName, results.UnitCount, float64(r.NodeClients))
			addRefused(&row, r.NodeRefused, p.Decided)
		}
		add(row)
	}
	for _, e := range p.Envelope {
		row := results.Row{Workload: log, Limiter: "clients"}
		row.Set(kind, kindEnv)
		row.Set(periodSetting, e.Period.String())
		for _, q := range []struct {
			name string
			v    float64
		}{{p50, e.P50}, {p90, e.P90}, {p99, e.P99}, {p999, e.P999}, {maxName, e.Max}} {
			row.Add(q.name, results.UnitCount, q.v)
		}
		row.Add(sparingName, results.UnitCount, float64(e.Sparing))
		row.Add(spareName, results.UnitFraction, p.Config.Spare)
		addGap(&row, e.Gap, e.Separated)
		add(row)
	}
	letter := 'A'
	for _, c := range p.Classes {
		row := p.classRow(c, log)
		if !c.Refused && letter <= 'Z' {
			row.Set(letterSetting, string(letter))
			letter++
		}
		add(row)
	}
	for _, f := range p.Frontier {
		row := results.Row{Workload: log, Limiter: "bucket"}
		row.Set(kind, kindFront)
		row.Set(limitSetting, f.Rate.String())
		row.Add(rateName, results.UnitCount, perSecond(f.Rate))
		for _, q := range []struct {
			name string
			v    float64
		}{{p50, f.P50}, {p90, f.P90}, {p99, f.P99}, {p999, f.P999}, {maxName, f.Max}} {
			row.Add(q.name, results.UnitCount, q.v)
		}
		row.Add(burstName, results.UnitCount, float64(f.Burst))
		addGap(&row, f.Gap, f.Separated)
		row.Add(usersName, results.UnitCount, float64(f.Users))
		row.Add(usersMostName, results.UnitCount, float64(f.UsersMost))
		row.Add(clientsName, results.UnitCount, float64(f.Clients))
		row.Add(refusedName, results.UnitCount, float64(f.Refused))
		add(row)
	}
	for _, cc := range p.CaughtCurves {
		row := results.Row{Workload: log, Limiter: "client"}
		row.Set(kind, kindCaught)
		row.Set(keySetting, cc.Key)
		env := results.Series{Name: envelopeName, Unit: results.UnitCount, XUnit: results.UnitSeconds}
		for i, e := range p.Envelope {
			env.X, env.Y = append(env.X, e.Period.Seconds()), append(env.Y, float64(cc.Envelope[i]))
		}
		bursts := results.Series{Name: burstsName, Unit: results.UnitCount, XUnit: results.UnitCount}
		for i, f := range p.Frontier {
			bursts.X, bursts.Y = append(bursts.X, perSecond(f.Rate)), append(bursts.Y, float64(cc.Bursts[i]))
		}
		row.AddSeries(env)
		row.AddSeries(bursts)
		add(row)
	}
	for _, pt := range p.Sweep {
		row := pointRow(pt, log, p)
		row.Set(kind, kindPoint)
		add(row)
	}
	caughtIDs := make(map[string]int, len(p.Caught))
	for _, k := range p.Caught {
		caughtIDs[k] = -1
	}
	for id, k := range p.clientsByID {
		if _, ok := caughtIDs[k]; ok {
			caughtIDs[k] = id
		}
	}
	for _, s := range p.Suggestions {
		row := pointRow(s.Point, log, p)
		row.Set(kind, kindSuggest)
		if p.Bucket.Clients > 0 {
			n := 0
			for _, id := range caughtIDs {
				if id >= 0 && id < len(s.Point.refusedOf) && s.Point.refusedOf[id] > 0 {
					n++
				}
			}
			row.Add(policyRefused, results.UnitCount, float64(n))
			row.Add(policyKeys, results.UnitCount, float64(len(caughtIDs)))
		}
		row.Set(foundSetting, strconv.FormatBool(s.Found))
		if s.Below.Limit.N > 0 {
			row.Set(belowSetting, s.Below.Limit.String())
			row.Add(belowClients, results.UnitCount, float64(s.Below.Clients))
			row.Add(belowShare, results.UnitFraction, float64(s.Below.Clients)/float64(max(p.Clients, 1)))
		}
		add(row)
	}
	for _, c := range p.Top {
		row := clientRow(c, log)
		row.Set(kind, kindTop)
		for i, s := range p.Suggestions {
			row.Add(refusedByName+string(s.Algorithm), results.UnitCount, float64(c.Refused[i]))
		}
		add(row)
	}
	for _, c := range p.Shared {
		row := clientRow(c, log)
		row.Set(kind, kindShared)
		add(row)
	}
	return f
}

// addGap adds a gap's figures to row.
func addGap(row *results.Row, g Gap, separated bool) {
	row.Add(keptMostName, results.UnitCount, float64(g.KeptMost))
	row.Add(outLeastName, results.UnitCount, float64(g.OutLeast))
	row.Add(outName, results.UnitCount, float64(g.Out))
	row.Add(gapName, results.UnitRatio, g.Ratio())
	row.Add(separatedName, results.UnitCount, float64(boolInt(separated)))
}

func pointRow(pt Point, log string, p *Plan) results.Row {
	row := results.Row{Workload: log, Limiter: string(pt.Algorithm), Algorithm: string(pt.Algorithm), Library: results.LibraryRatelab, Backend: results.BackendMemory}
	row.Set(limitSetting, pt.Limit.String())
	row.SetInt(limitN, pt.Limit.N)
	row.Add(results.Decisions, results.UnitCount, float64(p.Decided))
	addRefused(&row, pt.Refused, p.Decided)
	row.Add(clientsName, results.UnitCount, float64(pt.Clients))
	row.Add(clientsShare, results.UnitFraction, float64(pt.Clients)/float64(max(p.Clients, 1)))
	row.Add(clients90Name, results.UnitCount, float64(pt.Clients90))
	row.Add(onlyName, results.UnitCount, float64(pt.Only))
	row.Add(onlyLetsName, results.UnitCount, float64(pt.OnlyLets))
	return row
}

// classRow is a class of keys as a row: its typical envelope, its
// need at the rate suggested, and its bursts at each rate of the frontier
// and its envelope at each period (median, least and most) as series.
func (p *Plan) classRow(c Class, log string) results.Row {
	row := results.Row{Workload: log, Limiter: "class"}
	row.Set(kind, kindClass)
	row.Set(keySetting, c.Key)
	row.Set(shapeSetting, c.Shape())
	var lengths []string
	for i, d := range c.Lengths {
		lengths = append(lengths, d.String())
		row.Add(typicalName+strconv.Itoa(i), results.UnitCount, float64(c.Typical[i]))
	}
	row.Set(lengthsSet, strings.Join(lengths, " "))
	row.Add(clientsCount, results.UnitCount, float64(c.Keys))
	row.Add(requestsName, results.UnitCount, float64(c.Requests))
	row.Add(shareName, results.UnitFraction, float64(c.Requests)/float64(max(p.Requests, 1)))
	row.Add(rateOverName, results.UnitPerS, c.Rate)
	row.Add(needName, results.UnitCount, float64(c.Need))
	row.Add(refusedName, results.UnitCount, float64(boolInt(c.Refused)))
	for i, name := range []string{"", "_least", "_most"} {
		idx := []int{1, 0, 2}[i]
		b := results.Series{Name: classBursts + name, Unit: results.UnitCount, XUnit: results.UnitPerS}
		for j, f := range p.Frontier {
			b.X, b.Y = append(b.X, perSecond(f.Rate)), append(b.Y, float64(c.Bursts[j][idx]))
		}
		e := results.Series{Name: classEnvelope + name, Unit: results.UnitCount, XUnit: results.UnitSeconds}
		for j, env := range p.Envelope {
			e.X, e.Y = append(e.X, env.Period.Seconds()), append(e.Y, float64(c.Envelope[j][idx]))
		}
		row.AddSeries(b)
		row.AddSeries(e)
	}
	return row
}

func clientRow(c Client, log string) results.Row {
	row := results.Row{Workload: log, Limiter: "client"}
	row.Set(keySetting, c.Key)
	row.Add(requestsName, results.UnitCount, float64(c.Requests))
	row.Add(logged429Name, results.UnitCount, float64(c.Logged429))
	row.Add(peakName, results.UnitCount, float64(c.Peak))
	row.Add(agentsName, results.UnitCount, float64(c.Agents))
	row.Add(pathsName, results.UnitCount, float64(c.Paths))
	s := results.Series{Name: seriesName, Unit: results.UnitCount, XUnit: results.UnitSeconds}
	for i, v := range c.Series {
		s.X = append(s.X, (time.Duration(i)*c.BucketWidth + c.BucketWidth/2).Seconds())
		s.Y = append(s.Y, v)
	}
	row.AddSeries(s)
	return row
}

// mode is the plan's.
var mode = report.Mode{
	Mode: results.Mode{
		Name:    modeName,
		About:   "an access log's traffic: the policy it calls for, and, asked (--limits), a sweep of limits (ratelab plan)",
		Order:   95,
		Outside: true,
	},
	Heading: "The plan",
	Tables: []report.TableSpec{
		{
			Name:   "plan-log",
			Title:  "The log",
			Note:   "Lines read, requests taken (a line that is not one is counted, never guessed at), requests of cost 0, requests the log's own server refused (429), requests decided, clients (keys), and the time from the first request to the last.",
			Header: []string{"log", "lines", "requests", "not read", "cost 0", "429 logged", "decided", "clients", "span"},
			Left:   1,
			Keep:   isKind(kindLog),
			Cells: func(r results.Row) []string {
				return []string{r.Workload, results.Count(r.Count(linesName)), results.Count(r.Count(requestsName)), results.Count(r.Count(skippedName)),
					results.Count(r.Count(freeName)), results.Count(r.Count(logged429Name)), results.Count(r.Count(results.Decisions)),
					results.Count(r.Count(clientsCount)), (time.Duration(r.Get(spanName) * float64(time.Second))).Round(time.Second).String()}
			},
		},
		{
			Name:   "plan-sources",
			Title:  "Where it came from",
			Note:   "The log's sources, merged by time: each file, or the files of each node of a load balancer or host of a fleet (the part of their names that tells one from another), or the files all together where their names tell no nodes.",
			Header: []string{"source", "files", "lines", "requests", "not read", "from", "to"},
			Left:   1,
			Keep:   isKind(kindSource),
			Cells: func(r results.Row) []string {
				name := r.Limiter
				if n := r.Count(atOnceName); n > 1 {
					name += fmt.Sprintf(" (up to %d at once)", n)
				}
				return []string{name, results.Count(r.Count(filesName)), results.Count(r.Count(linesName)), results.Count(r.Count(requestsName)),
					results.Count(r.Count(skippedName)), instant(r.Get(firstName)), instant(r.Get(lastName))}
			},
		},
		{
			Name:  "plan-classes",
			Title: "Who sends what",
			Note: "The keys grouped by the shape of their traffic (the keys that look like many users left out): its shape in words, how many keys, their requests, what a typical one (the median) sends at most in about a second, a minute and a quarter hour, and a second over the log, and the most any of them needs at the rate suggested (its least burst there). " +
				"Each key the policy refuses is a class of its own. The policy's line is where it is because of the gap between the classes' needs and the keys refused: the frontier's chart draws each class's band.",
			Header: []string{"class", "keys", "requests", "most in 1s", "in 1m", "in 15m", "a second", "needs"},
			Left:   1,
			Keep:   isKind(kindClass),
			Cells: func(r results.Row) []string {
				name := fmt.Sprintf("(%s) %s", r.Setting(letterSetting), r.Setting(shapeSetting))
				if k := r.Setting(keySetting); k != "" {
					name = "refused: " + k + ", " + r.Setting(shapeSetting)
				} else if r.Get(refusedName) == 1 {
					name = fmt.Sprintf("refused: %s alike keys, %s", results.Count(r.Count(clientsCount)), r.Setting(shapeSetting))
				}
				lengths := strings.Fields(r.Setting(lengthsSet))
				typical := func(i int) string {
					m, ok := r.Value(typicalName + strconv.Itoa(i))
					if !ok || i >= len(lengths) {
						return ""
					}
					if d, _ := time.ParseDuration(lengths[i]); d != classHeads[i] {
						return fmt.Sprintf("%s (%s)", results.Count(int64(m)), strings.TrimSuffix(strings.TrimSuffix(lengths[i], "0s"), "0m"))
					}
					return results.Count(int64(m))
				}
				return []string{name, results.Count(r.Count(clientsCount)), fmt.Sprintf("%s (%s)", results.Count(r.Count(requestsName)), report.Percentage(r.Get(shareName))),
					typical(0), typical(1), typical(2), fmt.Sprintf("%.3g", r.Get(rateOverName)), results.Count(r.Count(needName))}
			},
			More: func(rows []results.Row) string {
				return " Most in a window: a typical key's (where the log or --periods has no window of that length, the nearest, named); a second: its requests a second over the log; needs: the most any key of the class needs at the rate suggested."
			},
		},
		{
			Name:  "plan-policy",
			Title: "The policy to set",
			Note: "A bucket's rate and burst, in --limit's words, chosen by separation: at each rate of the frontier (below) the keys' least bursts, sorted; where a few of them (at most --outliers, five at least) stand --margin or more above all the rest (the least any of them needs over the most any other does), they are what the bucket is for; " +
				"more of them (a botnet's addresses, up to a fifth of the keys) only where they are alike, each one client, and sustain their excess (each needs most over five minutes or more), and not where they are a heavy class (bounded, and still apart, at a higher rate); a gap under a class of three or more near-identical keys whose need is a burst's is passed over for one above it margin times wider. " +
				"Of those rates, the one that sets the most keys apart, then one whose bucket spares the steady pollers as it is, then the widest gap; the burst inside it, what the kept keys need times --headroom. Where no rate separates, the bucket that spares all but --spare of the keys and lets the least through in the longest window the log reaches, and the keys it refuses are not called abusers. " +
				"Or two windows together, a short and a long (composite decides both), from the envelope's gaps the same way: each N what the kept keys send in it times --headroom, and no less than what they send in twice its length, so that its forms (a sliding log, a fixed window, a sliding counter, nginx's buckets) refuse the same keys; a pair whose forms would not is not suggested. " +
				"The keys that look like many users, and the steady pollers (one to three paths at a regular interval, at most about once a second: monitors, health checks, heartbeats), are left out of the arithmetic and get a tier of their own: the policy scaled, rate and burst, to the lowest rate of the frontier's at which it spares every one of them (×1: the bucket spares them as it is). " +
				"In nginx (--emit nginx): limit_req's rate in whole requests a second or a minute (rounded up where the rate is neither, and kept by nginx in thousandths a second; the rounded bucket is decided again) and its burst one less than the bucket's (nginx admits the burst and one more at once); nginx has no window, and each window becomes a bucket of N at once refilled at N a period, decided as such.",
			Header: []string{"for", "policy", "keys refused", "requests refused", "apart", "who"},
			Left:   2,
			Keep:   isKind(kindPolicy),
			Cells: func(r results.Row) []string {
				if r.Limiter == "shared keys" || r.Limiter == "pollers" {
					return []string{r.Limiter, fmt.Sprintf("%s (×%g)", r.Setting(policySetting), r.Get(scaleName)), "", "", "",
						fmt.Sprintf("%s keys, %s of the requests", results.Count(r.Count(clientsCount)), report.Percentage(r.Get(shareName)))}
				}
				who := "every other key: a bucket"
				apart := ""
				switch {
				case r.Limiter == "bucket":
					apart = apartWords(r.Get(gapName), r.Get(separatedName) == 1)
				case r.Limiter == "windows":
					who = "or two windows (sliding log)"
					apart = apartWords(r.Get(marginName), r.Get(separatedName) == 1)
				case strings.HasPrefix(r.Limiter, "windows "):
					who = "  the same, " + strings.TrimPrefix(r.Limiter, "windows ")
				case r.Limiter == "nginx bucket":
					who = "  the bucket in nginx"
				case r.Limiter == "nginx windows":
					who = "  the windows in nginx (buckets)"
				}
				return []string{who, r.Setting(policySetting), countCell(r, clientsName), refusedCell(r), apart, r.Setting(caughtSetting)}
			},
			Last: formsDiffer,
		},
		{
			Name:  "plan-current",
			Title: "Your limit today",
			Note: "The limit --current names, decided over the log as the policy is (nginx's limit_req as a bucket of its rate and burst+1, refusing the same requests with or without nodelay; a tier file's tiers; a limit with no algorithm named as a sliding log, with a burst as GCRA): the keys it refuses at least once and the requests, and of which classes (Who sends what). " +
				"Where the log is a fleet's (its sources, above), each key's requests across every node, as a limit the fleet shares counts them (a gateway's in Redis), and on each node apart, as a limit each node keeps does (nginx on each host): a key spread over N nodes gets up to N times the limit.",
			Header: []string{"limit", "keys refused", "requests refused", "of which", "who"},
			Left:   1,
			Keep:   isKind(kindCurrent),
			Cells: func(r results.Row) []string {
				return []string{r.Setting(policySetting), results.Count(r.Count(clientsName)), fmt.Sprintf("%s (%s)", results.Count(r.Count(refusedName)), report.Percentage(r.Get(refusedShare))),
					r.Setting(byClassSetting), r.Setting(caughtSetting)}
			},
		},
		{
			Name:   "plan-envelope",
			Title:  "The clients' envelope",
			Note:   "Each client's most cost in any window of each length (exact), the keys that look like many users left out: quantiles over the clients; where a few stand apart (at most --outliers of them, the most any other sends below and the least any of them sends above, and the ratio: apart at --margin or more), and the least N per that length a sliding log would spare all but --spare of them with. A fan-out user is steep, then flat; one that sends steadily grows in proportion.",
			Header: []string{"window", "p50", "p99", "max", "the rest's most", "apart's least", "apart", "N sparing all but --spare"},
			Left:   1,
			Keep:   isKind(kindEnv),
			Cells: func(r results.Row) []string {
				return append([]string{r.Setting(periodSetting), fmt.Sprint(r.Get(p50)), fmt.Sprint(r.Get(p99)), fmt.Sprint(r.Get(maxName))},
					append(gapCells(r), fmt.Sprintf("%v (%s)", r.Get(sparingName), report.Percentage(r.Get(spareName))))...)
			},
		},
		{
			Name:   "plan-frontier",
			Title:  "The buckets' frontier",
			Note:   "At each rate, each client's least burst under which a bucket of that rate never refuses it (exact: the most of its cost in any stretch less the rate times the stretch): quantiles over the clients; where a few stand apart (at most --outliers of them: the most any other needs, the least any of them needs, the ratio, apart at --margin or more); the least burst that spares all but --spare of them, and the clients and requests a bucket of it refuses (the clients from the bursts, the requests decided by the library's bucket, at the rates within ten times the one suggested).",
			Header: []string{"rate", "p50", "p99", "max", "the rest's most", "apart's least", "apart", "burst (--spare)", "keys refused", "requests refused"},
			Left:   1,
			Keep:   isKind(kindFront),
			Cells: func(r results.Row) []string {
				return append(append([]string{r.Setting(limitSetting), fmt.Sprint(r.Get(p50)), fmt.Sprint(r.Get(p99)), fmt.Sprint(r.Get(maxName))}, gapCells(r)...),
					results.Count(r.Count(burstName)), results.Count(r.Count(clientsName)), decidedCount(r.Count(refusedName)))
			},
		},
		{
			Name:   "plan-peaks",
			Title:  "The clients' peaks",
			Note:   "Each client's peak is the most it sent in any window of the sweep's period (a second without --limits; its cost, if the log says one). A limit of N per period on the sliding log refuses exactly the clients whose peak is above N; the other algorithms come close. Quantiles over the clients; then the least N at which the sliding log refuses no more than --spare of them.",
			Header: []string{"clients", "period", "p50", "p90", "p99", "p99.9", "max", "N sparing all but --spare"},
			Left:   2,
			Keep:   isKind(kindPeaks),
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, r.Setting(periodSetting), fmt.Sprint(r.Get(p50)), fmt.Sprint(r.Get(p90)), fmt.Sprint(r.Get(p99)), fmt.Sprint(r.Get(p999)), fmt.Sprint(r.Get(maxName)),
					fmt.Sprintf("%v (%s)", r.Get(sparingName), report.Percentage(r.Get(spareName)))}
			},
		},
		{
			Name:   "plan-suggestions",
			Title:  "If one number a period is all you can set",
			Note:   "Not the policy (above): the answer for a limiter that takes one number a period and no burst, and what it lets through. The last column counts, of the keys the policy refuses, those this limit refuses at all: a fan-out or a batch needs as much in a second as a steady abuser sends, and one number that spares the one lets the other through. For each algorithm, the lowest limit of the sweep at which no more than --spare of the clients would have been refused even once (the limit below it refuses more: its clients refused say why), and what it refuses there: of the requests decided, and of the clients; how few clients take 90% of its refusals; the requests it alone refused of the algorithms at that limit, and those it alone admitted (a fixed window lets a burst through at its edge, a bucket a burst after quiet; the sliding counter, estimating, refuses some the others admit). The token bucket, the leaky bucket and GCRA are one policy: what they alone refuse, they refuse together.",
			Header: []string{"algorithm", "limit", "the limit below refuses", "requests refused", "clients refused", "90% of refusals", "it alone refused", "it alone admitted", "of the policy's refused"},
			Left:   3,
			Keep:   isKind(kindSuggest),
			Cells: func(r results.Row) []string {
				lim, below := r.Setting(limitSetting), "(the sweep's lowest)"
				if r.Setting(foundSetting) != "true" {
					lim, below = "none ("+lim+" refuses too many)", ""
				} else if b := r.Setting(belowSetting); b != "" {
					below = fmt.Sprintf("%s: %s clients (%s)", b, results.Count(r.Count(belowClients)), report.Percentage(r.Get(belowShare)))
				}
				return []string{r.Limiter, lim, below, report.Percentage(r.Get(refusedShare)), fmt.Sprintf("%s (%s)", results.Count(r.Count(clientsName)), report.Percentage(r.Get(clientsShare))),
					plural(r.Count(clients90Name), "client"), results.Count(r.Count(onlyName)), results.Count(r.Count(onlyLetsName)), ofPolicy(r)}
			},
		},
		{
			Name:   "plan-requests",
			Title:  "Requests refused at each limit",
			Note:   "The share of the requests decided that each algorithm refuses at each limit of the sweep (columns: N per the period).",
			Header: []string{"algorithm"},
			Left:   1,
			Keep:   isKind(kindPoint),
			Cells:  func(r results.Row) []string { return []string{r.Limiter} },
			Pivot: &report.Pivot{By: limitN, Head: strconv.Itoa,
				Cell: func(r results.Row) string { return report.Percentage(r.Get(refusedShare)) }},
		},
		{
			Name:   "plan-clients",
			Title:  "Clients refused at each limit",
			Note:   "How many clients each algorithm refuses at least once at each limit of the sweep (columns: N per the period).",
			Header: []string{"algorithm"},
			Left:   1,
			Keep:   isKind(kindPoint),
			Cells:  func(r results.Row) []string { return []string{r.Limiter} },
			Pivot: &report.Pivot{By: limitN, Head: strconv.Itoa,
				Cell: func(r results.Row) string { return results.Count(r.Count(clientsName)) }},
		},
		{
			Name:   "plan-top",
			Title:  "The clients hit hardest",
			Note:   "The clients the suggestions refuse most: their requests, those the log's server refused already (429), their peak in any window of the period, how many user agents they came with, and the share of their requests each algorithm refuses at its own suggested limit.",
			Header: []string{"key", "requests", "429 logged", "peak", "agents", "refused at the suggestions"},
			Left:   1,
			Keep:   isKind(kindTop),
			Cells: func(r results.Row) []string {
				var by []string
				for _, m := range r.Metrics {
					if a, ok := strings.CutPrefix(m.Name, refusedByName); ok {
						by = append(by, fmt.Sprintf("%s %s", short(a), report.Percentage(m.Value/max(r.Get(requestsName), 1))))
					}
				}
				return []string{r.Setting(keySetting), results.Count(r.Count(requestsName)), results.Count(r.Count(logged429Name)),
					results.Count(r.Count(peakName)), agents(r.Count(agentsName)), strings.Join(by, ", ")}
			},
		},
		{
			Name:   "plan-shared",
			Title:  "Keys that look like many users",
			Note:   fmt.Sprintf("Keys that came with %d or more user agents (counted to %d): an office, a proxy or a carrier's NAT behind one address. Keyed by address, a limit counts their users as one; a field that names the user (--key field:NAME, header:NAME) tells them apart.", sharedAgents, maxDistinct),
			Header: []string{"key", "requests", "peak", "agents", "paths"},
			Left:   1,
			Keep:   isKind(kindShared),
			Cells: func(r results.Row) []string {
				return []string{r.Setting(keySetting), results.Count(r.Count(requestsName)), results.Count(r.Count(peakName)), agents(r.Count(agentsName)), agents(r.Count(pathsName))}
			},
		},
	},
	Picks:  picks,
	Charts: charts,
	Page:   report.Page{Title: "ratelab plan: what limit the traffic wants", Of: "A plan of", Target: "Log"},
}

// refusedCell is a row's requests refused and their share, or "not
// decided" (a plan merged from shards decides no request).
func refusedCell(r results.Row) string {
	if !r.Has(refusedName) {
		return "not decided"
	}
	return fmt.Sprintf("%s (%s)", results.Count(r.Count(refusedName)), report.Percentage(r.Get(refusedShare)))
}

// countCell is a row's count of name, or "not decided".
func countCell(r results.Row, name string) string {
	if !r.Has(name) {
		return "not decided"
	}
	return results.Count(r.Count(name))
}

// decidedCount is a count decided, or nothing for one not (-1).
func decidedCount(n int64) string {
	if n < 0 {
		return ""
	}
	return results.Count(n)
}

// classHeads are the windows the classes' table heads its columns with.
var classHeads = []time.Duration{time.Second, time.Minute, 15 * time.Minute}

// ofPolicy says how many of the keys the policy refuses a one-number
// limit refuses at all: "1 of 4".
func ofPolicy(r results.Row) string {
	if !r.Has(policyKeys) {
		return ""
	}
	return fmt.Sprintf("%d of %d", r.Count(policyRefused), r.Count(policyKeys))
}

// apartWords is a gap's ratio as the policy table says it: "31× apart",
// or, short of --margin, that it does not separate.
func apartWords(ratio float64, separated bool) string {
	switch {
	case separated:
		return fmt.Sprintf("%s× apart", roundWords(ratio))
	case ratio > 0:
		return fmt.Sprintf("none (at most %.2g×)", ratio)
	}
	return "none"
}

// gapCells are a gap's columns: the rest's most, the least of those
// apart, and how far apart (with a mark where it separates).
func gapCells(r results.Row) []string {
	if r.Get(outName) == 0 {
		return []string{"", "", ""}
	}
	ratio := fmt.Sprintf("%.3g× (%s)", r.Get(gapName), plural(r.Count(outName), "key"))
	if r.Get(separatedName) == 1 {
		ratio = "✓ " + ratio
	}
	return []string{results.Count(r.Count(keptMostName)), results.Count(r.Count(outLeastName)), ratio}
}

// formsDiffer says, after the policy's table, which forms of the windows
// refuse other keys than the sliding log does, and why.
func formsDiffer(rows []results.Row) string {
	var log int64 = -1
	for _, r := range rows {
		if r.Limiter == "windows" {
			log = r.Count(clientsName)
		}
	}
	var out []string
	for _, r := range rows {
		n := r.Count(clientsName)
		if log < 0 || n == log {
			continue
		}
		var why string
		switch r.Limiter {
		case "windows fixed-window":
			why = "a fixed window counts each window apart: a burst across its edge is split in two, and up to twice N passes there"
		case "windows sliding-counter":
			why = "a sliding counter weighs the window before: a key whose two windows together pass N is refused though no window holds N"
		case "nginx windows":
			why = "nginx's buckets admit N at once and refill N a period: up to twice N in a period after a quiet one"
		default:
			continue
		}
		out = append(out, fmt.Sprintf("%s refuses %s keys where the sliding log refuses %s: %s.", strings.TrimPrefix(r.Limiter, "windows "), results.Count(n), results.Count(log), why))
	}
	return strings.Join(out, " ")
}

// agents writes a count of distinct agents or paths, counted to
// maxDistinct.
func agents(n int64) string {
	if n >= maxDistinct {
		return fmt.Sprintf("%d+", maxDistinct)
	}
	return strconv.FormatInt(n, 10)
}

// short names an algorithm in a narrow column.
func short(a string) string {
	switch limiters.Algorithm(a) {
	case limiters.FixedWindow:
		return "fixed"
	case limiters.SlidingLog:
		return "log"
	case limiters.SlidingCounter:
		return "counter"
	case limiters.TokenBucket:
		return "token"
	case limiters.LeakyBucket:
		return "leaky"
	}
	return a
}

// charts are the plan's: refusals against the limit, the clients' peaks
// with the suggestions marked, and the top clients' traffic over time
// against them.
func charts(_ *results.File, rows []results.Row) []report.Figure {
	out := curveCharts(rows)
	var points, suggestions, top []results.Row
	var peaks *results.Row
	for i, r := range rows {
		switch r.Setting(kind) {
		case kindPoint:
			points = append(points, r)
		case kindSuggest:
			suggestions = append(suggestions, r)
		case kindTop:
			top = append(top, r)
		case kindPeaks:
			peaks = &rows[i]
		}
	}
	marks := suggestedMarks(suggestions)
	span := 0.0
	for _, r := range rows {
		if r.Setting(kind) == kindLog {
			span = r.Get(spanName)
		}
	}
	if len(points) > 0 {
		byAlgo := map[string]*[2]report.Line{}
		var order []string
		for _, r := range points {
			l, ok := byAlgo[r.Limiter]
			if !ok {
				l = &[2]report.Line{{Name: r.Limiter}, {Name: r.Limiter}}
				byAlgo[r.Limiter] = l
				order = append(order, r.Limiter)
			}
			x := r.SettingFloat(limitN)
			l[0].Points = append(l[0].Points, report.XY{X: x, Y: 100 * r.Get(refusedShare)})
			l[1].Points = append(l[1].Points, report.XY{X: x, Y: 100 * r.Get(clientsShare)})
		}
		var reqs, cls []report.Line
		for _, a := range order {
			reqs, cls = append(reqs, byAlgo[a][0]), append(cls, byAlgo[a][1])
		}
		x := report.Axis{Label: "limit: N per " + periodOf(rows), Log: true, Ticks: report.TicksPlain}
		out = append(out, report.Figure{Name: "plan-refused", Title: "What each limit would have refused",
			Caption: "Each algorithm replayed the log at each limit of the sweep: the share of the requests it refuses (left) and of the clients it refuses at least once (right). Algorithms that decide this traffic alike draw one line over another; where the lines part, they differ.",
			Panels: []report.Panel{
				{Title: "requests refused", X: x, Y: report.Axis{Label: "% of requests", Min: 0}, Lines: reqs},
				{Title: "clients refused at least once", X: x, Y: report.Axis{Label: "% of clients", Min: 0}, Lines: cls},
			}, Cols: 2, Width: 10, RowHeight: 3.6})
	}
	if peaks != nil {
		if s := peaks.Curve(cdfName); s != nil && len(s.X) > 0 {
			// The share of clients whose peak is above X, on a log scale:
			// the tail a limit is set against, which a linear one hides.
			least := 50 / max(peaks.Get(clientsCount), 1)
			line := report.Line{Name: "share of clients"}
			for i := range s.X {
				line.Points = append(line.Points, report.XY{X: max(s.X[i], 1), Y: max(100*(1-s.Y[i]), least)})
			}
			ms := []report.Mark{{Name: "--spare " + report.Percentage(peaks.Get(spareName)), At: 100 * peaks.Get(spareName)}}
			for _, m := range marks {
				m.OnX = true
				ms = append(ms, m)
			}
			out = append(out, report.Figure{Name: "plan-peaks", Title: "The clients' peaks, and the limits suggested",
				Caption: fmt.Sprintf("The share of clients whose peak (the most they sent in any window of %s) is above X: those a sliding log of N = X refuses at least once, and about those the other algorithms do. The dashed lines are --spare and the limits a sweep suggested (with --limits), each for the algorithms it names.", peaks.Setting(periodSetting)),
				Panels: []report.Panel{{X: report.Axis{Label: "peak: requests in any " + peaks.Setting(periodSetting), Log: true, Ticks: report.TicksPlain},
					Y: report.Axis{Label: "% of clients above", Log: true, Least: least, Ticks: report.TicksPlain, Max: 100}, Lines: []report.Line{line}, Steps: true, Marks: ms}},
				Width: 10, RowHeight: 3.6, LegendWidth: 2.8})
		}
	}
	var panels []report.Panel
	for _, r := range top[:min(len(top), 6)] {
		s := r.Curve(seriesName)
		if s == nil {
			continue
		}
		line := report.Line{Name: "peak in a window"}
		for i := range s.X {
			line.Points = append(line.Points, report.XY{X: s.X[i] / 60, Y: s.Y[i]})
		}
		panels = append(panels, report.Panel{Title: r.Setting(keySetting), X: report.Axis{Label: "minutes from the log's start", Min: 0, Max: span / 60},
			Y: report.Axis{Label: "requests in a window", Min: 0, Ticks: report.TicksPlain}, Lines: []report.Line{line}, Steps: true, Marks: marks})
	}
	if len(panels) > 0 {
		out = append(out, report.Figure{Name: "plan-top", Title: "The clients hit hardest, over time",
			Caption: "Each client's peak in each stretch of the log (the most it sent in any window of the period within it), against the limits suggested (dashed): where the line is above one, that limit refuses it.",
			Panels:  panels, Cols: 2, Width: 11, RowHeight: 2.6, LegendWidth: 2.8})
	}
	return out
}

// suggestedMarks are the limits suggested, one mark each, naming the
// algorithms it is suggested for.
func suggestedMarks(suggestions []results.Row) []report.Mark {
	var out []report.Mark
	names := map[float64][]string{}
	var order []float64
	for _, r := range suggestions {
		if r.Setting(foundSetting) != "true" {
			continue
		}
		n := r.SettingFloat(limitN)
		if _, ok := names[n]; !ok {
			order = append(order, n)
		}
		names[n] = append(names[n], short(r.Limiter))
	}
	for _, n := range order {
		out = append(out, report.Mark{Name: fmt.Sprintf("%v: %s", n, strings.Join(names[n], ", ")), At: n})
	}
	return out
}

// periodOf is the limits' period, as the log row says it.
func periodOf(rows []results.Row) string {
	for _, r := range rows {
		if r.Setting(kind) == kindLog {
			return r.Setting(periodSetting)
		}
	}
	return "period"
}

// plural is n things, as a person writes it.
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return results.Count(n) + " " + thing + "s"
}

// curveCharts are the envelope's and the frontier's charts: the clients'
// quantiles against the window's length and against the rate, on log
// axes, with the first clients the bucket suggested refuses drawn over
// them, and the suggestion marked.
func curveCharts(rows []results.Row) []report.Figure {
	var env, front, caught, classes []results.Row
	var policy *results.Row
	for i, r := range rows {
		switch r.Setting(kind) {
		case kindClass:
			if r.Setting(keySetting) == "" {
				classes = append(classes, r)
			}
		case kindEnv:
			env = append(env, r)
		case kindFront:
			front = append(front, r)
		case kindCaught:
			caught = append(caught, r)
		case kindPolicy:
			if r.Limiter == "bucket" {
				policy = &rows[i]
			}
		}
	}
	var out []report.Figure
	// Each class a band: its median, and the least and most of its keys
	// about it; the keys refused each a line, numbered.
	bands := func(series string) []report.Line {
		var lines []report.Line
		for _, r := range classes {
			mid, lo, hi := r.Curve(series), r.Curve(series+"_least"), r.Curve(series+"_most")
			if mid == nil || lo == nil || hi == nil || r.Setting(letterSetting) == "" {
				continue
			}
			// Wrapped: a class's name ("batches of about 150 at 9 a
			// second, hourly") ran past the legend's edge.
			l := report.Line{Name: results.Wrap(fmt.Sprintf("(%s) %s keys: %s", r.Setting(letterSetting), results.Count(r.Count(clientsCount)), r.Setting(shapeSetting)), 42)}
			for i := range mid.X {
				l.Points = append(l.Points, report.XY{X: mid.X[i], Y: max(mid.Y[i], 1), Lo: max(lo.Y[i], 1), Hi: max(hi.Y[i], 1)})
			}
			lines = append(lines, l)
		}
		return lines
	}
	over := func(name string) []report.Line {
		var lines []report.Line
		for i, r := range caught {
			s := r.Curve(name)
			if s == nil {
				continue
			}
			l := report.Line{Name: fmt.Sprintf("#%d %s", i+1, r.Setting(keySetting))}
			for i := range s.X {
				l.Points = append(l.Points, report.XY{X: s.X[i], Y: max(s.Y[i], 1)})
			}
			lines = append(lines, l)
		}
		return lines
	}
	refused := "the first keys the bucket suggested refuses, numbered"
	if policy != nil && policy.Get(separatedName) != 1 {
		refused = "the first keys the bucket refuses (nothing stands apart: it spares all but --spare), numbered"
	}
	if len(env) > 1 {
		lines := append(bands(classEnvelope), over(envelopeName)...)
		out = append(out, report.Figure{Name: "plan-envelope", Title: "The clients' envelope",
			Caption: "The most a key sent in any window of each length (log axes): each class of keys (Who sends what) as its median, with a bar from the least to the most of its keys, and " + refused + ". A user who opens with a fan-out is steep, then flat; a batch is steep to its size, then flat to its period; one who sends steadily is a straight line.",
			Panels: []report.Panel{{X: report.Axis{Label: "window (seconds)", Log: true, Ticks: report.TicksPlain},
				Y: report.Axis{Label: "requests in the window", Log: true, Least: 1, Ticks: report.TicksPlain}, Lines: lines}},
			Width: 10, RowHeight: 4.2, LegendWidth: 3.4})
	}
	if len(front) > 1 {
		lines := append(bands(classBursts), over(burstsName)...)
		var marks []report.Mark
		if policy != nil {
			for _, r := range front {
				if strings.HasPrefix(policy.Setting(policySetting), r.Setting(limitSetting)+" burst ") {
					marks = append(marks, report.Mark{Name: "suggested: " + policy.Setting(policySetting), OnX: true, At: r.Get(rateName)})
				}
			}
			if l, err := limiters.ParseLimit(policy.Setting(policySetting)); err == nil && l.Burst > 0 {
				marks = append(marks, report.Mark{At: float64(l.Burst)})
			}
		}
		out = append(out, report.Figure{Name: "plan-frontier", Title: "The buckets' frontier",
			Caption: "At each rate, the least burst under which a bucket never refuses a key (log axes): each class of keys as its median, with a bar from the least to the most of its keys, and " + refused + ". The dashed lines are the rate and the burst suggested: the classes below the burst, the keys refused above it; where the gap between them is widest is where the line goes.",
			Panels: []report.Panel{{X: report.Axis{Label: "rate (requests a second)", Log: true, Ticks: report.TicksPlain},
				Y: report.Axis{Label: "least burst", Log: true, Least: 1, Ticks: report.TicksPlain}, Lines: lines, Marks: marks}},
			Width: 10, RowHeight: 4.2, LegendWidth: 3.4})
	}
	return out
}

// picks are the plan's answers, the first lines of its page: the bucket
// for every key, or the two windows, and the tier for addresses shared by
// many users; each with what it refuses.
func picks(_ *results.File, rows []results.Row) []report.Pick {
	var out []report.Pick
	for _, r := range rows {
		if r.Setting(kind) != kindPolicy {
			continue
		}
		refuses := fmt.Sprintf("It refuses %s clients, %s requests", results.Count(r.Count(clientsName)), refusedCell(r))
		if !r.Has(refusedName) {
			refuses = fmt.Sprintf("It refuses %s clients (the requests it refuses are not decided in a plan merged from shards)", results.Count(r.Count(clientsName)))
		}
		if who := r.Setting(caughtSetting); who != "" {
			refuses += ": " + strings.ReplaceAll(who, " ", ", ")
			if r.Count(clientsName) > int64(strings.Count(who, " ")+1) {
				refuses += ", …"
			}
		}
		switch r.Limiter {
		case "bucket":
			why := sentence(refuses)
			if r.Get(separatedName) == 1 {
				why = fmt.Sprintf("%s keys stand %s× apart from all the rest. %s", results.Count(r.Count(outName)), roundWords(r.Get(gapName)), why)
			} else {
				why = fmt.Sprintf("No key stands apart: it spares all but --spare (%s). %s", report.Percentage(r.Get(spareName)), why)
			}
			out = append(out, report.Pick{Need: "A bucket for every key", Limiter: r.Setting(policySetting), Why: why})
		case "windows":
			out = append(out, report.Pick{Need: "Or two windows, a short and a long", Limiter: r.Setting(policySetting), Why: refuses + ", as a sliding log."})
		case "shared keys", "pollers":
			why := "A tier of their own"
			if r.Get(scaleName) == 1 {
				why = "The bucket spares them as it is, the same tier"
			}
			need := "Keys shared by many users"
			if r.Limiter == "pollers" {
				need = "Steady pollers (monitors, health checks)"
			}
			out = append(out, report.Pick{Need: need, Limiter: fmt.Sprintf("%s (×%g)", r.Setting(policySetting), r.Get(scaleName)),
				Why: fmt.Sprintf("%s: %s keys, %s of the requests.", why, results.Count(r.Count(clientsCount)), report.Percentage(r.Get(shareName)))})
		}
	}
	return out
}

// sentence ends s with a full stop, unless it ends with an ellipsis.
func sentence(s string) string {
	if strings.HasSuffix(s, "…") {
		return s
	}
	return s + "."
}

// addRefused adds the requests a policy refused, and their share of those
// decided: nothing when they were not decided (-1: a point of the
// frontier far from the answer, or a plan merged from shards).
func addRefused(row *results.Row, refused int64, decided int) {
	if refused < 0 {
		return
	}
	row.Add(refusedName, results.UnitCount, float64(refused))
	row.Add(refusedShare, results.UnitFraction, float64(refused)/float64(max(decided, 1)))
}

// addCount adds a count, or nothing when it was not decided (-1).
func addCount(row *results.Row, name string, n int64) {
	if n >= 0 {
		row.Add(name, results.UnitCount, float64(n))
	}
}

// instant is a time in seconds since 1970 as a person reads it, in UTC
// to the second: "2026-12-05 23:55:02".
func instant(sec float64) string {
	if sec == 0 {
		return "-"
	}
	return time.Unix(0, int64(sec*1e9)).UTC().Format(time.DateTime)
}
