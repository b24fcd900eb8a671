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

// A World is an API's traffic with its truth: keys in classes, each class
// a shape of traffic (apps that open with a fan-out, dashboards, batch
// syncs at their own pace and period, steady relays, cron jobs on the
// minute, keys shared by many agents) and the abusers among them
// (sustained scrapers, enumerators, runaway retries, greedy batches).
// A rule that chooses a limit from traffic is tested on many worlds, not
// on the one it was built on: RandomWorld draws them.
type World struct {
	// Span is how long the log runs; Start its first instant (zero:
	// 2026-11-27 08:00 UTC).
	Span  time.Duration
	Start time.Time
	// Seed makes the traffic (0: 1).
	Seed    uint64
	Classes []Class
}

// Role is what a key is in its world's truth.
type Role int

const (
	// Legit keys are the API's customers: a limit should spare them.
	Legit Role = iota
	// Shared keys carry many users (a carrier's NAT, a partner's key
	// used by many apps): legitimate, and many times one user's traffic.
	Shared
	// Abusers are what a limit is for.
	Abuser
)

func (r Role) String() string {
	switch r {
	case Legit:
		return "legit"
	case Shared:
		return "shared"
	}
	return "abuser"
}

// A Class is keys of one shape.
type Class struct {
	Name string
	Role Role
	Keys int
	// Users is how many users each key carries, each with an agent of its
	// own (0 or 1: one); a shared key's.
	Users int
	Shape Shape
}

// A Shape draws one user's request times, in [0, span).
type Shape interface {
	times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration
	// Describe says the shape in a few words.
	Describe() string
}

// Range is a range of values a shape draws each key's from, uniformly.
type Range[T int | float64 | time.Duration] struct{ Lo, Hi T }

func (r Range[T]) draw(rng *rand.Rand) T {
	if r.Hi <= r.Lo {
		return r.Lo
	}
	switch v := any(r).(type) {
	case Range[int]:
		return T(v.Lo + rng.IntN(v.Hi-v.Lo+1))
	case Range[float64]:
		return T(v.Lo + rng.Float64()*(v.Hi-v.Lo))
	case Range[time.Duration]:
		return T(v.Lo + time.Duration(rng.Int64N(int64(v.Hi-v.Lo)+1)))
	}
	panic("unreachable")
}

// FanOut is an app that opens with a fan-out (Fan requests within 300ms)
// and then sends one every Every for Stay, in Sessions sessions.
type FanOut struct {
	Fan, Sessions Range[int]
	Every, Stay   Range[time.Duration]
}

func (s FanOut) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	for range s.Sessions.draw(rng) {
		at := time.Duration(rng.Int64N(int64(span)))
		for range s.Fan.draw(rng) {
			out = append(out, at+time.Duration(rng.Int64N(int64(300*time.Millisecond))))
		}
		end := at + s.Stay.draw(rng)
		for t := at + time.Second; t < end; t += s.Every.draw(rng) {
			out = append(out, t)
		}
	}
	return out
}

func (s FanOut) Describe() string {
	return fmt.Sprintf("an app: %d-%d at once, then one every %v-%v", s.Fan.Lo, s.Fan.Hi, s.Every.Lo, s.Every.Hi)
}

// Dashboard is a person at a dashboard: Sessions visits of Stay, a page
// view every Think, each page fanning out to Calls requests within 250ms.
type Dashboard struct {
	Calls, Sessions Range[int]
	Think, Stay     Range[time.Duration]
}

func (s Dashboard) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	for range s.Sessions.draw(rng) {
		at := time.Duration(rng.Int64N(int64(span)))
		end := at + s.Stay.draw(rng)
		for t := at; t < end; t += s.Think.draw(rng) {
			for range s.Calls.draw(rng) {
				out = append(out, t+time.Duration(rng.Int64N(int64(250*time.Millisecond))))
			}
		}
	}
	return out
}

func (s Dashboard) Describe() string {
	return fmt.Sprintf("a dashboard: pages of %d-%d calls every %v-%v", s.Calls.Lo, s.Calls.Hi, s.Think.Lo, s.Think.Hi)
}

