package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// Modes returns the plan's mode, which a report of its file is given as a
// lab's is given the lab's.
func Modes() report.Modes { return report.Modes{mode} }

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
				"In nginx (--emit nginx): limit_req's rate in whole requests a second or a minute (rounded up where the rate is neither) and its burst one less than the bucket's (nginx admits the burst and one more at once), decided as nginx keeps it (its clock of milliseconds, its rate in thousandths a second); nginx has no window, and each window becomes a bucket of N at once refilled at N a period, decided as such. " +
				"In a product (--emit haproxy, kong, cloudflare...): the windows where they set the bucket's keys apart, else a window of the product's own that spares every key the bucket spares, else the bucket, as the product can say them (its periods, its least limits; several rules as one where it keeps one); each limit scaled (×0.6 to ×4) until the product's own decisions, replayed over the log, refuse the plan's keys and no other, the keys refused named where they are not the plan's, and a ban's refusals counted apart; a product that cannot key as --key does says so (none in it).",
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
				default:
					if name, of, ok := strings.Cut(r.Limiter, " "); ok && productNamed(name) {
						who = fmt.Sprintf("  the %s in %s", of, name)
						if of == "none" {
							who = "  none in " + name
						}
					}
				}
				keys, requests := countCell(r, clientsName), refusedCell(r)
				if strings.HasSuffix(r.Limiter, " none") {
					keys, requests = "—", "—" // nothing to decide: it cannot keep the policy
				}
				return []string{who, r.Setting(policySetting), keys, requests, apart, r.Setting(caughtSetting)}
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

// instant is a time in seconds since 1970 as a person reads it, in UTC
// to the second: "2026-12-05 23:55:02".
func instant(sec float64) string {
	if sec == 0 {
		return "-"
	}
	return time.Unix(0, int64(sec*1e9)).UTC().Format(time.DateTime)
}
