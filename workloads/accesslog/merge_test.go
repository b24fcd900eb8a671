package accesslog

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// A request of a fleet's test: when, from which client, sent to which
// node.
type fleetRequest struct {
	at     time.Time
	client int
	node   int
}

// fleetFile is one file a fleet wrote: its name and lines.
type fleetFile struct {
	name  string
	lines []string
}

// fleetCase is a way a fleet writes its logs: into files by node and
// slot, named so that a shell's glob gives them in name order.
type fleetCase struct {
	name   string
	nodes  int
	format string
	// slot is how much of the log a file holds (0: one file a node);
	// overlap how far a file's requests reach into the next slot's (a
	// log shipper's batches).
	slot, overlap time.Duration
	gzip          bool
	// jitter is how far out of order a file's lines are, within it.
	jitter time.Duration
	line   func(r fleetRequest) string
	file   func(node int, slot time.Time) string
	// sources are the sources the files are said in, and how many of
	// their files were read at once at most.
	sources []string
	atOnce  int
}

var fleetStart = time.Date(2026, 12, 5, 23, 55, 0, 0, time.UTC)

// fleetRequests draws n requests over span from clients, each sent to a
// node at random, in time order.
func fleetRequests(rng *rand.Rand, n, clients, nodes int, span time.Duration) []fleetRequest {
	out := make([]fleetRequest, n)
	for i := range out {
		out[i] = fleetRequest{at: fleetStart.Add(time.Duration(rng.Int64N(int64(span)))).Truncate(time.Millisecond), client: rng.IntN(clients), node: rng.IntN(nodes)}
	}
	slices.SortStableFunc(out, func(a, b fleetRequest) int { return a.at.Compare(b.at) })
	return out
}

// write cuts reqs into the case's files, each in its own time order but
// for jitter, the files in name order.
func (fc fleetCase) write(rng *rand.Rand, reqs []fleetRequest) []fleetFile {
	byName := map[string]*fleetFile{}
	type dated struct {
		at   time.Time
		line string
	}
	timed := map[string][]dated{}
	for _, r := range reqs {
		slot := fleetStart
		if fc.slot > 0 {
			slot = r.at.Truncate(fc.slot)
			// A batch reaches into the next: the first seconds of a slot
			// are in the file before, at random.
			if fc.overlap > 0 && r.at.Sub(slot) < fc.overlap && rng.IntN(2) == 0 {
				slot = slot.Add(-fc.slot)
			}
		}
		name := fc.file(r.node, slot)
		if byName[name] == nil {
			byName[name] = &fleetFile{name: name}
		}
		jit := time.Duration(0)
		if fc.jitter > 0 {
			jit = time.Duration(rng.Int64N(int64(fc.jitter)))
		}
		timed[name] = append(timed[name], dated{r.at.Add(jit), fc.line(r)})
	}
	var files []fleetFile
	for name, f := range byName {
		ds := timed[name]
		slices.SortStableFunc(ds, func(a, b dated) int { return a.at.Compare(b.at) })
		for _, d := range ds {
			f.lines = append(f.lines, d.line)
		}
		files = append(files, *f)
	}
	slices.SortFunc(files, func(a, b fleetFile) int { return cmp.Compare(a.name, b.name) })
	return files
}

func albLine(r fleetRequest) string {
	return fmt.Sprintf(`https %s app/api/50dc6c495c0c9188 198.18.%d.%d:%d 10.0.1.%d:8080 0.000 0.002 0.000 200 200 34 366 "GET https://api.example.com:443/v1/orders/%d HTTP/1.1" "client/%d" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2`,
		r.at.Format("2006-01-02T15:04:05.000000Z"), r.client/250, 1+r.client%250, 40000+r.client, 10+r.node, r.client%7, r.client%3)
}

func combinedLine(r fleetRequest) string {
	return fmt.Sprintf(`198.18.%d.%d - - [%s] "GET /v1/orders/%d HTTP/1.1" 200 366 "-" "client/%d"`,
		r.client/250, 1+r.client%250, r.at.Format("02/Jan/2006:15:04:05 -0700"), r.client%7, r.client%3)
}

func cloudflareLine(r fleetRequest) string {
	return fmt.Sprintf(`{"ClientIP":"198.18.%d.%d","ClientRequestURI":"/v1/orders/%d","EdgeResponseStatus":200,"EdgeStartTimestamp":%d}`,
		r.client/250, 1+r.client%250, r.client%7, r.at.UnixNano())
}