// Batch is a sync that runs every Period (a phase of its own, starting up
// to Jitter late), sending Size requests paced at Pace a second by its
// own client.
type Batch struct {
	Period time.Duration
	Jitter time.Duration
	Size   Range[int]
	Pace   Range[float64]
}

func (s Batch) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	pace := s.Pace.draw(rng)
	gap := time.Duration(float64(time.Second) / pace)
	for start := time.Duration(rng.Int64N(int64(s.Period))); start < span; start += s.Period {
		t := start
		if s.Jitter > 0 {
			t += time.Duration(rng.Int64N(int64(s.Jitter)))
		}
		for range s.Size.draw(rng) {
			out = append(out, t)
			t += gap*9/10 + time.Duration(rng.Int64N(int64(gap)/5+1))
		}
	}
	return out
}

func (s Batch) Describe() string {
	return fmt.Sprintf("a batch of %d-%d every %v at %g-%g/s", s.Size.Lo, s.Size.Hi, s.Period, s.Pace.Lo, s.Pace.Hi)
}

// Steady sends at Rate a second, at random (Poisson), from a random
// instant for For (0: the whole log).
type Steady struct {
	Rate Range[float64]
	For  Range[time.Duration]
}

func (s Steady) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	rate := s.Rate.draw(rng)
	from, to := time.Duration(0), span
	if d := s.For.draw(rng); d > 0 && d < span {
		from = time.Duration(rng.Int64N(int64(span - d)))
		to = from + d
	}
	for t := from + time.Duration(rng.ExpFloat64()/rate*float64(time.Second)); t < to; t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second)) {
		out = append(out, t)
	}
	return out
}

func (s Steady) Describe() string {
	d := "all along"
	if s.For.Hi > 0 {
		d = fmt.Sprintf("for %v-%v", s.For.Lo, s.For.Hi)
	}
	return fmt.Sprintf("steady at %.3g-%.3g/s %s", s.Rate.Lo, s.Rate.Hi, d)
}

// Cron is a job on the clock: every Every, on the minute (a second or
// two late), Size requests within a second.
type Cron struct {
	Every time.Duration
	Size  Range[int]
}

func (s Cron) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	size := s.Size.draw(rng)
	late := time.Duration(rng.Int64N(int64(2 * time.Second)))
	for t := time.Duration(0); t < span; t += s.Every {
		for range size {
			out = append(out, t+late+time.Duration(rng.Int64N(int64(time.Second))))
		}
	}
	return out
}

func (s Cron) Describe() string {
	return fmt.Sprintf("a cron job: %d-%d every %v", s.Size.Lo, s.Size.Hi, s.Every)
}

// KeyTruth is one key of a world: its class and role, and how many
// requests it sent.
type KeyTruth struct {
	Key, Class string
	Role       Role
	Requests   int
}

// A Request is one request of a world: when, which key (an index in the
// truth's Keys), and which of the key's users sent it.
type Request struct {
	At        time.Duration
	Key, User int32
}

// Generate draws the world's traffic, in time order, and its truth.
func (w World) Generate() ([]Request, []KeyTruth) {
	rng := rand.New(rand.NewPCG(cmp.Or(w.Seed, 1), 17))
	var reqs []Request
	var keys []KeyTruth
	var buf []time.Duration
	for _, c := range w.Classes {
		for range c.Keys {
			id := int32(len(keys))
			k := KeyTruth{Key: fmt.Sprintf("key_%016x", rng.Uint64()), Class: c.Name, Role: c.Role}
			for u := range max(c.Users, 1) {
				buf = c.Shape.times(rng, w.Span, buf[:0])
				for _, t := range buf {
					if t >= 0 && t < w.Span {
						reqs = append(reqs, Request{At: t, Key: id, User: int32(u)})
						k.Requests++
					}
				}
			}
			keys = append(keys, k)
		}
	}
	slices.SortFunc(reqs, func(a, b Request) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Key, b.Key), cmp.Compare(a.User, b.User))
	})
	return reqs, keys
}

// The agents a world's keys come with: a customer's own client.
var worldAgents = []string{"acme-sync/2.4.1", "python-requests/2.32.3", "Go-http-client/2.0", "okhttp/4.12.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
	"axios/1.7.9", "node-fetch/3.3.2", "curl/8.11.0"}

