package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

const planUsage = `Usage:

	ratelab plan [flags] LOG...

Plan answers "what limit should I set?" from the traffic a server already
logged, with a policy: each key's envelope (its most in any window of 100ms to an hour,
--periods) and, at each rate (--rates), the least burst under which a
bucket never refuses it. The bucket suggested is where a few keys (at
most --outliers of them, five at least) stand --margin times or more
above all the rest, or a group of alike keys that sustain their excess
(a botnet's addresses), at the rate that sets the most apart, its burst
what the rest need times --headroom; a class of near-identical keys whose
need is a burst (integrations' batches) is not set apart under a far
wider gap above it. Where none stands apart, it says so, and the bucket
spares all but --spare. Two windows are suggested the same way, the keys
grouped by the shape of their traffic, and keys that look like many
users, and steady pollers (monitors, health checks: one to three paths at
a regular interval), get a tier of their own where the bucket would
refuse them. --current decides the limit you run today
beside it. Each is decided
over the log in simulated time by the library's limiters, as ratelab
replay decides them. --limits adds a sweep: every request decided by
each algorithm at each limit, what each would have refused, of which
clients, and each algorithm's lowest limit that refuses no more than
--spare of them (one number a period, which fails where an app opens
with a fan-out as high in a second as a scraper sends).

LOG is one or more access logs, plain or gzip, merged by time into one
log whatever their order: a log and its rotated files, the logs of a
fleet's hosts, a load balancer's nodes' files (logs/*.log.gz); - or none
is standard input. Each file is opened when the merge comes to its
times. Lines of one file out of time order by up to --reorder are put
back in order; a line that is not a request is counted and the first few
are shown with their line numbers. A log's times are what it says: whole seconds in the
combined format, so a limit per second is judged on whole seconds.

--format says how the log is written:

	combined   nginx's and Apache's default (the default)
	common     the same without referer and user agent
	json       one JSON object a line; --time, --status, --agent and --path
	           name its fields where it names them otherwise (a.b for b in
	           the object a); a time since 1970 is in seconds, milliseconds,
	           microseconds or nanoseconds, as its size says
	csv        ratelab's trace: t,key[,n], t in seconds from the start
	'$remote_addr [$time_local] "$request" $status ...'
	           an nginx log_format of your own, as written in nginx.conf

or names the product that wrote it, whose fields it knows (--time,
--status, --agent and --path still win; --key ip is the client's address
each writes):

	caddy      Caddy's JSON access log (ts, request.client_ip, headers as arrays)
	traefik    Traefik's JSON access log (StartUTC, ClientHost, DownstreamStatus)
	alb        AWS Application Load Balancer's (space-separated, client:port)
	cloudflare Cloudflare's Logpush HTTP requests (EdgeStartTimestamp, ClientIP)
	gcp        Google Cloud Load Balancing's, as exported (timestamp, httpRequest)

--key says what a limit counts a request under: ip (the client's address),
field:NAME (a variable of the format, or a JSON field, a.b for a nested
one; .NAME is the same), header:NAME (a logged request header:
$http_x_api_key for header:X-Api-Key; header:X-Forwarded-For is its last
address, the client as the load balancer in front saw it), each
optionally followed by +path:N, the path's first N segments (ip+path:2
limits each client on each /api/v1).

--limits asks for the sweep: a range, LOW..HIGH, tried at --steps limits
spaced evenly on a log scale (10/s..1000/s), or a list
(100/min,300/min,1000/min); it costs what the policy does two or three
times over (the 10M-line shop: about 50 s with 1/s..100/s, 9 without).
The limits share one period: a client's peak is the most it sent in any
window of it. For the buckets, N/PERIOD is a rate of N per PERIOD with a
burst of N.

The log's server may have refused requests already (429 in the status):
--refused count decides them as any other (what the clients asked for);
--refused drop leaves them out (each was sent again, and the log holds
the retry too).

--emit nginx prints the bucket suggested as nginx's limit_req lines, keyed
as the plan was ($binary_remote_addr for ip, $http_x_api_key for
header:X-Api-Key), the keys that look like many users sent to a zone of
their own, and the two windows as nginx can say them (two buckets); the
rates nginx cannot write are rounded up, and what nginx refuses is
decided through its own model (its clock of milliseconds, its rate in
thousandths). --emit ratelab
prints the ratelab serve --config file and the Go that builds the same
limiter. Both are written beside plan.json either way. --emit and a
product's name (haproxy, traefik, caddy, envoy, envoy-rls, kong,
aws-waf, cloudflare, cloud-armor, apigateway) writes the policy as that
product keeps it (haproxy.cfg, traefik.yaml, Caddyfile, envoy.yaml,
ratelimit.yaml, kong.yaml, aws-waf.json, cloudflare.json,
cloud-armor.json, apigateway.json; whole, the application --backend,
where the product proxies): the windows, a
window of the product's own or the bucket, in the product's terms,
scaled until the product, the log replayed through its own decisions,
refuses the plan's keys and no other; what it refuses (a ban's share
apart) is said beside the plan's policy, the keys it cannot set apart
are named, and a product that cannot key as --key does says so.

A plan runs on every core of this machine (--cores N: on N; 1: one
pass; a sweep is one pass, which decides on every core already): the log
read once, its keys summed up in as many shards at once, merged, and the
policy decided over the requests the shards kept (the 10M-line shop in
9 s on two cores, where one pass takes 13). --memory is the memory it
keeps near (Go's soft limit; by default the least of 1.5 GiB and half this
machine's): a quarter of it for the requests kept, past which whom the
policy refuses is said and how many of their requests is not. --current
on a fleet's logs is said across its nodes and on each apart.

A log too large for one machine is planned in shards: --shard I/N
--summary FILE sums up only the keys of shard I of N (each shard reads
the whole log; N alone takes I from JOB_COMPLETION_INDEX, as a
Kubernetes Indexed Job's pods have it), and ratelab plan merge FILE...
turns shards 0 to N-1 into the plan of one pass: the same policy, and
whom it refuses; the requests it refuses it does not decide
(docs/plan.md, docs/plan/shards-job.yaml).

It prints the tables, and writes DIR/plan.json (the lab's results file:
schema 4, mode "plan"; see docs/plan.md) with the report beside it:
DIR/report.html, its charts in DIR/charts.

Examples:

	ratelab plan /var/log/nginx/access.log.2.gz /var/log/nginx/access.log.1 /var/log/nginx/access.log
	ratelab plan --format alb logs/*.log.gz          # a load balancer's nodes' files, merged by time
	ratelab plan --limits 60/min..6000/min --key ip+path:2 access.log
	ratelab plan --format json --time .ts --key .user_id --cost .tokens app.log
	ratelab plan --format caddy --emit nginx access.json
	ratelab plan --format json --time .timestamp --key .httpRequest.remoteIp \
		--status .httpRequest.status --path .httpRequest.requestUrl lb.json
	go run ./cmd/genlog -lines 1000000 | ratelab plan --limits 1/s..100/s

Flags:
`