var fleetCases = []fleetCase{
	{name: "two ALB nodes, a gzip file a node every 5 minutes", nodes: 2, format: "alb", slot: 5 * time.Minute, gzip: true, jitter: 500 * time.Millisecond, line: albLine,
		file: func(node int, slot time.Time) string {
			// AWS names a file by its interval's end, then the node.
			return fmt.Sprintf("123456789012_elasticloadbalancing_us-east-1_app.api.50dc6c495c0c9188_%s_10.0.1.%d_%x.log.gz",
				slot.Add(5*time.Minute).Format("20060102T1504Z"), 10+node, slot.Unix()^int64(node))
		}, sources: []string{"10.0.1.10", "10.0.1.11"}, atOnce: 1},
	{name: "three ALB nodes", nodes: 3, format: "alb", slot: 5 * time.Minute, line: albLine,
		file: func(node int, slot time.Time) string {
			return fmt.Sprintf("elb_%s_10.0.1.%d.log", slot.Add(5*time.Minute).Format("20060102T1504Z"), 10+node)
		}, sources: []string{"10.0.1.10", "10.0.1.11", "10.0.1.12"}, atOnce: 1},
	{name: "a fleet of three nginx hosts, one log each", nodes: 3, format: Combined, line: combinedLine,
		file:    func(node int, _ time.Time) string { return fmt.Sprintf("web%d/access.log", node+1) },
		sources: []string{"web1/access.log", "web2/access.log", "web3/access.log"}, atOnce: 1},
	{name: "two nginx hosts, rotated hourly", nodes: 2, format: Combined, slot: time.Hour, line: combinedLine,
		file: func(node int, slot time.Time) string {
			return fmt.Sprintf("web%d/access.log-%s", node+1, slot.Format("2006010215"))
		}, sources: []string{"web1", "web2"}, atOnce: 1},
	{name: "a log shipper's batches, overlapping by seconds", nodes: 1, format: "cloudflare", slot: time.Minute, overlap: 5 * time.Second, gzip: true, line: cloudflareLine,
		file: func(_ int, slot time.Time) string {
			return fmt.Sprintf("20261205/%s_%s_abc.log.gz", slot.Format("20060102T150405Z"), slot.Add(time.Minute).Format("20060102T150405Z"))
		}, sources: []string{"21 files"}, atOnce: 1},
}

// readAllOf reads inputs to their end: the entries, the reader.
func readAllOf(t *testing.T, inputs []Input, o Options) ([]Entry, *Reader) {
	t.Helper()
	r, err := NewReader(inputs, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for {
		e, err := r.Read()
		if err == io.EOF {
			return out, r
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// The logs of a fleet, given in name order as a shell's glob gives them,
// are read as the one log of the same requests sorted: every request
// once, in time order, whatever the nodes, the files, their overlap, or
// the format; at most as many files open at once as overlap in time.
func TestFleetMergedByTime(t *testing.T) {
	for _, fc := range fleetCases {
		t.Run(fc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(fc.name))))
			span := 3 * time.Hour
			if fc.slot == time.Minute {
				span = 20 * time.Minute
			}
			reqs := fleetRequests(rng, 6000, 300, fc.nodes, span)
			files := fc.write(rng, reqs)
			open, most := 0, 0
			var inputs []Input
			for _, f := range files {
				data := []byte(strings.Join(f.lines, "\n") + "\n")
				if fc.gzip {
					var z bytes.Buffer
					w := gzip.NewWriter(&z)
					w.Write(data)
					w.Close()
					data = z.Bytes()
				}
				inputs = append(inputs, Input{Name: f.name, Open: func() (io.ReadCloser, error) {
					open++
					most = max(most, open)
					return closer{bytes.NewReader(data), &open}, nil
				}})
			}
			o := Options{Format: fc.format, Reorder: time.Second}
			got, r := readAllOf(t, inputs, o)
			var one []string
			for _, rq := range reqs {
				one = append(one, fc.line(rq))
			}
			want, _ := readAllOf(t, []Input{{Name: "sorted.log", R: strings.NewReader(strings.Join(one, "\n") + "\n")}}, o)
			if n, s := r.Skipped(); n != 0 || len(got) != len(reqs) || r.Lines() != len(reqs) || r.Requests() != len(reqs) {
				t.Fatalf("%d files: %d requests of %d lines read, %d skipped %v; want all %d", len(files), len(got), r.Lines(), n, s, len(reqs))
			}
			if !slices.IsSortedFunc(got, func(a, b Entry) int { return cmp.Compare(a.At, b.At) }) {
				t.Error("the requests are not in time order")
			}
			// The same requests: at each instant, the same keys and paths.
			key := func(e Entry) string { return fmt.Sprintf("%d %s %d", e.At, e.Key, e.Path) }
			g, w := make([]string, len(got)), make([]string, len(want))
			for i := range got {
				g[i] = key(got[i])
			}
			for i := range want {
				w[i] = key(want[i])
			}
			if slices.Sort(g); !slices.Equal(g, slices.Sorted(slices.Values(w))) {
				t.Error("the files merged hold other requests than the sorted log")
			}
			if open != 0 {
				t.Errorf("%d files left open after the last request", open)
			}
			// Each input is opened once to peek at it, and closed, then
			// once to read: no more than the nodes' files, and a peek's,
			// at once (a batch shipper's overlap: two of one node).
			if limit := fc.nodes + 2; len(files) > 1 && most > limit {
				t.Errorf("%d files open at once of %d; want at most %d", most, len(files), limit)
			}
			var names []string
			sum := Source{}
			for _, src := range r.Sources() {
				names = append(names, src.Name)
				if src.AtOnce != fc.atOnce {
					t.Errorf("source %s: %d of its files at once; want %d", src.Name, src.AtOnce, fc.atOnce)
				}
				sum.Files, sum.Lines, sum.Requests = sum.Files+src.Files, sum.Lines+src.Lines, sum.Requests+src.Requests
			}
			if !slices.Equal(names, fc.sources) || sum.Files != len(files) || sum.Lines != len(reqs) || sum.Requests != len(reqs) {
				t.Errorf("sources %q of %d files, %d lines, %d requests; want %q, all %d files and %d requests", names, sum.Files, sum.Lines, sum.Requests, fc.sources, len(files), len(reqs))
			}
			t.Logf("%d files, %d requests, at most %d open at once; sources %q", len(files), len(got), most, names)
		})
	}
}

