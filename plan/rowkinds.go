package plan

import "github.com/ratelab/ratelab/results"

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
