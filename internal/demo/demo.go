// Package demo is ratelab demo's story: the limiters at work, decided in
// simulated time, told as scenes of decisions for a terminal or as JSON.
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/tiers"
)

// Scene is one part of the demo: a story told by decisions, in simulated
// time.
type Scene struct {
	Title string   `json:"title"`
	Intro []string `json:"intro"`
	// Steps are the decisions, in order. A step not Shown is left out of
	// the text (it is one of many alike), never out of the JSON.
	Steps []Step `json:"steps"`
	// Summary, when set, is what the text shows instead of the steps.
	Summary *Summary `json:"summary,omitempty"`
	Outro   []string `json:"outro"`
}

// Step is one request and its decision.
type Step struct {
	// At is the time in seconds from the scene's start.
	At      float64 `json:"t"`
	User    string  `json:"user"`
	Limiter string  `json:"limiter"`
	N       int     `json:"n"`
	Allowed bool    `json:"allowed"`
	// Remaining is the quota left after the decision; RetryAfter, for a
	// denial, is in seconds (absent when admitted, and for a cost no
	// waiting admits).
	Remaining  int      `json:"remaining"`
	RetryAfter *float64 `json:"retry_after,omitempty"`
	// DeniedBy names the limit that denied, for a limiter of several.
	DeniedBy string `json:"denied_by,omitempty"`
	Note     string `json:"note,omitempty"`
	Shown    bool   `json:"-"`
}

// Summary is a small table that tells a scene better than its steps.
type Summary struct {
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	// Bad marks the rows to show as a warning.
	Bad []bool `json:"-"`
}

// Scenes returns the demo's scenes: the seed examples of a token bucket, two
// users kept apart, the window edge under all six algorithms, a free and a
// premium user, and a composite limit that denies on its hourly window.
// Everything is decided at explicit times: the demo takes milliseconds and
// gives the same answers every time.
func Scenes() ([]Scene, error) {
	var scenes []Scene
	for _, scene := range []func() (Scene, error){burstThenRefill, steadyState, isolation, windowEdge, freeAndPremium, hourly} {
		s, err := scene()
		if err != nil {
			return nil, err
		}
		scenes = append(scenes, s)
	}
	return scenes, nil
}

// epoch is where every scene's clock starts: on a whole minute and hour,
// so that windows begin at t=0.
var epoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

// step decides n for user at s seconds and records it.
func step(l limiters.Limiter, limiter, user string, s float64, n int, note string) Step {
	return record(decide(l, user, s, n), limiter, user, s, n, note)
}

// decide is l's decision of n for user at s seconds.
func decide(l limiters.Limiter, user string, s float64, n int) limiters.Decision {
	d, _ := l.Decide(context.Background(), limiters.Request{Key: user, N: n, At: at(s)})
	return d
}

func record(d limiters.Decision, limiter, user string, s float64, n int, note string) Step {
	st := Step{At: s, User: user, Limiter: limiter, N: n, Allowed: d.Allowed, Remaining: d.Remaining, Note: note, Shown: true}
	if !d.Allowed && d.RetryAfter != limiters.Never {
		r := d.RetryAfter.Seconds()
		st.RetryAfter = &r
	}
	if by, ok := d.DeniedBy(); ok && len(d.Policy.Limits) > 1 {
		st.DeniedBy = by.Name
	}
	return st
}

func newLimiter(a limiters.Algorithm, rates ...string) (*composite.Limiter, error) {
	limits, err := parse(rates...)
	if err != nil {
		return nil, err
	}
	return composite.New(a, limits, limiters.WithSweepInterval(-1))
}

