// Package synthlog writes synthetic access logs, and says who is who in
// them: the workloads ratelab plan is tested and demonstrated with, in the
// formats the access-log reader (workloads/accesslog) reads.
package synthlog

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Shop says what log WriteShop writes: a shop's two hours, its normal
// users coming in sessions of page views (each page a few requests at
// once), a sale's peak in the middle where more of them come and click
// faster, a few abusers sending steadily far faster than anyone, and a
// few offices whose many users share one address. The server refused
// (429) what passed a limit of 30 a second, as a server with a hand-picked
// limit would have.
type Shop struct {
	// Lines is about how many lines to write; the users are as many as
	// make it, unless Users says how many.
	Lines, Users int
	// Abusers and Offices are how many of each (0: 8 and 3).
	Abusers, Offices int
	// Format is "combined" (the default) or "json".
	Format string
	// Millis writes a JSON line's time to the millisecond, as the
	// requests came within their second; the combined format's, and
	// JSON's by default, are whole seconds.
	Millis bool
	// Seed makes the log (0: 1).
	Seed uint64
	// Start is the log's first second (the zero value: 2026-11-27 08:00
	// UTC); Span how long it runs (0: two hours). The sale is its middle
	// sixth; each abuser sends for a tenth to a third of it in a log of
	// ten million lines or more, and for as much less in a smaller one
	// (a minute at least), so that the abusers send some 4% of any log.
	Start time.Time
	Span  time.Duration
}

// Truth is who is who in a synthesized log, by address.
type Truth struct {
	Normal, Abusers, Offices []string
	// NormalPeak is the most a normal user sends in one second.
	NormalPeak int
	// Lines are the lines written; NormalLines, AbuseLines and
	// OfficeLines each kind's.
	Lines, NormalLines, AbuseLines, OfficeLines int
}

// The shape of the synthesized shop.
const (
	pagePeak       = 5     // a page view's requests at most, normally
	salePagePeak   = 8     // and in the sale
	todaysLimit    = 30    // the server's own limit a second, beyond which it answered 429
	fullLog        = 1e7   // the lines of a log whose abusers send for all their time
	usersPerSecond = 0.058 // a user's requests a second, over the log, about
)

var (
	browsers = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
	}
	pages  = []string{"/", "/products", "/products/%d", "/cart", "/search?q=%d", "/api/v1/recommendations/%d"}
	assets = []string{"/static/app.js", "/static/app.css", "/api/v1/cart", "/api/v1/session", "/img/%d.webp", "/api/v1/stock/%d", "/api/v1/prices/%d"}
)

// visitor is a normal user or an office's: when their next page view is.
type visitor struct {
	next   time.Duration
	ip     string
	agent  string
	rng    *rand.Rand
	active time.Duration // the end of the session they are in; 0 between sessions
	office bool
}

type visitors []*visitor

func (h visitors) Len() int           { return len(h) }
func (h visitors) Less(i, j int) bool { return h[i].next < h[j].next }
func (h visitors) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *visitors) Push(x any)        { *h = append(*h, x.(*visitor)) }
func (h *visitors) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// WriteShop writes the log s says to w and returns who is who.
func WriteShop(w io.Writer, s Shop) (Truth, error) {
	if err := s.check(); err != nil {
		return Truth{}, err
	}
	span := s.Span
	rng := rand.New(rand.NewPCG(s.Seed, 36))
	// The abusers send for as much less as the log is smaller than ten
	// million lines: at a fixed volume they were 58% of a million.
	abuse := 1.0
	if s.Lines > 0 && s.Lines < fullLog {
		abuse = float64(s.Lines) / fullLog
	}
	truth := Truth{NormalPeak: salePagePeak}
	hq := s.visitors(rng, abuse, &truth)
	abusers := s.abusers(rng, abuse, &truth)
	bw := bufio.NewWriterSize(w, 1<<20)
	lw := lineWriter{w: bw, json: s.Format == "json", millis: s.Millis && s.Format == "json", rng: rand.New(rand.NewPCG(s.Seed, 7))}
	session := min(10*time.Minute, span/12)
	saleFrom, saleTo := span*5/12, span*7/12
	for sec := time.Duration(0); sec < span; sec += time.Second {
		lw.second(s.Start.Add(sec))
		sale := sec >= saleFrom && sec < saleTo
		for hq[0].next < sec+time.Second {
			v := hq[0]
			burst := 1 + v.rng.IntN(pagePeak)
			if sale {
				burst = 1 + v.rng.IntN(salePagePeak)
			}
			lw.page(int((v.next%time.Second)/time.Millisecond), v.ip, v.agent, burst, v.rng)
			if v.office {
				truth.OfficeLines += burst
			} else {
				truth.NormalLines += burst
			}
			v.advance(sale, session)
			heap.Fix(&hq, 0)
		}
		for _, a := range abusers {
			truth.AbuseLines += a.send(sec, rng, &lw)
		}
	}
	lw.flush()
	if err := bw.Flush(); err != nil {
		return Truth{}, err
	}
	if lw.err != nil {
		return Truth{}, lw.err
	}
	truth.Lines = lw.lines
	return truth, nil
}

