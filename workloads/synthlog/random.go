package synthlog

import (
	"math/rand/v2"
	"time"
)

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
// its class's most; then, sometimes, steady pollers, slow scrapers and a
// botnet of 1% to 10% of the keys (lateClasses). Whether a limit can
// tell its abusers from its customers is for the world's curves to say
// (the test computes it by brute force): some worlds separate, some do
// not.
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
		c, rate, pace := legitClass(rng)
		c.Keys = n
		busiest, batchPace = max(busiest, rate), max(batchPace, pace)
		w.Classes = append(w.Classes, c)
	}
	if rng.IntN(3) == 0 {
		w.Classes = append(w.Classes, Class{Name: "shared", Role: Shared, Keys: 1 + rng.IntN(3), Users: 10 + rng.IntN(40),
			Shape: FanOut{Fan: Range[int]{4, 12}, Sessions: Range[int]{1, 2}, Every: Range[time.Duration]{2 * time.Second, 20 * time.Second}, Stay: Range[time.Duration]{time.Minute, 5 * time.Minute}}})
	}
	abusers := rng.IntN(min(5, keys/100+1))
	legit := w.Classes[:classes]
	for range abusers {
		w.Classes = append(w.Classes, abuserClass(rng, legit, busiest, batchPace, span))
	}
	w.Classes = append(w.Classes, lateClasses(rng, keys, busiest, span)...)
	return w
}

// legitClass draws a class of customers' shape (its keys are the
// caller's), its long-run rate a key, about, and its batches' pace (0 for
// no batches).
func legitClass(rng *rand.Rand) (c Class, rate, pace float64) {
	switch rng.IntN(5) {
	case 0:
		c.Name = "apps"
		fan := 3 + rng.IntN(12)
		c.Shape = FanOut{Fan: Range[int]{fan, fan + rng.IntN(6)}, Sessions: Range[int]{1, 1 + rng.IntN(4)},
			Every: Range[time.Duration]{time.Duration(1+rng.IntN(5)) * time.Second, time.Duration(6+rng.IntN(20)) * time.Second},
			Stay:  Range[time.Duration]{time.Minute, time.Duration(2+rng.IntN(10)) * time.Minute}}
		return c, 0.05, 0
	case 1:
		c.Name = "dashboards"
		calls := 2 + rng.IntN(5)
		c.Shape = Dashboard{Calls: Range[int]{calls, calls + rng.IntN(4)}, Sessions: Range[int]{1, 1 + rng.IntN(2)},
			Think: Range[time.Duration]{time.Duration(10+rng.IntN(20)) * time.Second, time.Duration(40+rng.IntN(60)) * time.Second},
			Stay:  Range[time.Duration]{3 * time.Minute, time.Duration(5+rng.IntN(15)) * time.Minute}}
		return c, 0.1, 0
	case 2:
		c.Name = "batch syncs"
		period := []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute}[rng.IntN(4)]
		size := 20 + rng.IntN(100)
		pace = []float64{2, 5, 10, 20}[rng.IntN(4)]
		c.Shape = Batch{Period: period, Jitter: period / 30, Size: Range[int]{size, size + rng.IntN(size+1)}, Pace: Range[float64]{pace, pace}}
		return c, 1.5 * float64(size) / period.Seconds(), pace
	case 3:
		c.Name = "relays"
		lo := 0.01 + rng.Float64()*0.1
		c.Shape = Steady{Rate: Range[float64]{lo, lo * (1.5 + rng.Float64())}}
		return c, lo * 3, 0
	}
	c.Name = "cron jobs"
	size := 1 + rng.IntN(10)
	c.Shape = Cron{Every: []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute}[rng.IntN(3)], Size: Range[int]{size, size + rng.IntN(size+1)}}
	return c, float64(2*size) / 60, 0
}

// abuserClass draws one abuser: a sustained scraper at 2 to 30 times the
// busiest customers' long-run rate, an enumerator, a runaway retry, a
// greedy batch at the customers' fastest pace, or a customer of legit
// sending more than its class.
func abuserClass(rng *rand.Rand, legit []Class, busiest, batchPace float64, span time.Duration) Class {
	c := Class{Role: Abuser, Keys: 1}
	switch rng.IntN(5) {
	case 4:
		return heavyCustomer(rng, legit)
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
	return c
}

// heavyCustomer is a customer's key of one of legit's classes sending two
// to four times its class's most: an abuser some limits can tell and
// some cannot.
func heavyCustomer(rng *rand.Rand, legit []Class) Class {
	like := legit[rng.IntN(len(legit))]
	c := Class{Role: Abuser, Keys: 1, Name: "heavy " + like.Name}
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
	return c
}

// lateClasses are what a world draws after its customers and abusers, so
// that those stay as they were drawn before these were: sometimes a few
// steady pollers (uptime monitors, health checks, heartbeats: one path,
// every second to every minute, above the customers' long-run rate); a
// few slow scrapers, sending 3 to 10 times the busiest class's long-run
// rate (2 a second at most) for half the log or all of it, in bursts no
// larger than a page's, that stand apart only over minutes and hours;
// and a botnet, 1% to 10% of the keys, each scraping as a slow scraper
// does, the same software on every address.
func lateClasses(rng *rand.Rand, keys int, busiest float64, span time.Duration) []Class {
	var out []Class
	if rng.IntN(2) == 0 {
		every := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute}[rng.IntN(6)]
		out = append(out, Class{Name: "pollers", Role: Poller, Keys: 1 + rng.IntN(8), Path: []string{"/healthz", "/status", "/v1/ping"}[rng.IntN(3)],
			Agent: "uptime-monitor/3.1", Shape: Poll{Every: Range[time.Duration]{every, every}, Jitter: every / 10}})
	}
	slow := func() Shape {
		r := min(busiest*(3+rng.Float64()*7), 2)
		return Steady{Rate: Range[float64]{r, r}, For: Range[time.Duration]{span / 2, span}}
	}
	if rng.IntN(3) == 0 {
		for range 1 + rng.IntN(2) {
			out = append(out, Class{Name: "slow scraper", Role: Abuser, Keys: 1, Shape: slow()})
		}
	}
	if rng.IntN(3) == 0 {
		n := max(keys*(1+rng.IntN(10))/100, 2)
		out = append(out, Class{Name: "botnet", Role: Abuser, Keys: n, Agent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0 Safari/537.36", Shape: slow()})
	}
	return out
}
