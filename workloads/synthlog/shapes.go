package synthlog

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The shapes of a world's traffic: what one user of a key sends.

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

// Poll is an uptime monitor, a health check or a device's heartbeat: a
// request every Every (each key its own, drawn from the range), a little
// late now and then (up to Jitter), from a random phase, all along.
type Poll struct {
	Every  Range[time.Duration]
	Jitter time.Duration
}

func (s Poll) times(rng *rand.Rand, span time.Duration, out []time.Duration) []time.Duration {
	every := s.Every.draw(rng)
	for t := time.Duration(rng.Int64N(int64(every))); t < span; t += every {
		late := time.Duration(0)
		if s.Jitter > 0 {
			late = time.Duration(rng.Int64N(int64(s.Jitter)))
		}
		out = append(out, t+late)
	}
	return out
}

func (s Poll) Describe() string {
	return fmt.Sprintf("polling every %v-%v", s.Every.Lo, s.Every.Hi)
}
