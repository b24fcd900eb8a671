package plan

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/results"
)

// File returns p as the lab's rows, a section of the plan after another
// (the log, the clients' peaks, the policy, the limit run today, the
// envelope, the classes, the frontier, the keys refused, the sweep, the
// clients); log names the log read.
func (p *Plan) File(log string, settings map[string]string) *results.File {
	f := &results.File{Schema: results.Schema, Meta: results.Meta{
		GoVersion: runtime.Version(), CPU: results.CPUModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Start: time.Now().Add(-p.Took), Elapsed: results.Seconds(p.Took.Seconds()),
		Target: log, Settings: settings,
	}}
	for _, section := range []func(string) []results.Row{p.logRows, p.peaksRows, p.policyRows, p.currentRows,
		p.envelopeRows, p.classRows, p.frontierRows, p.caughtRows, p.sweepRows, p.clientRows} {
		for _, r := range section(log) {
			r.Mode = modeName
			f.Rows = append(f.Rows, r)
		}
	}
	return f
}

// logRows are the log's row, with its notes, and its sources' where it
// has several.
func (p *Plan) logRows(log string) []results.Row {
	per := p.Config.period()
	row := results.Row{Workload: log, Limiter: "log"}
	row.Set(kind, kindLog)
	row.Set(periodSetting, per.String())
	row.Note = strings.Join(p.logNotes(), " ")
	row.Add(linesName, results.UnitCount, float64(p.Lines))
	row.Add(requestsName, results.UnitCount, float64(p.Requests))
	row.Add(skippedName, results.UnitCount, float64(p.Skipped))
	row.Add(freeName, results.UnitCount, float64(p.Free))
	row.Add(logged429Name, results.UnitCount, float64(p.Logged429))
	row.Add(results.Decisions, results.UnitCount, float64(p.Decided))
	row.Add(clientsCount, results.UnitCount, float64(p.Clients))
	row.Add(spanName, results.UnitSeconds, p.Span.Seconds())
	row.Add(tookName, results.UnitSeconds, p.Took.Seconds())
	out := []results.Row{row}
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
			out = append(out, row)
		}
	}
	return out
}

// logNotes are what the log's row notes: lines without the key or not
// read, fields named that no line had, requests the log's server
// refused, a log shorter than two periods, times of whole seconds.
func (p *Plan) logNotes() []string {
	per := p.Config.period()
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
	return notes
}

// peaksRows is the clients' peaks' row.
func (p *Plan) peaksRows(log string) []results.Row {
	per := p.Config.period()
	row := results.Row{Workload: log, Limiter: "clients"}
	row.Set(kind, kindPeaks)
	row.Set(periodSetting, per.String())
	pk := p.Peaks
	addQuantiles(&row, pk.P50, pk.P90, pk.P99, pk.P999, pk.Max)
	row.Add(spareName, results.UnitFraction, p.Config.Spare)
	row.Add(sparingName, results.UnitCount, pk.Sparing)
	row.Add(clientsCount, results.UnitCount, float64(p.Clients))
	cdf := results.Series{Name: cdfName, Unit: results.UnitFraction, XUnit: results.UnitCount}
	for _, pt := range pk.CDF {
		cdf.X, cdf.Y = append(cdf.X, pt[0]), append(cdf.Y, pt[1])
	}
	row.AddSeries(cdf)
	return []results.Row{row}
}

// policyRows are the policy's rows: the bucket, and as nginx writes it;
// the windows, as nginx writes them and in the other window algorithms;
// the tiers of the shared keys and of the pollers. None without a bucket.
func (p *Plan) policyRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
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
		for _, pp := range p.Products {
			add(p.productRow(log, pp))
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
	return out
}

// currentRows are the limit run today's rows: across a fleet's nodes and
// on each apart, where the log is a fleet's.
func (p *Plan) currentRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
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
	return out
}

// envelopeRows are the clients' envelope's, a row a window length.
func (p *Plan) envelopeRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
	for _, e := range p.Envelope {
		row := results.Row{Workload: log, Limiter: "clients"}
		row.Set(kind, kindEnv)
		row.Set(periodSetting, e.Period.String())
		addQuantiles(&row, e.P50, e.P90, e.P99, e.P999, e.Max)
		row.Add(sparingName, results.UnitCount, float64(e.Sparing))
		row.Add(spareName, results.UnitFraction, p.Config.Spare)
		addGap(&row, e.Gap, e.Separated)
		add(row)
	}
	return out
}

// classRows are the classes', each group of keys lettered (A to Z) as the
// charts name them.
func (p *Plan) classRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
	letter := 'A'
	for _, c := range p.Classes {
		row := p.classRow(c, log)
		if !c.Refused && letter <= 'Z' {
			row.Set(letterSetting, string(letter))
			letter++
		}
		add(row)
	}
	return out
}

// frontierRows are the buckets' frontier's, a row a rate.
func (p *Plan) frontierRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
	for _, f := range p.Frontier {
		row := results.Row{Workload: log, Limiter: "bucket"}
		row.Set(kind, kindFront)
		row.Set(limitSetting, f.Rate.String())
		row.Add(rateName, results.UnitCount, perSecond(f.Rate))
		addQuantiles(&row, f.P50, f.P90, f.P99, f.P999, f.Max)
		row.Add(burstName, results.UnitCount, float64(f.Burst))
		addGap(&row, f.Gap, f.Separated)
		row.Add(usersName, results.UnitCount, float64(f.Users))
		row.Add(usersMostName, results.UnitCount, float64(f.UsersMost))
		row.Add(clientsName, results.UnitCount, float64(f.Clients))
		row.Add(refusedName, results.UnitCount, float64(f.Refused))
		add(row)
	}
	return out
}

// caughtRows are the first keys the bucket refuses, each with its own
// curves.
func (p *Plan) caughtRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
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
	return out
}

// sweepRows are the sweep's (--limits): each algorithm at each limit, and
// each algorithm's suggestion, with how many of the keys the policy
// refuses it refuses at all.
func (p *Plan) sweepRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
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
	return out
}

// clientRows are the clients the suggestions refuse most, and the keys
// that look like many users.
func (p *Plan) clientRows(log string) []results.Row {
	var out []results.Row
	add := func(r results.Row) { out = append(out, r) }
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
	return out
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

// addQuantiles adds a distribution's quantiles to row: its median, 90th,
// 99th and 99.9th percentiles and its most, counts.
func addQuantiles(row *results.Row, q50, q90, q99, q999, most float64) {
	for _, q := range []struct {
		name string
		v    float64
	}{{p50, q50}, {p90, q90}, {p99, q99}, {p999, q999}, {maxName, most}} {
		row.Add(q.name, results.UnitCount, q.v)
	}
}

// productRow is the policy table's row of a product's choice: what it
// keeps and refuses, or why it cannot.
func (p *Plan) productRow(log string, pp products.Choice) results.Row {
	row := results.Row{Workload: log, Limiter: pp.Product.Name() + " " + pp.Of}
	row.Set(kind, kindPolicy)
	row.Set(policySetting, choiceRules(pp))
	if pp.Cannot != "" {
		row.Limiter = pp.Product.Name() + " none"
		row.Set(policySetting, "cannot: "+pp.Cannot)
	}
	if pp.Strays+pp.Missed > 0 {
		row.Set(caughtSetting, strings.Join(pp.Caught, " "))
	}
	addCount(&row, clientsName, pp.Clients)
	addRefused(&row, pp.Refused, p.Decided)
	return row
}