var apiPaths = []string{"/v1/orders", "/v1/orders/%d", "/v1/customers/%d", "/v1/invoices", "/v1/products/%d", "/v1/sync", "/v1/events", "/v1/reports/%d"}

// WriteTraefik writes the world as two hours of Traefik's JSON access log
// with the request headers kept, the key in the header X-Api-Key
// (request_X-Api-Key), each user of a key with an agent of its own; a
// load balancer's health check every 10 s carries no key. It returns
// the requests and the truth, as Generate does, and the lines written.
func (w World) WriteTraefik(out io.Writer) ([]Request, []KeyTruth, int, error) {
	reqs, keys := w.Generate()
	start := w.Start
	if start.IsZero() {
		start = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(cmp.Or(w.Seed, 1), 19))
	bw := bufio.NewWriterSize(out, 1<<16)
	var buf []byte
	lines := 0
	line := func(at time.Duration, id int, key, agent, path string, status int) error {
		t := start.Add(at)
		buf = append(buf[:0], `{"ClientAddr":"`...)
		ip := fmt.Sprintf("198.18.%d.%d", id/250, 1+id%250)
		buf = append(buf, ip...)
		buf = append(buf, `:`...)
		buf = strconv.AppendInt(buf, int64(30000+rng.IntN(30000)), 10)
		buf = append(buf, `","ClientHost":"`...)
		buf = append(buf, ip...)
		buf = append(buf, `","DownstreamContentSize":512,"DownstreamStatus":`...)
		buf = strconv.AppendInt(buf, int64(status), 10)
		buf = append(buf, `,"Duration":2104312,"OriginStatus":`...)
		buf = strconv.AppendInt(buf, int64(status), 10)
		buf = append(buf, `,"RequestHost":"api.example.com","RequestMethod":"GET","RequestPath":`...)
		buf = strconv.AppendQuote(buf, path)
		buf = append(buf, `,"RequestProtocol":"HTTP/2.0","RouterName":"api@docker","ServiceName":"api@docker","StartUTC":"`...)
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, `","entryPointName":"websecure","level":"info","msg":"","request_User-Agent":`...)
		buf = strconv.AppendQuote(buf, agent)
		if key != "" {
			buf = append(buf, `,"request_X-Api-Key":`...)
			buf = strconv.AppendQuote(buf, key)
		}
		buf = append(buf, `,"time":"`...)
		buf = t.Truncate(time.Second).AppendFormat(buf, time.RFC3339)
		buf = append(buf, "\"}\n"...)
		lines++
		_, err := bw.Write(buf)
		return err
	}
	health := time.Duration(0)
	for _, r := range reqs {
		for ; health <= r.At; health += 10 * time.Second {
			if err := line(health, 0, "", "kube-probe/1.31", "/healthz", 200); err != nil {
				return reqs, keys, lines, err
			}
		}
		agent := worldAgents[int(r.Key)%len(worldAgents)]
		if r.User > 0 {
			agent = fmt.Sprintf("partner-app-%d/1.%d (%s)", r.User, r.User%7, worldAgents[int(r.User)%len(worldAgents)])
		}
		p := apiPaths[rng.IntN(len(apiPaths))]
		if slices.Contains([]byte(p), '%') {
			p = fmt.Sprintf(p, rng.IntN(90000))
		}
		if err := line(r.At, 1+int(r.Key), keys[r.Key].Key, agent, p, 200); err != nil {
			return reqs, keys, lines, err
		}
	}
	return reqs, keys, lines, bw.Flush()
}

