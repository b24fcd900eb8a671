package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/plots"
	"github.com/ratelab/ratelab/probe"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

const probeUsage = `Usage:

	ratelab probe --key header:NAME|query:NAME|source [--limit LIMIT] [flags] URL

Probe judges the rate limiter behind URL from the outside, and needs no
hint of what it is. It measures the quota (rounds of requests back to
back on a fresh key until one is refused) and how a spent key comes back
(one pressed all along, ever more sparsely, and two left quiet but for a
request after growing silences: a target that counts refused requests
lets only the quiet ones back). It sends the lab's fingerprint, planned
for the time a spent quota takes to come back (60/min with a burst of
one is probed as 1/s): a burst, a sustained rate with jitter, and
attacks around the edges of windows, on the epoch's and from a key's
first request. Then it fits every decision through each of the six
algorithms and the variants real implementations use (windows from a
key's first request, refused requests counted, a window a refusal starts
again, a weighted count rounded or truncated, time kept in whole
seconds), over the quotas, windows and refill intervals what it measured
and what the target declares point to, and fixed windows that start at a
phase of their own (a ticker that clears every count). Where admissions
take longer to answer than refusals, it first asks whether the target
limits requests in flight (K at once, per key or for all keys: one
request at a time is never refused, one more while K are in flight is),
names that limit from the recorded instants, and measures a rate limit
beside it. Where models that explain as much would decide differently,
it plans the requests on which they disagree, sends them, and fits
again. It names a model only when one explains at least 99% of the
decisions and no other kind of limiter explains as many; else it says
that none of the six explains the target, or which models it cannot tell
apart and what requests would.

What the target declares (RateLimit-Policy, RateLimit, X-RateLimit-*,
Retry-After; the IETF fields read with an RFC 9651 parser, a field that
does not parse reported as malformed) is a claim it checks, not the
frame of its fit: when the two differ it says both. Then it sends twice
the quota at once on a fresh key (a limiter that reads and writes its
store in two steps admits more), checks the remaining quota the fields
advertise one request at a time, and the wait a refusal advertises
(Retry-After, RateLimit's t, a reset field) after a quota spent back to
back and one spent over half a window: a request at 80% of it, and one
at it. Last, whether a fresh key is admitted right after another was
exhausted, and what twice the quota without a key meets.

Each simulated user sends its own key, in the header or query parameter
--key names, or with --key source from its own address (a limiter keyed
by the client's address, as nginx's $binary_remote_addr): --source, or
127.0.0.2-127.0.0.254 for a target on loopback. A 2xx or 3xx is an
admission; a refusal is 429, or the status a fresh key pressed back to
back meets once admitted (nginx's default 503, 403, 420: the probe says
which it learned), or what --deny-status says. Anything else (a 400, a
401, a 5xx, no answer) is counted apart, never as admitted; when that is
all the target answers, the probe stops and says what came back. A limit
on a POST or behind a token: --method, --header (repeatable) and --body
send what the target needs. Each request carries its number in a query
parameter, ratelab-probe. The probe
never retries a request, is bounded by --max-requests, --max-rate and
--max-time (a window too long for it is said, with what it would take;
a quota of hundreds, 600/min, is probed lean: one spent key watched
through its return, one spent in halves, and the checks with no room
left said as not run), and says what it does as it goes. It writes
probe.json (schema 4) into --out, every request and its answer
(exchange.csv), the same as the lab's results (results.json, which
ratelab report draws again), and the lab's report of it: report.html,
report.md and the charts.

Once a limit is named, the probe looks for a second, longer one (a
minute's beside a second's, nginx's two zones on one location): a fresh
key sent a steady run just under the first's rate for up to --look, or a
little past the longest window the target declares, within --max-time
and --max-requests; it names the second, or says how far it looked.

--limit says what the target is meant to keep: the fit starts there (and
still says when the target behaves otherwise), and the accuracy is
judged against it when no model is named. For CI, --expect names what
the target should do, as an algorithm and a limit in the lab's syntax or
a limit alone, a bucket with a queue as "5/s burst 1 queue 10" (1 at
once, 10 more held: nginx's burst=10 without nodelay), or as the
configuration file the target runs (nginx.conf, haproxy.cfg, a
Caddyfile, kong.yaml, any that ratelab plan --current reads): its every
key's rules, as the probe finds each product keep them. A limiter that
delays (nginx without nodelay or with delay=, a handler waiting on
rate.Limiter.Wait) is named as a bucket with a queue: its rate, what it
admits at once, what it holds and for how long, from when its
admissions were answered. The probe exits 1, naming what strayed, when none of the
six explains the target, it cannot tell two apart, the model named is of
another family (the three buckets are one), its rate or quota is off by
more than --tolerance (a queue's too, or one found where none was
expected), a workload had more admitted in a window than the
algorithm allows (N for the sliding log, 2N for the others; for a
bucket, more than C + R·t in any interval t), 2N at once admitted more
than the policy allows, a wait advertised lied, or a key's exhaustion
spilled on another.

Examples:

	ratelab probe --key header:X-API-Key http://127.0.0.1:8080/
	ratelab probe --key query:user --deny-status 403 https://staging.example/api
	ratelab probe --key header:X-User --method POST --body @login.json \
		--header "Content-Type: application/json" http://127.0.0.1:8080/login
	ratelab probe --key header:X-API-Key --expect "gcra 10/s burst 6" http://127.0.0.1:8080/
	ratelab probe --key source --max-time 10m http://127.0.0.1:8080/

Flags:
`