func runPlan(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "merge" {
		return runPlanMerge(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var f planFlags
	f.define(fs)
	var shard, summary string
	var cores int
	fs.IntVar(&cores, "cores", 0, "the cores the policy is found on: the log read once, its keys summed up in as many shards at once, merged (0: every core; 1: one pass)")
	fs.StringVar(&shard, "shard", "", "sum up only the keys of shard I of N (I/N; N alone takes I from JOB_COMPLETION_INDEX) into --summary, for ratelab plan merge")
	fs.StringVar(&summary, "summary", "", "the file --shard writes its summary to")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), planUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c, o, err := f.check()
	if err != nil {
		return badUsage(fs, fmt.Errorf("plan: %w", err))
	}
	if fs.NArg() == 0 && isTerminal(stdin) {
		return badUsage(fs, errors.New("plan: no LOG given, and standard input is a terminal (or a device): name a log, or pipe one in"))
	}
	inputs, err := openLogs(fs.Args(), stdin)
	if err != nil {
		return usageError{fmt.Errorf("plan: %w", err)}
	}
	if f.out == "" {
		f.out = planOut(fs.Args())
	}
	n, err := planCores(cores, shard, summary, len(c.Limits) > 0)
	if err != nil {
		return badUsage(fs, fmt.Errorf("plan: %w", err))
	}
	if n > 1 {
		o.Parsers = n // a log format's lines parsed on every core, taken in order
	}
	memory, restore, err := setMemory(f.memory)
	if err != nil {
		return badUsage(fs, fmt.Errorf("plan: %w", err))
	}
	defer restore()
	// A quarter of it for the requests a plan on several cores keeps to
	// decide its policy over, 16 bytes each.
	c.Keep = max(memory/4/16, 1)
	r, err := accesslog.NewReader(inputs, o)
	if err != nil {
		return badUsage(fs, fmt.Errorf("plan: %w", err))
	}
	if shard != "" || summary != "" {
		index, of, err := shardFlag(shard, summary, f.current)
		if err != nil {
			return badUsage(fs, fmt.Errorf("plan: %w", err))
		}
		return writeShard(ctx, r, c, index, of, summary, stdout, stderr)
	}
	var p *plan.Plan
	if n > 1 {
		p, err = plan.RunOnCores(ctx, r, c, n, planProgress(stderr))
	} else {
		p, err = plan.Run(ctx, r, c, planProgress(stderr))
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if err != nil {
		return usageError{err} // plan's errors say "plan:"
	}
	p.Memory = memory
	for _, u := range p.Unseen {
		fmt.Fprintf(stderr, "plan: %s\n", u)
	}
	return printPlan(stdout, &f, p, logName(inputs, p.Sources), f.settings(fs))
}

// planFlags are plan's flags.
type planFlags struct {
	format, key, cost, limits, algos, spare, refused, out string
	timeField, status, agent, path                        string // a JSON log's fields
	periods, rates, emit, current, backend                string
	headroom, margin                                      float64
	noTiers                                               bool
	outliersFlag                                          string
	steps, top                                            int
	reorder                                               time.Duration
	memory                                                string
}

func (f *planFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "combined", "how the log is written: combined, common, json, csv, an nginx log_format string, or the product that wrote it: caddy, traefik, alb, cloudflare, gcp")
	fs.StringVar(&f.key, "key", "ip", "what a limit counts a request under: ip, field:NAME, .NAME, header:NAME, each optionally +path:N")
	fs.StringVar(&f.cost, "cost", "", "the field a request's cost is in (a log format's variable, a JSON field); each costs 1 if not given")
	fs.StringVar(&f.timeField, "time", "", "a JSON log's time field (default: the first of time, timestamp, ts, @timestamp)")
	fs.StringVar(&f.status, "status", "", "a JSON log's status field (default: the first of status, status_code)")
	fs.StringVar(&f.agent, "agent", "", "a JSON log's user agent field (default: the first of user_agent, http_user_agent, userAgent)")
	fs.StringVar(&f.path, "path", "", "a JSON log's path or URL field (default: the first of path, request_uri, uri, request)")
	fs.StringVar(&f.limits, "limits", "", "the sweep, each algorithm at each limit: LOW..HIGH, or a comma-separated list (none: the policy alone)")
	fs.IntVar(&f.steps, "steps", 10, "how many limits a LOW..HIGH sweep tries")
	fs.StringVar(&f.algos, "algos", "all", "the algorithms to try, comma-separated")
	fs.StringVar(&f.spare, "spare", "0.1%", "the share of clients a suggested limit may refuse (0.1% or 0.001)")
	fs.StringVar(&f.refused, "refused", "count", "the requests the log's server refused (429): count (decide them as the others) or drop")
	fs.StringVar(&f.periods, "periods", "", "the envelope's window lengths, comma-separated (default: 100ms, 300ms, 1s, 3s, ... 1h, as far as the log reaches)")
	fs.StringVar(&f.rates, "rates", "", "the rates of the buckets' frontier, comma-separated (default: 1/100s ... 1000/s, 1, 2 and 5 a decade)")
	fs.Float64Var(&f.headroom, "headroom", 1.5, "what the policy allows above what the keys it spares were seen to need")
	fs.StringVar(&f.outliersFlag, "outliers", "1%", "the share of the keys a policy may set apart from the rest (1% or 0.01)")
	fs.Float64Var(&f.margin, "margin", 3, "how far apart, at least, the keys set apart stand from the rest (a ratio)")
	fs.BoolVar(&f.noTiers, "no-tiers", false, "leave the keys that look like many users among the others, with no tier of their own")
	fs.IntVar(&f.top, "top", 10, "how many clients the tables name")
	fs.DurationVar(&f.reorder, "reorder", 2*time.Second, "how far out of time order the lines of one file may be and still be taken in order (files are merged by time whatever it is)")
	fs.StringVar(&f.out, "out", "", "the folder plan.json and the report go to (default out/plan-NAME, NAME the first log's name without its extension; a merge's out/plan-merged)")
	fs.StringVar(&f.current, "current", "", "the limit you run today, decided beside the policy: 100/min, gcra 10/s burst 20, or nginx.conf, a tier file, haproxy.cfg, traefik.yaml, a Caddyfile, envoy.yaml, ratelimit.yaml, kong.yaml, aws-waf.json, cloudflare.json, cloud-armor.json, apigateway.json")
	fs.StringVar(&f.memory, "memory", "", "the memory the plan keeps near, as Go's soft limit: 1.5GiB, 800MB (default: the least of 1.5 GiB and half this machine's; GOMEMLIMIT, if set)")
	fs.StringVar(&f.emit, "emit", "", "print the policy as a limiter's configuration after the tables, several with commas: nginx, ratelab (written to --out either way), or a product's ("+products.Names()+": decided over the log through its own model, and written to --out)")
	fs.StringVar(&f.backend, "backend", "127.0.0.1:8080", "the application a product's whole configuration (--emit haproxy, envoy, kong and the others) sends what it admits to, named there once")
}

// check returns the plan and the reading f says.
func (f *planFlags) check() (plan.Config, accesslog.Options, error) {
	var c plan.Config
	var err error
	if c.Limits, err = sweep(f.limits, f.steps); err != nil {
		return c, accesslog.Options{}, err
	}
	if c.Algorithms, c.Periods, c.Rates, err = f.lists(); err != nil {
		return c, accesslog.Options{}, err
	}
	if c.Spare, err = share(f.spare); err != nil {
		return c, accesslog.Options{}, fmt.Errorf("--spare %s: %w", f.spare, err)
	}
	if !(f.headroom >= 1) {
		return c, accesslog.Options{}, fmt.Errorf("--headroom %g: want 1 or more", f.headroom)
	}
	c.Headroom, c.NoTiers = f.headroom, f.noTiers
	if c.Outliers, err = share(f.outliersFlag); err != nil || c.Outliers == 0 || c.Outliers > 0.5 {
		return c, accesslog.Options{}, fmt.Errorf("--outliers %s: want a share above 0, at most 50%%", f.outliersFlag)
	}
	if !(f.margin > 1 && f.margin >= f.headroom) {
		return c, accesslog.Options{}, fmt.Errorf("--margin %g: want a ratio above 1, no less than --headroom (%g): the burst is set inside the gap", f.margin, f.headroom)
	}
	c.Margin = f.margin
	switch f.refused {
	case "count":
	case "drop":
		c.DropRefused = true
	default:
		return c, accesslog.Options{}, fmt.Errorf("--refused %q: want count or drop", f.refused)
	}
	if f.top < 1 {
		return c, accesslog.Options{}, fmt.Errorf("--top %d: want 1 or more", f.top)
	}
	ps, other := products.Parse(f.emit)
	for _, e := range other {
		if !slices.Contains([]string{"nginx", "ratelab"}, e) {
			return c, accesslog.Options{}, fmt.Errorf("--emit %s: %q is not one of nginx, ratelab, %s", f.emit, e, products.Names())
		}
	}
	c.Products = ps
	c.Top = f.top
	key, err := accesslog.ParseKey(f.key)
	if err != nil {
		return c, accesslog.Options{}, err
	}
	c.Key = key
	if f.current != "" {
		if c.Current, err = f.currentLimit(key); err != nil {
			return c, accesslog.Options{}, err
		}
	}
	reorder := f.reorder
	if reorder == 0 {
		reorder = -1 // none
	}
	return c, accesslog.Options{Format: f.format, Key: key, Cost: f.cost, Time: f.timeField, Status: f.status, Agent: f.agent, Path: f.path, Reorder: reorder}, nil
}

// lists reads --algos (all: none named), --periods and --rates.
func (f *planFlags) lists() (algs []limiters.Algorithm, periods []time.Duration, rates []limiters.Limit, err error) {
	if f.algos != "all" {
		for name := range strings.SplitSeq(f.algos, ",") {
			a, err := limiters.ParseAlgorithm(strings.TrimSpace(name))
			if err != nil {
				return nil, nil, nil, err
			}
			algs = append(algs, a)
		}
	}
	if f.periods != "" {
		for p := range strings.SplitSeq(f.periods, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(p))
			if err != nil || d <= 0 {
				return nil, nil, nil, fmt.Errorf("--periods %s: %q is not a positive duration (100ms, 1s, 5m)", f.periods, p)
			}
			periods = append(periods, d)
		}
	}
	if f.rates != "" {
		for r := range strings.SplitSeq(f.rates, ",") {
			l, err := limiters.ParseLimit(strings.TrimSpace(r))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("--rates %s: %w", f.rates, err)
			}
			rates = append(rates, l)
		}
	}
	return algs, periods, rates, nil
}