// B2B is two hours of a B2B API keyed by API key, the one a rule fitted
// to apps' fan-outs got wrong: 600 dashboard users, 150 integrations
// whose sync runs every 15 minutes (150 to 300 requests paced at 10 a
// second by their own client), 40 relays sending 0.1 to 0.3 a second all
// along, two partner keys each shared by 40 apps, and four abusers: a
// leaked key scraped at 3 a second for 90 minutes, an enumerator at 8 a
// second for 20 minutes, a sync stuck retrying at 30 a second for 5
// minutes, and a greedy integration that runs its batch every minute.
func B2B(seed uint64) World {
	return World{Span: 2 * time.Hour, Seed: seed, Classes: []Class{
		{Name: "dashboards", Keys: 600, Shape: Dashboard{Calls: Range[int]{3, 6}, Sessions: Range[int]{1, 3},
			Think: Range[time.Duration]{10 * time.Second, 60 * time.Second}, Stay: Range[time.Duration]{5 * time.Minute, 25 * time.Minute}}},
		{Name: "integrations", Keys: 150, Shape: Batch{Period: 15 * time.Minute, Jitter: 20 * time.Second, Size: Range[int]{150, 300}, Pace: Range[float64]{10, 10}}},
		{Name: "relays", Keys: 40, Shape: Steady{Rate: Range[float64]{0.1, 0.3}}},
		{Name: "partners", Role: Shared, Keys: 2, Users: 40, Shape: FanOut{Fan: Range[int]{3, 8}, Sessions: Range[int]{1, 3},
			Every: Range[time.Duration]{5 * time.Second, 30 * time.Second}, Stay: Range[time.Duration]{time.Minute, 10 * time.Minute}}},
		{Name: "leaked key", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{3, 3}, For: Range[time.Duration]{90 * time.Minute, 90 * time.Minute}}},
		{Name: "enumerator", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{8, 8}, For: Range[time.Duration]{20 * time.Minute, 20 * time.Minute}}},
		{Name: "stuck sync", Role: Abuser, Keys: 1, Shape: Steady{Rate: Range[float64]{30, 30}, For: Range[time.Duration]{5 * time.Minute, 5 * time.Minute}}},
		{Name: "greedy integration", Role: Abuser, Keys: 1, Shape: Batch{Period: time.Minute, Jitter: 5 * time.Second, Size: Range[int]{150, 300}, Pace: Range[float64]{10, 10}}},
	}}
}