// closer counts a file closed.
type closer struct {
	io.Reader
	open *int
}

func (c closer) Close() error {
	*c.open--
	return nil
}

// A file out of order within itself by more than --reorder still says
// where, and that --reorder would take the line; a line earlier than its
// own file's first by more than --reorder, after another file's later
// ones, is skipped too, said so: the merge never goes back in time.
func TestMergeOutOfOrder(t *testing.T) {
	line := func(sec int, who string) string {
		return fmt.Sprintf(`%s - - [28/Nov/2026:10:00:%02d +0000] "GET / HTTP/1.1" 200 1 "-" "-"`+"\n", who, sec)
	}
	a := line(1, "a") + line(5, "b") + line(9, "c")
	b := line(6, "d") + line(7, "f") + line(2, "e")
	inputs := []Input{{Name: "a.log", R: strings.NewReader(a)}, {Name: "b.log", R: strings.NewReader(b)}}
	got, r := readAllOf(t, inputs, Options{Reorder: time.Second})
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, "") != "abdfc" {
		t.Errorf("order %q; want abdfc", strings.Join(keys, ""))
	}
	if n, s := r.Skipped(); n != 1 || !strings.HasPrefix(s[0].String(), "b.log:3: 4s earlier than a line already taken: out of order by more than --reorder 1s") {
		t.Errorf("skipped %d %v; want b.log's line 3, 4s early, and --reorder", n, s)
	}
	// c's second line is 5 s before its first: within --reorder 10s, it
	// is taken in its place; within 1 s, the merge has taken a's
	// 10:00:05 by the time c's first line is due, and skips it.
	c := line(8, "g") + line(3, "h")
	inputs = []Input{{Name: "a.log", R: strings.NewReader(a)}, {Name: "c.log", R: strings.NewReader(c)}}
	got, r = readAllOf(t, inputs, Options{Reorder: 10 * time.Second})
	if n, s := r.Skipped(); len(got) != 5 || n != 0 || !slices.IsSortedFunc(got, func(x, y Entry) int { return cmp.Compare(x.At, y.At) }) {
		t.Errorf("--reorder 10s: %d requests, skipped %d %v; want all 5 in order, none skipped", len(got), n, s)
	}
	inputs = []Input{{Name: "a.log", R: strings.NewReader(a)}, {Name: "c.log", R: strings.NewReader(c)}}
	got, r = readAllOf(t, inputs, Options{Reorder: time.Second})
	if n, s := r.Skipped(); len(got) != 4 || n != 1 || !strings.HasPrefix(s[0].String(), "c.log:2: 2s earlier than a line of another input already taken: out of order by more than --reorder 1s") {
		t.Errorf("--reorder 1s: %d requests, skipped %d %v; want c.log:2 skipped, 2s early", len(got), n, s)
	}
}