// currentLimit reads --current: a limit written out, or the file (an
// nginx.conf, a tier file, a product's configuration) it names.
func (f *planFlags) currentLimit(key accesslog.KeySpec) (*plan.Current, error) {
	var file []byte
	st, err := os.Stat(f.current)
	switch {
	case err == nil && !st.IsDir():
		if file, err = os.ReadFile(f.current); err != nil {
			return nil, err
		}
	case strings.HasSuffix(f.current, ".conf") || filepath.Base(f.current) == "Caddyfile" || strings.HasSuffix(f.current, ".cfg") || strings.HasSuffix(f.current, ".yaml") || strings.HasSuffix(f.current, ".yml") || strings.HasSuffix(f.current, ".json") ||
		strings.HasPrefix(f.current, "/") || strings.HasPrefix(f.current, "."):
		// A file's name, and no such file: said so, rather than
		// "not a rate".
		return nil, fmt.Errorf("--current %s: no such file (nginx.conf, a tier file, haproxy.cfg, traefik.yaml, Caddyfile, envoy.yaml, ratelimit.yaml, kong.yaml, aws-waf.json, cloudflare.json, cloud-armor.json, apigateway.json)", f.current)
	}
	cur, err := plan.ParseCurrent(f.current, file, filepath.Base(f.current), key)
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// settings are the plan's settings as its file records them: every flag
// with a value, by name.
func (f *planFlags) settings(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.VisitAll(func(fl *flag.Flag) {
		if v := fl.Value.String(); fl.Name != "out" && v != "" {
			out[fl.Name] = v
		}
	})
	return out
}

// sweep reads --limits: LOW..HIGH at steps limits spaced on a log scale
// (rounded to two digits), or a list.
func sweep(s string, steps int) ([]limiters.Limit, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil // no sweep: the policy alone
	}
	lo, hi, isRange := strings.Cut(s, "..")
	if !isRange {
		var out []limiters.Limit
		for part := range strings.SplitSeq(s, ",") {
			l, err := limiters.ParseLimit(strings.TrimSpace(part))
			if err != nil {
				return nil, fmt.Errorf("--limits: %w", err)
			}
			out = append(out, l)
		}
		return out, nil
	}
	low, err := limiters.ParseLimit(lo)
	if err != nil {
		return nil, fmt.Errorf("--limits: %w", err)
	}
	high, err := limiters.ParseLimit(hi)
	if err != nil {
		return nil, fmt.Errorf("--limits: %w", err)
	}
	if low.Per != high.Per || low.Burst != 0 || high.Burst != 0 || low.N >= high.N {
		return nil, fmt.Errorf("--limits %s: want LOW..HIGH of one period, no burst, LOW below HIGH (10/s..1000/s)", s)
	}
	if steps < 2 || steps > 50 {
		return nil, fmt.Errorf("--steps %d: want 2 to 50", steps)
	}
	var out []limiters.Limit
	for i := range steps {
		v := float64(low.N) * math.Pow(float64(high.N)/float64(low.N), float64(i)/float64(steps-1))
		n := int(roundTwo(v))
		if i == steps-1 {
			n = high.N // the sweep ends where it was asked to, rounded or not
		}
		if len(out) > 0 && n <= out[len(out)-1].N {
			continue
		}
		out = append(out, limiters.Limit{N: n, Per: low.Per})
	}
	return out, nil
}

// roundTwo rounds v to two significant digits.
func roundTwo(v float64) float64 {
	if v < 10 {
		return math.Round(v)
	}
	scale := math.Pow(10, math.Floor(math.Log10(v))-1)
	return math.Round(v/scale) * scale
}

// share reads a share: 0.1% or 0.001.
func share(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, errors.New("not a share (0.1% or 0.001)")
	}
	if strings.HasSuffix(s, "%") {
		v /= 100
	}
	if !(v >= 0 && v < 1) {
		return 0, errors.New("want a share from 0 to below 100%")
	}
	return v, nil
}