// RandomWorld draws a small world of its own shape from seed: half an
// hour to an hour of 300 to 600 keys in two to four legitimate classes drawn from the shapes above,
// with their own sizes, paces and periods; sometimes keys shared by many
// users; and none to four abusers, at most one key in a hundred, each
// drawn from a sustained scraper at 2 to 30 times the busiest legitimate
// class's long-run rate (25 a second at most), an enumerator, a runaway
// retry, a greedy batch, or a customer's key sending two to four times
// its class's most. Whether a limit can tell its abusers from its customers is for
// the world's curves to say (the test computes it by brute force): some
// worlds separate, some do not.
func RandomWorld(seed uint64) World {
	rng := rand.New(rand.NewPCG(seed, 23))
	span := time.Duration(30+rng.IntN(31)) * time.Minute
	w := World{Span: span, Seed: seed}
	keys := 300 + rng.IntN(301)
	classes := 2 + rng.IntN(3)
	left := keys
	var batchPace, busiest float64 // the legitimate classes' fastest pace and long-run rate
	for i := range classes {
		n := left / (classes - i)
		if i < classes-1 {
			n = max(n/2+rng.IntN(n+1), 10)
		}
		left -= n
		c := Class{Keys: n}
		var rate float64
		switch rng.IntN(5) {
		case 0:
			c.Name = "apps"
			fan := 3 + rng.IntN(12)
			c.Shape = FanOut{Fan: Range[int]{fan, fan + rng.IntN(6)}, Sessions: Range[int]{1, 1 + rng.IntN(4)},
				Every: Range[time.Duration]{time.Duration(1+rng.IntN(5)) * time.Second, time.Duration(6+rng.IntN(20)) * time.Second},
				Stay:  Range[time.Duration]{time.Minute, time.Duration(2+rng.IntN(10)) * time.Minute}}
			rate = 0.05
		case 1:
			c.Name = "dashboards"
			calls := 2 + rng.IntN(5)
			c.Shape = Dashboard{Calls: Range[int]{calls, calls + rng.IntN(4)}, Sessions: Range[int]{1, 1 + rng.IntN(2)},
				Think: Range[time.Duration]{time.Duration(10+rng.IntN(20)) * time.Second, time.Duration(40+rng.IntN(60)) * time.Second},
				Stay:  Range[time.Duration]{3 * time.Minute, time.Duration(5+rng.IntN(15)) * time.Minute}}
			rate = 0.1
		case 2:
			c.Name = "batch syncs"
			period := []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute}[rng.IntN(4)]
			size := 20 + rng.IntN(100)
			pace := []float64{2, 5, 10, 20}[rng.IntN(4)]
			c.Shape = Batch{Period: period, Jitter: period / 30, Size: Range[int]{size, size + rng.IntN(size+1)}, Pace: Range[float64]{pace, pace}}
			rate = 1.5 * float64(size) / period.Seconds()
			batchPace = max(batchPace, pace)
		case 3:
			c.Name = "relays"
			lo := 0.01 + rng.Float64()*0.1
			c.Shape = Steady{Rate: Range[float64]{lo, lo * (1.5 + rng.Float64())}}
			rate = lo * 3
		case 4:
			c.Name = "cron jobs"
			size := 1 + rng.IntN(10)
			c.Shape = Cron{Every: []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute}[rng.IntN(3)], Size: Range[int]{size, size + rng.IntN(size+1)}}
			rate = float64(2*size) / 60
		}
		busiest = max(busiest, rate)
		w.Classes = append(w.Classes, c)
	}
	if rng.IntN(3) == 0 {
		w.Classes = append(w.Classes, Class{Name: "shared", Role: Shared, Keys: 1 + rng.IntN(3), Users: 10 + rng.IntN(40),
			Shape: FanOut{Fan: Range[int]{4, 12}, Sessions: Range[int]{1, 2}, Every: Range[time.Duration]{2 * time.Second, 20 * time.Second}, Stay: Range[time.Duration]{time.Minute, 5 * time.Minute}}})
	}
	abusers := rng.IntN(min(5, keys/100+1))
	legit := w.Classes[:classes]
	for range abusers {
		c := Class{Role: Abuser, Keys: 1}
		switch rng.IntN(5) {
		case 4:
			// A customer's key sending two to four times its class's most:
			// an abuser some limits can tell and some cannot.
			like := legit[rng.IntN(len(legit))]
			c.Name = "heavy " + like.Name
			x := 2 + rng.Float64()*2
			switch sh := like.Shape.(type) {
			case Batch:
				sh.Size = Range[int]{int(float64(sh.Size.Hi) * x), int(float64(sh.Size.Hi) * x)}
				c.Shape = sh
			case Steady:
				sh.Rate = Range[float64]{sh.Rate.Hi * x, sh.Rate.Hi * x}
				c.Shape = sh
			case Cron:
				sh.Size = Range[int]{int(float64(sh.Size.Hi) * x), int(float64(sh.Size.Hi) * x)}
				c.Shape = sh
			case FanOut:
				sh.Fan = Range[int]{int(float64(sh.Fan.Hi) * x), int(float64(sh.Fan.Hi) * x)}
				c.Shape = sh
			case Dashboard:
				sh.Calls = Range[int]{int(float64(sh.Calls.Hi) * x), int(float64(sh.Calls.Hi) * x)}
				c.Shape = sh
			}
		case 0:
			c.Name = "scraper"
			r := min(busiest*(2+rng.Float64()*28), 25)
			c.Shape = Steady{Rate: Range[float64]{r, r}, For: Range[time.Duration]{span / 4, span / 2}}
		case 1:
			c.Name = "enumerator"
			r := 3 + rng.Float64()*7
			c.Shape = Steady{Rate: Range[float64]{r, r}, For: Range[time.Duration]{5 * time.Minute, 15 * time.Minute}}
		case 2:
			c.Name = "runaway retry"
			r := 15 + rng.Float64()*35
			c.Shape = Steady{Rate: Range[float64]{r, r}, For: Range[time.Duration]{time.Minute, 3 * time.Minute}}
		case 3:
			c.Name = "greedy batch"
			size := 50 + rng.IntN(150)
			c.Shape = Batch{Period: time.Minute, Jitter: 2 * time.Second, Size: Range[int]{size, size}, Pace: Range[float64]{max(batchPace, 5), max(batchPace, 5)}}
		}
		w.Classes = append(w.Classes, c)
	}
	return w
}