// check validates s, filling its defaults.
func (s *Shop) check() error {
	if s.Lines < 1000 && s.Users == 0 {
		return errors.New("plan: synthesize at least 1000 lines")
	}
	if s.Format == "" {
		s.Format = "combined"
	}
	if s.Format != "combined" && s.Format != "json" {
		return fmt.Errorf("plan: synthesize %q: want combined or json", s.Format)
	}
	if s.Abusers == 0 {
		s.Abusers = 8
	}
	if s.Offices == 0 {
		s.Offices = 3
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Start.IsZero() {
		s.Start = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	}
	if s.Span == 0 {
		s.Span = 2 * time.Hour
	}
	if s.Span < 10*time.Minute {
		return errors.New("plan: synthesize at least ten minutes")
	}
	return nil
}

// visitors are the shop's users, as many as make its lines beside what
// the abusers (abuse times their full volume) and the offices send, and
// the offices' people (one address each, many browsers), in a heap by
// their next page view.
func (s Shop) visitors(rng *rand.Rand, abuse float64, truth *Truth) visitors {
	span := s.Span
	others := float64(s.Abusers)*42*0.22*abuse*span.Seconds() + float64(s.Offices*55+15*s.Offices*(s.Offices-1))*usersPerSecond*1.2*span.Seconds()
	users := max(100, int((float64(s.Lines)-others)/(span.Seconds()*usersPerSecond)))
	if s.Users > 0 {
		users = s.Users
	}
	var hq visitors
	for i := range users {
		v := &visitor{ip: address(10, i), agent: browsers[rng.IntN(len(browsers))], rng: rand.New(rand.NewPCG(s.Seed, uint64(i)+100))}
		v.next = time.Duration(v.rng.Float64() * float64(span))
		truth.Normal = append(truth.Normal, v.ip)
		hq = append(hq, v)
	}
	for o := range s.Offices {
		ip := address(172, o)
		truth.Offices = append(truth.Offices, ip)
		for u := range 40 + 30*o { // one address, many people and their browsers
			v := &visitor{ip: ip, office: true, agent: fmt.Sprintf("%s Office/%d.%d", browsers[u%len(browsers)], o, u), rng: rand.New(rand.NewPCG(s.Seed, uint64(1e9+o*1000+u)))}
			v.next = time.Duration(v.rng.Float64() * float64(20*time.Minute))
			hq = append(hq, v)
		}
	}
	heap.Init(&hq)
	return hq
}

// abuser is one of the shop's abusers: its address, its rate a second,
// and when it sends.
type abuser struct {
	ip       string
	rate     int
	from, to time.Duration
}

// abusers draws the shop's abusers, each sending for abuse times its
// full length (a minute at least).
func (s Shop) abusers(rng *rand.Rand, abuse float64, truth *Truth) []abuser {
	span := s.Span
	var out []abuser
	for a := range s.Abusers {
		from := time.Duration(rng.Float64() * float64(span*6/10))
		rate := 25 + rng.IntN(36) // drawn before the length, as ever: the seed's logs stay
		length := span/10 + time.Duration(rng.Float64()*float64(span*7/30))
		if abuse < 1 {
			length = max(time.Duration(abuse*float64(length)), time.Minute)
		}
		ab := abuser{ip: address(203, a), rate: rate, from: from, to: from + length}
		out = append(out, ab)
		truth.Abusers = append(truth.Abusers, ab.ip)
	}
	return out
}

// send writes what a sends in the second from sec, if it sends then (the
// server refusing past todaysLimit), and returns how many lines.
func (a abuser) send(sec time.Duration, rng *rand.Rand, lw *lineWriter) int {
	if sec < a.from || sec >= a.to {
		return 0
	}
	n := a.rate - 2 + rng.IntN(5)
	for i := range n {
		status := 200
		if i >= todaysLimit {
			status = 429
		}
		lw.line(rng.IntN(1000), a.ip, "python-requests/2.32.3", fmt.Sprintf("/api/v1/prices/%d", rng.IntN(5000)), status)
	}
	return n
}

// advance moves v to their next page view: a second or more of thought
// within a session (less in the sale), or a session later.
func (v *visitor) advance(sale bool, session time.Duration) {
	think := 7 * time.Second
	if sale {
		think = 3 * time.Second
	}
	if v.active == 0 {
		v.active = v.next + time.Duration(v.rng.ExpFloat64()*float64(session))
	}
	v.next += time.Second + time.Duration(v.rng.ExpFloat64()*float64(think))
	if v.next > v.active {
		v.active = 0
		idle := 2 * time.Hour
		if sale {
			idle = 30 * time.Minute
		}
		v.next += time.Duration(v.rng.ExpFloat64() * float64(idle))
	}
}

// address is the i-th address of a /8.
func address(a, i int) string {
	return fmt.Sprintf("%d.%d.%d.%d", a, i>>16&255, i>>8&255, i&255+1)
}

// lineWriter writes a second's lines, in the order of their
// milliseconds.
type lineWriter struct {
	w            *bufio.Writer
	json, millis bool
	sec          time.Time
	at           []byte // the second's time, as the format writes it
	lines        int
	buf          []byte
	rng          *rand.Rand
	pending      []synthLine
	err          error
}

// synthLine is a line to write: its millisecond in the second, and what
// it says.
type synthLine struct {
	ms              int
	ip, agent, path string
	status          int
}

// second writes the last second's lines and starts t's.
func (lw *lineWriter) second(t time.Time) {
	lw.flush()
	lw.sec = t
	if lw.json {
		lw.at = strconv.AppendInt(lw.at[:0], t.Unix(), 10)
	} else {
		lw.at = t.AppendFormat(lw.at[:0], "02/Jan/2006:15:04:05 -0700")
	}
}

// page is a page view at ms into the second: the page, then its assets
// and API calls, a few milliseconds apart, within the second.
func (lw *lineWriter) page(ms int, ip, agent string, n int, rng *rand.Rand) {
	lw.line(ms, ip, agent, pathOf(pages[rng.IntN(len(pages))], rng), 200)
	for range n - 1 {
		ms = min(999, ms+rng.IntN(60))
		lw.line(ms, ip, agent, pathOf(assets[rng.IntN(len(assets))], rng), 200)
	}
}

func pathOf(p string, rng *rand.Rand) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '%' {
			return fmt.Sprintf(p, rng.IntN(2000))
		}
	}
	return p
}