func runProbe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	var f probeFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), probeUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c, want, err := f.probeConfig(fs, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	r, err := probe.Run(ctx, c, func(s string) { fmt.Fprintf(stderr, "probe: %5.1fs %s\n", time.Since(began).Seconds(), s) })
	if r != nil && len(r.Fit) > 0 {
		if werr := printProbe(stdout, f.out, r); werr != nil {
			return werr
		}
	}
	if r != nil && len(r.Fit) == 0 && err == nil {
		// Nothing fitted at all: said, not an empty report.
		return fmt.Errorf("probe: %s", r.Verdict.Text)
	}
	if err == nil && want != nil {
		if strays := r.Strays(*want); len(strays) > 0 {
			return fmt.Errorf("probe: the target strays from %q:\n  %s", want.String(), strings.Join(strays, "\n  "))
		}
		fmt.Fprintf(stdout, "As expected: %s, within %g%%.\n", want, 100*want.Tolerance)
	}
	switch {
	case err != nil && r != nil && len(r.Fit) > 0 && errors.Is(err, context.Canceled):
		return fmt.Errorf("probe: stopped before its end; what it measured is above")
	case err != nil && r != nil && len(r.Fit) > 0:
		return probeError(err, " (what was measured before is above)")
	case err != nil:
		return probeError(err, "")
	}
	return nil
}

// queuedLimit is --limit: a limit in the lab's syntax, or a bucket with a
// queue ("5/s burst 1 queue 10": 1 at once, 10 more held), which decides
// as a bucket of the two together.
type queuedLimit struct {
	limiters.Limit
	queue int
	// also is a second, longer limit ("5/s, 40/min").
	also limiters.Limit
}

func (q *queuedLimit) Set(s string) (err error) {
	first, second, two := strings.Cut(s, ",")
	if q.Limit, q.queue, err = probe.ParseQueued(first); err != nil || !two {
		return err
	}
	if q.also, err = limiters.ParseLimit(strings.TrimSpace(second)); err != nil {
		return err
	}
	if q.also.Window() <= q.Limit.Window() {
		return fmt.Errorf("the second limit (%s) must be the longer, as in \"5/s, 40/min\"", q.also)
	}
	return nil
}

func (q *queuedLimit) String() string {
	s := q.Limit.String()
	if q.queue > 0 {
		b := q.Limit
		b.Burst -= q.queue
		s = fmt.Sprintf("%s queue %d", b, q.queue)
	}
	if q.also.N > 0 {
		s += ", " + q.also.String()
	}
	return s
}

// probeFlags are probe's flags.
type probeFlags struct {
	key, source, deny, expect, out string
	method, body                   string
	headers                        stringList
	limit                          queuedLimit
	c                              probe.Config
	tolerance                      float64
}

