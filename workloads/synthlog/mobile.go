package synthlog

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Mobile says what log WriteMobile writes: half an hour of a mobile
// API's JSON log in Caddy's format (times to the microsecond, the
// request's headers as arrays), where one number a period fails. Its app
// users open the app with a fan-out of 8 to 14 requests within 300ms and
// then send one every few seconds, in a session or three; beside them a
// crawler sends 5 a second all along, two scrapers 12 and 25 a second
// for ten minutes, an app stuck retrying 40 a second for two, and four
// carrier-NAT addresses carry 100 app users each (each user's agent its
// own). Per second, an app user peaks as high as a scraper; a bucket of
// a low rate and a burst that covers the fan-out tells them apart.
type Mobile struct {
	// Users is how many app users (0: 2600), NAT how many shared
	// addresses (0: 4), each of PerNAT users (0: 100).
	Users, NAT, PerNAT int
	// Seed makes the log (0: 1).
	Seed uint64
	// Start is the log's first instant (zero: 2026-11-27 08:00 UTC), Span
	// how long it runs (0: 30 minutes).
	Start time.Time
	Span  time.Duration
	// Scale divides every time after Start (0 or 1: none): 10 writes the
	// log in a tenth of the time, each client ten times as fast, for a
	// test that sends it to a server as logged.
	Scale float64
}

// MobileTruth is who is who in a mobile log, by address.
type MobileTruth struct {
	Users []string
	// Sustained are the crawler, the scrapers and the stuck app.
	Sustained []string
	Shared    []string
	Lines     int
}

// mobileLine is one request of the log.
type mobileLine struct {
	at        time.Duration
	ip, agent string
	path      string
	status    int
}

var appPaths = []string{"/v1/feed", "/v1/me", "/v1/notifications", "/v1/cart", "/v1/config", "/v1/recommendations", "/v1/inbox", "/v1/stories", "/v1/search?q=%d", "/v1/items/%d"}

// WriteMobile writes the log s says to w and returns who is who.
func WriteMobile(w io.Writer, s Mobile) (MobileTruth, error) {
	s.Users = cmp.Or(s.Users, 2600)
	s.NAT = cmp.Or(s.NAT, 4)
	s.PerNAT = cmp.Or(s.PerNAT, 100)
	s.Seed = cmp.Or(s.Seed, 1)
	s.Span = cmp.Or(s.Span, 30*time.Minute)
	if s.Start.IsZero() {
		s.Start = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 11))
	var lines []mobileLine
	var truth MobileTruth
	app := func(ip string, rng *rand.Rand) {
		agent := fmt.Sprintf("ShopApp/4.%d.%d (%s)", 1+rng.IntN(2), rng.IntN(10), []string{"iPhone; iOS 18.1", "Android 14; Pixel 8", "iPhone; iOS 17.6", "Android 13; SM-A546B"}[rng.IntN(4)])
		for range 1 + rng.IntN(3) {
			at := time.Duration(rng.Int64N(int64(s.Span)))
			// The opening fan-out, within 300ms.
			for range 8 + rng.IntN(7) {
				lines = append(lines, mobileLine{at + time.Duration(rng.Int64N(int64(300*time.Millisecond))), ip, agent, appPath(rng), 200})
			}
			// Then one every few seconds, for one to five minutes.
			end := at + time.Minute + time.Duration(rng.Int64N(int64(4*time.Minute)))
			for t := at + time.Second; t < end && t < s.Span; t += 2*time.Second + time.Duration(rng.Int64N(int64(6*time.Second))) {
				lines = append(lines, mobileLine{t, ip, agent, appPath(rng), 200})
			}
		}
	}
	for i := range s.Users {
		ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)
		truth.Users = append(truth.Users, ip)
		app(ip, rng)
	}
	for i := range s.NAT {
		ip := fmt.Sprintf("100.64.0.%d", 1+i)
		truth.Shared = append(truth.Shared, ip)
		for range s.PerNAT {
			app(ip, rng)
		}
	}
	steady := func(ip, agent string, rate float64, from, to time.Duration) {
		truth.Sustained = append(truth.Sustained, ip)
		gap := time.Duration(float64(time.Second) / rate)
		for t := from; t < to; t += gap/2 + time.Duration(rng.Int64N(int64(gap))) {
			lines = append(lines, mobileLine{t, ip, agent, appPath(rng), 200})
		}
	}
	steady("198.51.100.10", "Mozilla/5.0 (compatible; ExampleBot/2.1; +https://example.com/bot)", 5, 0, s.Span)
	steady("203.0.113.21", "python-requests/2.32.3", 12, s.Span/6, s.Span/6+10*time.Minute)
	steady("203.0.113.22", "Go-http-client/1.1", 25, s.Span/2, s.Span/2+10*time.Minute)
	steady("10.250.0.1", "ShopApp/4.1.0 (Android 12; stuck)", 40, s.Span/3, s.Span/3+2*time.Minute)
	slices.SortStableFunc(lines, func(a, b mobileLine) int { return cmp.Compare(a.at, b.at) })
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	for _, l := range lines {
		if l.at >= s.Span {
			continue
		}
		at := s.Start.Add(l.at)
		if s.Scale > 1 {
			at = s.Start.Add(time.Duration(float64(l.at) / s.Scale))
		}
		buf = append(buf[:0], `{"level":"info","ts":`...)
		buf = strconv.AppendFloat(buf, float64(at.UnixMicro())/1e6, 'f', 6, 64)
		buf = append(buf, `,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"`...)
		buf = append(buf, l.ip...)
		buf = append(buf, `","proto":"HTTP/2.0","method":"GET","host":"api.shop.example","uri":"`...)
		buf = append(buf, l.path...)
		buf = append(buf, `","headers":{"User-Agent":[`...)
		buf = strconv.AppendQuote(buf, l.agent)
		buf = append(buf, `],"Accept-Encoding":["gzip"]}},"duration":0.0021,"size":512,"status":`...)
		buf = strconv.AppendInt(buf, int64(l.status), 10)
		buf = append(buf, "}\n"...)
		if _, err := bw.Write(buf); err != nil {
			return truth, err
		}
		truth.Lines++
	}
	return truth, bw.Flush()
}

func appPath(rng *rand.Rand) string {
	p := appPaths[rng.IntN(len(appPaths))]
	if slices.Contains([]byte(p), '%') {
		return fmt.Sprintf(p, rng.IntN(5000))
	}
	return p
}