func burstThenRefill() (Scene, error) {
	l, err := newLimiter(limiters.TokenBucket, "1/s burst 5")
	if err != nil {
		return Scene{}, err
	}
	defer l.Close()
	s := Scene{
		Title: "A burst, then the refill",
		Intro: []string{"alice has a token bucket of 5, refilled at 1 a second. She asks twice a second."},
	}
	for i := range 9 {
		note := ""
		if i == 0 {
			note = "the bucket starts full"
		}
		s.Steps = append(s.Steps, step(l, "token-bucket", "alice", float64(i)/2, 1, note))
	}
	s.Steps[8].Note = "the last whole token"
	s.Steps = append(s.Steps, step(l, "token-bucket", "alice", 4.5, 1, "half a token is not enough"))
	s.Steps = append(s.Steps, step(l, "token-bucket", "alice", 5, 1, "a whole one has refilled"))
	s.Steps = append(s.Steps, step(l, "token-bucket", "alice", 5.5, 1, "and half again is not"))
	s.Outro = []string{"The burst is spent by 4s; from then on she gets what refills: one a second, every other request."}
	return s, nil
}

func steadyState() (Scene, error) {
	l, err := newLimiter(limiters.TokenBucket, "2/s burst 10")
	if err != nil {
		return Scene{}, err
	}
	defer l.Close()
	s := Scene{
		Title: "A burst, then a steady state",
		Intro: []string{"charlie has a bucket of 10, refilled at 2 a second. He sends 11 at once, one more than it holds, then one every half second."},
	}
	for i := range 10 {
		st := step(l, "token-bucket", "charlie", 0, 1, "")
		st.Shown = i == 0 || i == 9
		s.Steps = append(s.Steps, st)
	}
	s.Steps[0].Note, s.Steps[9].Note = "the burst: all 10 at t=0", "the burst is spent"
	s.Steps = append(s.Steps, step(l, "token-bucket", "charlie", 0, 1, "an eleventh at once: denied"))
	for i := 1; i <= 6; i++ {
		s.Steps = append(s.Steps, step(l, "token-bucket", "charlie", float64(i)/2, 1, ""))
	}
	s.Steps[len(s.Steps)-1].Note = "one token refills between requests"
	s.Outro = []string{"At the refill rate he is never denied again: a bucket takes a burst and then holds the rate."}
	return s, nil
}

func isolation() (Scene, error) {
	l, err := newLimiter(limiters.TokenBucket, "1/s burst 3")
	if err != nil {
		return Scene{}, err
	}
	defer l.Close()
	s := Scene{
		Title: "Two users, kept apart",
		Intro: []string{"alice and bob each have a bucket of 3, refilled at 1 a second."},
	}
	for range 4 {
		s.Steps = append(s.Steps, step(l, "token-bucket", "alice", 0, 1, ""))
	}
	s.Steps[3].Note = "alice has spent hers"
	s.Steps = append(s.Steps,
		step(l, "token-bucket", "bob", 0, 1, "bob's is full: alice's denial is not his"),
		step(l, "token-bucket", "alice", 1, 1, "one token back"),
		step(l, "token-bucket", "bob", 1, 1, ""))
	s.Outro = []string{"Every user has a limit of their own; nobody's traffic spends anybody else's."}
	return s, nil
}

func windowEdge() (Scene, error) {
	s := Scene{
		Title: "The window edge, all six algorithms",
		Intro: []string{
			"Every algorithm gets the same limit, 5 a minute (a bucket: 5, refilled over a minute).",
			"mallory sends 5 requests one second before the minute turns, and 5 more one second after.",
		},
		Summary: &Summary{Header: []string{"algorithm", "at 0:59", "at 1:01", "in those 2 seconds", ""}},
	}
	for _, a := range limiters.Algorithms() {
		rate := "5/min"
		if a.IsBucket() {
			rate = "5/min burst 5"
		}
		l, err := newLimiter(a, rate)
		if err != nil {
			return Scene{}, err
		}
		before, after := 0, 0
		for i, t := range []float64{59, 59, 59, 59, 59, 61, 61, 61, 61, 61} {
			st := step(l, string(a), "mallory", t, 1, "")
			st.Shown = false
			s.Steps = append(s.Steps, st)
			if st.Allowed && i < 5 {
				before++
			} else if st.Allowed {
				after++
			}
		}
		l.Close()
		verdict, bad := "holds the limit", false
		if before+after > 5 {
			verdict, bad = fmt.Sprintf("%dx the limit", (before+after)/5), true
		}
		s.Summary.Rows = append(s.Summary.Rows, []string{string(a), fmt.Sprint(before, " of 5"), fmt.Sprint(after, " of 5"), fmt.Sprint(before + after), verdict})
		s.Summary.Bad = append(s.Summary.Bad, bad)
	}
	s.Outro = []string{"The fixed window forgets everything when the minute turns: 10 in two seconds.",
		"The others remember the last minute, exactly (the log) or near enough (the counter, the buckets)."}
	return s, nil
}