func (f *probeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "how the target tells users apart: header:NAME, query:NAME, or source (the client's address)")
	fs.StringVar(&f.source, "source", "", "with --key source, the addresses users send from (default on loopback: 127.0.0.2-127.0.0.254)")
	fs.Var(&f.limit, "limit", `what the target is meant to keep: "10/s burst 6", "5/s, 40/min", "5/s burst 1 queue 10"; none: measured`)
	fs.StringVar(&f.deny, "deny-status", "", "statuses that mean refused, comma-separated, a 5xx too (default: 429, or learned: nginx's 503)")
	fs.StringVar(&f.method, "method", "", "the method each request uses (default GET, or POST with --body)")
	fs.Var(&f.headers, "header", `a header each request carries, "Name: value" (repeatable), as in "Authorization: Bearer TOKEN"`)
	fs.StringVar(&f.body, "body", "", "the body each request carries: @FILE, or the text itself")
	fs.IntVar(&f.c.MaxRequests, "max-requests", 2000, "the most requests the probe may send")
	fs.DurationVar(&f.c.Timeout, "timeout", 5*time.Second, "how long a request may take")
	fs.StringVar(&f.expect, "expect", "", `what the target should do, for CI: "gcra 10/s burst 6", "10/s", or a product's configuration file (haproxy.cfg, nginx.conf, kong.yaml...: its every key's rules); exit 1 when it strays`)
	fs.Float64Var(&f.tolerance, "tolerance", 0.02, "how far from --expect the measured rate and quota may be, as a fraction")
	fs.IntVar(&f.c.MaxRate, "max-rate", 1000, "the most requests the probe may send in any one second")
	fs.DurationVar(&f.c.MaxTime, "max-time", 3*time.Minute, "the longest the probe may take; a window too long for it is said")
	fs.DurationVar(&f.c.Look, "look", time.Minute, "how long to look for a second, longer limit once one is named (longer where declared); 0: not")
	fs.Uint64Var(&f.c.Seed, "seed", 1, "the seed of the sustained run's jitter")
	fs.StringVar(&f.out, "out", "out/probe", "the folder probe.json goes to")
}

// probeConfig is the probe the flags and the argument of fs ask for,
// checked, and what the target is expected to do (nil: nothing). It says
// on stderr what it will do.
func (f *probeFlags) probeConfig(fs *flag.FlagSet, stderr io.Writer) (probe.Config, *probe.Expect, error) {
	c := f.c
	if fs.NArg() != 1 {
		return c, nil, badUsage(fs, fmt.Errorf("probe: want one URL, got %d arguments", fs.NArg()))
	}
	t, err := f.target(fs.Arg(0), stderr)
	if err != nil {
		return c, nil, badUsage(fs, err)
	}
	c.Target, c.Policy, c.PolicyAlso = t, f.limit.Limit, f.limit.also
	var want *probe.Expect
	if f.expect != "" {
		expect, err := f.expectation(stderr)
		if err != nil {
			return c, nil, badUsage(fs, err)
		}
		e, err := probe.ParseExpect(expect, f.tolerance)
		if err != nil {
			return c, nil, badUsage(fs, err)
		}
		want = &e
	}
	if err := c.Validate(); err != nil {
		return c, nil, usageError{err}
	}
	if f.limit.Limit.N == 0 {
		// Two lines: a URL of any length, and a terminal of 120 columns.
		fmt.Fprintf(stderr, "probe: no --limit: measuring %s's limit first,\n  then asking what tells the algorithms apart, within %d requests and %v (--max-requests, --max-time)\n", t.URL, c.MaxRequests, c.MaxTime)
	} else {
		fmt.Fprintf(stderr, "probe: %s, said to keep %s,\n  within %d requests and %v (--max-requests, --max-time)\n", t.URL, &f.limit, c.MaxRequests, c.MaxTime)
	}
	return c, want, nil
}

