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
	// Pollers are legitimate keys that poll one path at a steady
	// interval (uptime monitors, health checks, devices' heartbeats):
	// often faster, over the log, than any customer.
	Poller
)

func (r Role) String() string {
	switch r {
	case Legit:
		return "legit"
	case Shared:
		return "shared"
	case Poller:
		return "poller"
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
	// Path and Agent, if set, are every request's of its keys (a
	// monitor's one path and its software); else a request's path is
	// one of the API's, its agent its key's client's.
	Path, Agent string
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

// KeyTruth is one key of a world: its class and role, how many requests
// it sent, and its class's one path and agent, if it has them.
type KeyTruth struct {
	Key, Class  string
	Role        Role
	Requests    int
	Path, Agent string
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
			k := KeyTruth{Key: fmt.Sprintf("key_%016x", rng.Uint64()), Class: c.Name, Role: c.Role, Path: c.Path, Agent: c.Agent}
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
		agent, p := keys[r.Key].agentAndPath(r, rng)
		if err := line(r.At, 1+int(r.Key), keys[r.Key].Key, agent, p, 200); err != nil {
			return reqs, keys, lines, err
		}
	}
	return reqs, keys, lines, bw.Flush()
}

// agentAndPath are a request's agent and path: its key's own, if its
// class has them; else its key's client's agent (a shared key's user's
// own) and one of the API's paths, drawn with rng.
func (k KeyTruth) agentAndPath(r Request, rng *rand.Rand) (agent, path string) {
	agent = worldAgents[int(r.Key)%len(worldAgents)]
	if r.User > 0 {
		agent = fmt.Sprintf("partner-app-%d/1.%d (%s)", r.User, r.User%7, worldAgents[int(r.User)%len(worldAgents)])
	}
	if k.Agent != "" {
		agent = k.Agent
	}
	if k.Path != "" {
		return agent, k.Path
	}
	path = apiPaths[rng.IntN(len(apiPaths))]
	if slices.Contains([]byte(path), '%') {
		path = fmt.Sprintf(path, rng.IntN(90000))
	}
	return agent, path
}