func parse(rs ...string) ([]limiters.Limit, error) {
	var out []limiters.Limit
	for _, r := range rs {
		l, err := limiters.ParseLimit(r)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func freeAndPremium() (Scene, error) {
	free, err := parse("5/min")
	if err != nil {
		return Scene{}, err
	}
	premium, err := parse("100/min")
	if err != nil {
		return Scene{}, err
	}
	l, err := tiers.New(tiers.Config{
		Algorithm: limiters.SlidingCounter,
		Tiers:     map[string][]limiters.Limit{"free": free, "premium": premium},
		Default:   "free",
		Users:     map[string]string{"paula": "premium"},
	}, limiters.WithSweepInterval(-1))
	if err != nil {
		return Scene{}, err
	}
	defer l.Close()
	s := Scene{
		Title: "A free user and a premium user",
		Intro: []string{"Tiers: free gets 5 a minute, premium 100 (sliding counters). paula is premium; frank is in no list, so he is free."},
	}
	for i := range 7 {
		for _, u := range []string{"frank", "paula"} {
			_, tier := l.Limits(u)
			st := step(l, tier, u, float64(i)/10, 1, "")
			st.Shown = i < 2 || i >= 4
			s.Steps = append(s.Steps, st)
		}
	}
	s.Steps[10].Note = "free: 5 a minute, spent; the counter waits for 1/5 of the next minute"
	if err := l.SetTier("frank", "premium"); err != nil {
		return Scene{}, err
	}
	s.Steps = append(s.Steps, step(l, "premium", "frank", 1, 1, "frank upgrades: a premium quota at once"))
	s.Outro = []string{"Same traffic, different limits: the tier decides, and changing it takes effect on the next request."}
	return s, nil
}

func hourly() (Scene, error) {
	rates := []string{"2/s", "60/min", "100/h"}
	l, err := newLimiter(limiters.SlidingLog, rates...)
	if err != nil {
		return Scene{}, err
	}
	defer l.Close()
	// Each limit alone, charged with what the three admitted: what each
	// holds of olga's quota.
	var each []*composite.Limiter
	for _, r := range rates[:2] {
		e, err := newLimiter(limiters.SlidingLog, r)
		if err != nil {
			return Scene{}, err
		}
		defer e.Close()
		each = append(each, e)
	}
	s := Scene{
		Title: "Three limits at once, and the hour runs out",
		Intro: []string{
			"olga's API key has 2 a second AND 60 a minute AND 100 an hour (sliding logs, all or nothing).",
			"Her script sends a request every 1.5 seconds: 40 a minute, well inside the first two limits.",
		},
	}
	t := 0.0
	for i := range 102 {
		t = 1.5 * float64(i)
		d := decide(l, "olga", t, 1)
		if d.Allowed {
			for _, e := range each {
				decide(e, "olga", t, 1)
			}
		}
		st := record(d, "2/s & 60/min & 100/h", "olga", t, 1, "")
		st.Shown = i < 2 || i >= 98
		s.Steps = append(s.Steps, st)
	}
	s.Steps[99].Note = "the hundredth this hour"
	s.Steps[100].Note = "denied until the first leaves the hour"
	s.Outro = []string{
		fmt.Sprintf("Only the hour denied. The other limits would have admitted, and were not charged: olga still has %d of her 2 a second and %d of her 60 a minute.",
			peek(each[0], "olga", t), peek(each[1], "olga", t)),
		"Each limit answers for its own window; a burst would meet the 2 a second first.",
	}
	return s, nil
}

// peek is what user has left of l's quota at s seconds.
func peek(l *composite.Limiter, user string, s float64) int {
	d, _ := l.Peek(context.Background(), limiters.Request{Key: user, N: 1, At: at(s)})
	return d.Remaining
}