// expectation is --expect as the probe takes it: as written, or, where
// it names a file, the configuration of a product in it (haproxy.cfg,
// nginx.conf, kong.yaml...) read back, every key's rules as the probe
// finds them, said on stderr.
func (f *probeFlags) expectation(stderr io.Writer) (string, error) {
	st, err := os.Stat(f.expect)
	if err != nil || st.IsDir() {
		return f.expect, nil
	}
	text, err := os.ReadFile(f.expect)
	if err != nil {
		return "", fmt.Errorf("probe: --expect: %w", err)
	}
	prod := products.Of(text)
	if prod == nil {
		return "", fmt.Errorf("probe: --expect %s: not a configuration ratelab reads (nginx's, or one of %s)", f.expect, products.Names())
	}
	key := accesslog.KeySpec{}
	if name, ok := strings.CutPrefix(f.key, "header:"); ok {
		key, _ = accesslog.ParseKey("header:" + name)
	}
	read, err := prod.Read(text, filepath.Base(f.expect), key)
	if err != nil {
		return "", fmt.Errorf("probe: --expect: %w", err)
	}
	e, err := read.Expect()
	if err != nil {
		return "", fmt.Errorf("probe: --expect: %s: %w", prod.Title(), err)
	}
	fmt.Fprintf(stderr, "probe: --expect %s (%s): %s\n", f.expect, read.Name, e)
	return e, nil
}

// target is the target at url as --key, --source and --deny-status say;
// for --key source without --source, the addresses chosen, said on stderr.
func (f *probeFlags) target(url string, stderr io.Writer) (probe.Target, error) {
	k, err := probe.ParseKey(f.key)
	if err != nil {
		return probe.Target{}, err
	}
	t := probe.Target{URL: url, Key: k}
	if f.source != "" || k.Kind == "source" {
		src, chose, err := probe.ParseSources(f.source, t.URL)
		if err != nil {
			return t, err
		}
		t.Sources = src
		if chose != "" {
			fmt.Fprintf(stderr, "probe: --key source: the users send from %s\n", chose)
		}
	}
	if f.deny != "" {
		for _, s := range strings.Split(f.deny, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return t, fmt.Errorf("probe: --deny-status: %q is not a status", s)
			}
			t.Deny = append(t.Deny, n)
		}
		if !slices.Contains(t.Deny, http.StatusTooManyRequests) {
			t.Deny = append(t.Deny, http.StatusTooManyRequests)
		}
	}
	t.Method = strings.ToUpper(f.method)
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		if name = strings.TrimSpace(name); !ok || name == "" || strings.ContainsAny(name, " \t") {
			return t, fmt.Errorf("probe: --header %q: want \"Name: value\"", h)
		}
		if t.Header == nil {
			t.Header = http.Header{}
		}
		t.Header.Add(name, strings.TrimSpace(value))
	}
	switch {
	case strings.HasPrefix(f.body, "@"):
		b, err := os.ReadFile(f.body[1:])
		if err != nil {
			return t, fmt.Errorf("probe: --body: %w", err)
		}
		t.Body = b
	case f.body != "":
		t.Body = []byte(f.body)
	}
	if t.Body != nil && t.Method == "" {
		t.Method = http.MethodPost
	}
	return t, nil
}

// printProbe prints the tables of r and saves it in dir: probe.json, the
// exchange, the lab's results file (which ratelab report draws again, as
// the lab's) and the report.
func printProbe(stdout io.Writer, dir string, r *probe.Report) error {
	for _, tb := range r.Tables() {
		if err := tb.Text(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	if err := writeProbe(dir, r); err != nil {
		return err
	}
	f, saved := r.File(), filepath.Join(dir, "results.json")
	if err := results.WriteFile(saved, f); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if _, err := plots.WriteReport(dir, f, probe.Modes(), saved); err != nil {
		return fmt.Errorf("probe: the report: %w", err)
	}
	fmt.Fprintln(stdout, results.Wrap(fmt.Sprintf("Results: %s (as the lab's: %s); the report: %s", filepath.Join(dir, "probe.json"), saved, filepath.Join(dir, "report.html")), 100))
	return nil
}

// probeError is err as the command says it: after "probe: ", once.
func probeError(err error, more string) error {
	if strings.HasPrefix(err.Error(), "probe: ") {
		return fmt.Errorf("%w%s", err, more)
	}
	return fmt.Errorf("probe: %w%s", err, more)
}

func writeProbe(dir string, r *probe.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "exchange.csv"))
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := r.WriteExchange(f); err != nil {
		f.Close()
		return fmt.Errorf("probe: %w", err)
	}
	return f.Close()
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, "; ") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