func (lw *lineWriter) line(ms int, ip, agent, path string, status int) {
	lw.pending = append(lw.pending, synthLine{ms, ip, agent, path, status})
}

// flush writes the second's lines.
func (lw *lineWriter) flush() {
	slices.SortStableFunc(lw.pending, func(a, b synthLine) int { return a.ms - b.ms })
	for _, l := range lw.pending {
		lw.write(l)
	}
	lw.pending = lw.pending[:0]
}

func (lw *lineWriter) write(l synthLine) {
	b := lw.buf[:0]
	size := 200 + lw.rng.IntN(20000)
	if l.status == 429 {
		size = 0
	}
	if lw.json {
		b = append(b, `{"ts":`...)
		b = append(b, lw.at...)
		if lw.millis {
			b = append(b, '.', byte('0'+l.ms/100), byte('0'+l.ms/10%10), byte('0'+l.ms%10))
		}
		b = append(b, `,"remote_addr":"`...)
		b = append(b, l.ip...)
		b = append(b, `","request":"GET `...)
		b = append(b, l.path...)
		b = append(b, ` HTTP/1.1","status":`...)
		b = strconv.AppendInt(b, int64(l.status), 10)
		b = append(b, `,"body_bytes_sent":`...)
		b = strconv.AppendInt(b, int64(size), 10)
		b = append(b, `,"http_user_agent":"`...)
		b = append(b, l.agent...)
		b = append(b, "\"}\n"...)
	} else {
		b = append(b, l.ip...)
		b = append(b, " - - ["...)
		b = append(b, lw.at...)
		b = append(b, `] "GET `...)
		b = append(b, l.path...)
		b = append(b, ` HTTP/1.1" `...)
		b = strconv.AppendInt(b, int64(l.status), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(size), 10)
		b = append(b, ` "-" "`...)
		b = append(b, l.agent...)
		b = append(b, "\"\n"...)
	}
	lw.buf = b
	lw.lines++
	if _, err := lw.w.Write(b); err != nil && lw.err == nil {
		lw.err = err
	}
}
