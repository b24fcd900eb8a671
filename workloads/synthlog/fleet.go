package synthlog

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// A Fleet writes a world's traffic as a fleet logs it: each request to
// one of Nodes nodes of a load balancer (or hosts behind one), at random
// as many connections spread them, each node writing its own files.
type Fleet struct {
	// Nodes is how many (0: 2).
	Nodes int
	// Format is alb (AWS Application Load Balancer's lines, a gzipped
	// file a node every Every, named as ALB names them) or combined
	// (nginx's, a host's access.log, rotated every Every if set).
	Format string
	// Every is how much of the log a file holds (0: ALB's 5 minutes;
	// for combined, one file a host).
	Every time.Duration
	// Gzip compresses the files (ALB's always are).
	Gzip bool
}

// FleetLog is what a fleet wrote: its files in name order (as a shell's
// glob gives them), the lines, and the truth, each key's Key the client's
// address that the log is keyed by.
type FleetLog struct {
	Files []string
	Lines int
	Keys  []KeyTruth
}

// fleetLine is one request of a fleet's log: when, on which node, its
// line.
type fleetLine struct {
	at   time.Duration
	node int
	text []byte
}

func (f Fleet) check() (Fleet, error) {
	f.Nodes = cmp.Or(f.Nodes, 2)
	switch f.Format {
	case "alb":
		f.Every, f.Gzip = cmp.Or(f.Every, 5*time.Minute), true
	case "combined":
	default:
		return f, fmt.Errorf("synthlog: fleet format %q: want alb or combined", f.Format)
	}
	if f.Nodes < 1 || f.Nodes > 250 {
		return f, fmt.Errorf("synthlog: %d nodes: want 1 to 250", f.Nodes)
	}
	return f, nil
}

// address is the client address of a world's key i, as a fleet's log
// keys it.
func clientAddress(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, 1+i%250) }

