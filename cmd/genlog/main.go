// Command genlog writes a synthetic access log for ratelab plan: a shop's
// two hours in nginx's combined format (or JSON lines), its normal users
// in sessions of page views, a sale's peak in the middle, a few abusers
// sending steadily far faster than anyone, and a few offices whose many
// users share one address; the server refused (429) what passed 30 a
// second. The same flags write the same log.
//
//	go run ./cmd/genlog -lines 10000000 > access.log
//	go run ./cmd/genlog -lines 1000000 | ratelab plan --limits 1/s..100/s
//
// -log alb writes a day of an API behind an AWS load balancer as its
// two nodes write it, a gzipped file a node every 5 minutes (576 files)
// into -out DIR; -log monitored two hours of a site its own uptime
// monitors poll once a second, in the combined format:
//
//	go run ./cmd/genlog -log alb -out logs && ratelab plan --format alb logs/*.log.gz
//
// It says who is who (the abusers' and offices' addresses) on standard
// error. -log mobile writes instead half an hour of a mobile API's JSON
// log in Caddy's format (app users who open with a fan-out, a crawler,
// two scrapers, a stuck app, carrier-NAT addresses), where one number a
// period fails:
//
//	go run ./cmd/genlog -log mobile | ratelab plan --format json --key .request.remote_ip \
//		--agent .request.headers.User-Agent --path .request.uri --limits 10/s..100/s
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/synthlog"
)

func main() {
	var s synthlog.Shop
	var m synthlog.Mobile
	kind := flag.String("log", "shop", "which log: shop (nginx's combined format, or JSON lines), mobile (Caddy's JSON), b2b (Traefik's JSON, keyed by API key), alb (a day of two nodes' files, into -out), monitored (combined, a site's monitors polling)")
	dir := flag.String("out", "", "with -log alb: the folder the files are written to")
	nodes := flag.Int("nodes", 2, "with -log alb: how many nodes")
	size := flag.Float64("size", 1, "with -log alb and monitored: the app users, times this (1: 1,500 and 800)")
	flag.IntVar(&m.Users, "users", 2600, "with -log mobile: how many app users")
	flag.IntVar(&m.PerNAT, "per-nat", 100, "with -log mobile: how many app users share each of the four carrier-NAT addresses")
	flag.Float64Var(&m.Scale, "scale", 1, "with -log mobile: every time divided by it (10: the log in a tenth of the time, each client ten times as fast)")
	flag.IntVar(&s.Lines, "lines", 1_000_000, "about how many lines to write (a million: about 200 MB; make plan's log is ten million); the abusers send some 4% of any, the offices a fixed volume")
	flag.StringVar(&s.Format, "format", "combined", "combined or json")
	flag.BoolVar(&s.Millis, "millis", false, "JSON times to the millisecond (the combined format's are whole seconds)")
	flag.Uint64Var(&s.Seed, "seed", 1, "the seed the log is made from")
	flag.DurationVar(&s.Span, "span", 2*time.Hour, "how long the log runs")
	flag.IntVar(&s.Abusers, "abusers", 8, "how many abusers")
	flag.IntVar(&s.Offices, "offices", 3, "how many offices behind one address each")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "genlog: unexpected arguments %q; it writes to standard output\n", flag.Args())
		os.Exit(2)
	}
	switch *kind {
	case "shop":
	case "mobile":
		m.Seed, m.Span = s.Seed, 30*time.Minute
		if span := flag.Lookup("span"); span.Value.String() != span.DefValue {
			m.Span = s.Span
		}
		t, err := synthlog.WriteMobile(os.Stdout, m)
		if err != nil {
			fmt.Fprintln(os.Stderr, "genlog:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "genlog: %d lines: %d app users, sustained %s, shared %s\n", t.Lines, len(t.Users), strings.Join(t.Sustained, " "), strings.Join(t.Shared, " "))
		return
	case "b2b":
		w := synthlog.B2B(s.Seed)
		if span := flag.Lookup("span"); span.Value.String() != span.DefValue {
			w.Span = s.Span
		}
		_, keys, lines, err := w.WriteTraefik(os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "genlog:", err)
			os.Exit(1)
		}
		var abusers []string
		classes := map[string]int{}
		for _, k := range keys {
			classes[k.Class]++
			if k.Role == synthlog.Abuser {
				abusers = append(abusers, k.Key+" ("+k.Class+")")
			}
		}
		fmt.Fprintf(os.Stderr, "genlog: %d lines of %d keys: %d dashboards, %d integrations, %d relays, %d partner keys; abusers:\n  %s\n",
			lines, len(keys), classes["dashboards"], classes["integrations"], classes["relays"], classes["partners"], strings.Join(abusers, "\n  "))
		return
	case "alb", "monitored":
		if err := writeWorld(*kind, *dir, *nodes, *size, s.Seed); err != nil {
			fmt.Fprintln(os.Stderr, "genlog:", err)
			os.Exit(1)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "genlog: -log %q: want shop, mobile, b2b, alb or monitored\n", *kind)
		os.Exit(2)
	}
	t, err := synthlog.WriteShop(os.Stdout, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
	// A line each, the addresses wrapped: a terminal of 120 columns.
	abusers := fmt.Sprintf("  %d of %d abusers (", t.AbuseLines, len(t.Abusers))
	offices := fmt.Sprintf("  %d of %d offices (", t.OfficeLines, len(t.Offices))
	fmt.Fprintf(os.Stderr, "genlog: %d lines: %d of %d normal users,\n%s%s),\n%s%s)\n",
		t.Lines, t.NormalLines, len(t.Normal), abusers, addresses(t.Abusers, len(abusers)), offices, addresses(t.Offices, len(offices)))
}

// addresses lists addrs, a space between two, from column col, a line
// break and an indent before one that would pass 100 columns.
func addresses(addrs []string, col int) string {
	var b strings.Builder
	for i, a := range addrs {
		if i > 0 {
			if col+1+len(a) > 100 {
				b.WriteString("\n    ")
				col = 4
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(a)
		col += len(a)
	}
	return b.String()
}

// writeWorld writes the ALB day's files into dir, or the monitored site's
// log to standard output, and says who is who.
func writeWorld(kind, dir string, nodes int, scale float64, seed uint64) error {
	var log synthlog.FleetLog
	var err error
	switch kind {
	case "alb":
		if dir == "" {
			return errors.New("-log alb writes a folder of files: give -out DIR")
		}
		log, err = synthlog.Fleet{Nodes: nodes, Format: "alb"}.Write(dir, synthlog.ALBDay(seed, scale))
	default:
		log, err = synthlog.Fleet{Nodes: 1, Format: "combined"}.WriteSorted(os.Stdout, synthlog.Monitored(seed, scale))
	}
	if err != nil {
		return err
	}
	classes := map[string][]string{}
	var names []string
	for _, k := range log.Keys {
		if classes[k.Class] == nil {
			names = append(names, k.Class)
		}
		classes[k.Class] = append(classes[k.Class], k.Key)
	}
	where := ""
	if dir != "" {
		where = fmt.Sprintf(" in %d files in %s", len(log.Files), dir)
	}
	fmt.Fprintf(os.Stderr, "genlog: %d lines%s of %d keys:\n", log.Lines, where, len(log.Keys))
	for _, n := range names {
		if ks := classes[n]; len(ks) > 12 {
			fmt.Fprintf(os.Stderr, "  %d %s\n", len(ks), n)
		} else {
			line := fmt.Sprintf("  %d %s: ", len(ks), n)
			fmt.Fprintf(os.Stderr, "%s%s\n", line, addresses(ks, len(line)))
		}
	}
	return nil
}