// lines draws the world's requests as f's lines: each one's node, port,
// path and agent drawn in order, so that Write and WriteSorted write the
// same requests.
func (f Fleet) lines(w World) ([]fleetLine, []KeyTruth) {
	reqs, keys := w.Generate()
	for i := range keys {
		keys[i].Key = clientAddress(i)
	}
	start := cmp.Or(w.Start, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	rng := rand.New(rand.NewPCG(cmp.Or(w.Seed, 1), 31))
	out := make([]fleetLine, len(reqs))
	for i, r := range reqs {
		node := rng.IntN(f.Nodes)
		agent, path := keys[r.Key].agentAndPath(r, rng)
		t := start.Add(r.At)
		var b []byte
		ip := keys[r.Key].Key
		if f.Format == "alb" {
			b = append(b, "https "...)
			b = t.AppendFormat(b, "2006-01-02T15:04:05.000000Z")
			b = append(b, " app/api/50dc6c495c0c9188 "...)
			b = append(b, ip...)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(30000+rng.IntN(30000)), 10)
			b = fmt.Appendf(b, " 10.0.1.%d:8080 0.000 0.00%d 0.000 200 200 %d 512 \"GET https://api.example.com:443%s HTTP/1.1\" %q",
				20+node, 1+rng.IntN(9), 120+rng.IntN(200), path, agent)
			b = append(b, ` ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/api/73e2d6bc24d8a067 "Root=1-`...)
			b = fmt.Appendf(b, "%08x-%024x\" \"api.example.com\" \"arn:aws:acm:us-east-1:123456789012:certificate/12345678\" 0 ", t.Unix(), rng.Uint64())
			b = t.AppendFormat(b, "2006-01-02T15:04:05.000000Z")
			b = fmt.Appendf(b, " \"forward\" \"-\" \"-\" \"10.0.2.%d:8080\" \"200\" \"-\" \"-\"", 10+rng.IntN(20))
		} else {
			b = fmt.Appendf(b, "%s - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" %q", ip, t.Format("02/Jan/2006:15:04:05 -0700"), path, agent)
		}
		out[i] = fleetLine{at: r.At, node: node, text: append(b, '\n')}
	}
	return out, keys
}

// file is the name of node's file that holds the requests from slot
// (relative to dir).
func (f Fleet) file(node int, slot time.Time) string {
	if f.Format == "alb" {
		// AWS names a file by the end of its interval, then the node's
		// address, then a random string.
		end := slot.Add(f.Every)
		return fmt.Sprintf("123456789012_elasticloadbalancing_us-east-1_app.api.50dc6c495c0c9188_%s_10.0.1.%d_%08x.log.gz",
			end.Format("20060102T1504Z"), 20+node, uint32(end.Unix()*31+int64(node)))
	}
	name := filepath.Join(fmt.Sprintf("web%d", node+1), "access.log")
	if f.Every > 0 {
		name += "-" + slot.Format("2006010215")
	}
	if f.Gzip {
		name += ".gz"
	}
	return name
}

// Write writes the world's traffic into dir as the fleet's files.
func (f Fleet) Write(dir string, w World) (FleetLog, error) {
	f, err := f.check()
	if err != nil {
		return FleetLog{}, err
	}
	lines, keys := f.lines(w)
	start := cmp.Or(w.Start, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	byFile := map[string][]fleetLine{}
	for _, l := range lines {
		slot := start
		if f.Every > 0 {
			slot = start.Add(l.at).Truncate(f.Every)
		}
		name := f.file(l.node, slot)
		byFile[name] = append(byFile[name], l)
	}
	out := FleetLog{Lines: len(lines), Keys: keys}
	for name, ls := range byFile {
		if err := writeFile(filepath.Join(dir, name), ls, f.Gzip); err != nil {
			return out, err
		}
		out.Files = append(out.Files, filepath.Join(dir, name))
	}
	slices.Sort(out.Files)
	return out, nil
}

func writeFile(path string, lines []fleetLine, gz bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	var w io.Writer = file
	var z *gzip.Writer
	if gz {
		z = gzip.NewWriter(file)
		w = z
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	for _, l := range lines {
		bw.Write(l.text)
	}
	err = bw.Flush()
	if z != nil {
		err = errors.Join(err, z.Close())
	}
	return errors.Join(err, file.Close())
}

// WriteSorted writes the same requests as Write to out, as one log in
// time order (plain): what the fleet's files hold, merged.
func (f Fleet) WriteSorted(out io.Writer, w World) (FleetLog, error) {
	f, err := f.check()
	if err != nil {
		return FleetLog{}, err
	}
	lines, keys := f.lines(w)
	bw := bufio.NewWriterSize(out, 1<<16)
	for _, l := range lines {
		bw.Write(l.text)
	}
	return FleetLog{Lines: len(lines), Keys: keys}, bw.Flush()
}

// ALBDay is a day of an API behind an AWS load balancer, keyed by the
// client's address: app users who open with a fan-out of 8 to 16 in a
// session or a few (Scale × 1,500 of them), 12 partners whose
// integration pulls 150 orders at 8 a second once an hour, six uptime
// monitors polling /status every 30 seconds, and four abusers: two
// scrapers at 2 and 4 a second for hours, an enumerator at 9 a second
// for 20 minutes, an app stuck retrying at 30 a second for 3 minutes.
func ALBDay(seed uint64, scale float64) World {
	users := max(int(1500*scale), 20)
	return World{Span: 24 * time.Hour, Seed: seed, Classes: []Class{
		{Name: "app users", Keys: users, Shape: FanOut{Fan: Range[int]{8, 16}, Sessions: Range[int]{1, 4},
			Every: Range[time.Duration]{3 * time.Second, 20 * time.Second}, Stay: Range[time.Duration]{time.Minute, 8 * time.Minute}}},
		{Name: "partners", Keys: 12, Shape: Batch{Period: time.Hour, Jitter: time.Minute, Size: Range[int]{150, 150}, Pace: Range[float64]{8, 8}}},
		{Name: "monitors", Role: Poller, Keys: 6, Shape: Poll{Every: Range[time.Duration]{30 * time.Second, 30 * time.Second}, Jitter: 300 * time.Millisecond},
			Path: "/status", Agent: "UptimeRobot/2.0 (+http://www.uptimerobot.com/)"},
		{Name: "scraper", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{2, 2}, For: Range[time.Duration]{5 * time.Hour, 5 * time.Hour}}},
		{Name: "scraper", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{4, 4}, For: Range[time.Duration]{2 * time.Hour, 2 * time.Hour}}},
		{Name: "enumerator", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{9, 9}, For: Range[time.Duration]{20 * time.Minute, 20 * time.Minute}}},
		{Name: "stuck app", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{30, 30}, For: Range[time.Duration]{3 * time.Minute, 3 * time.Minute}}},
	}}
}

// Monitored is two hours of a site watched by its own uptime monitors:
// Scale × 800 app users who open with a fan-out, five monitors polling
// /healthz once a second all along (each its own service's agent), and
// three scrapers at 3 to 6 a second for an hour or more. Below the
// monitors' rate a bucket refuses them with the scrapers; above it, the
// scrapers alone stand apart.
func Monitored(seed uint64, scale float64) World {
	users := max(int(800*scale), 20)
	w := World{Span: 2 * time.Hour, Seed: seed, Classes: []Class{
		{Name: "app users", Keys: users, Shape: FanOut{Fan: Range[int]{6, 12}, Sessions: Range[int]{1, 3},
			Every: Range[time.Duration]{2 * time.Second, 15 * time.Second}, Stay: Range[time.Duration]{time.Minute, 10 * time.Minute}}},
	}}
	for i, agent := range []string{"UptimeRobot/2.0", "Pingdom.com_bot_version_1.4", "Datadog/Synthetics", "StatusCake", "Better Uptime Bot"} {
		w.Classes = append(w.Classes, Class{Name: "monitors", Role: Poller, Keys: 1, Path: "/healthz", Agent: fmt.Sprintf("%s (check %d)", agent, i+1),
			Shape: Poll{Every: Range[time.Duration]{time.Second, time.Second}, Jitter: 200 * time.Millisecond}})
	}
	for _, rate := range []float64{3, 4.5, 6} {
		w.Classes = append(w.Classes, Class{Name: "scraper", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{rate, rate},
			For: Range[time.Duration]{time.Hour, 100 * time.Minute}}})
	}
	return w
}
