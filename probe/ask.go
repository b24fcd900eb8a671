package probe

import (
	"context"
	"slices"
	"time"
)

// rounds is how many rounds of experiments a probe asks at most, and
// settles how many more of the models that tie with the best, while they
// do (ask).
const rounds, settles = 4, 2

// ask runs rounds of experiments while the fit leaves models that
// explain as much as the best and would decide differently somewhere,
// each round on fresh keys, and fits again after each. When the rounds
// are spent, or the last told nothing, and the best still ties with
// another kind of limiter (which conclude then names neither of), it
// asks up to settles rounds more, of the models that tie alone, each
// experiment on enough keys to outweigh the search's noise.
func (p *prober) ask(ctx context.Context, s *search, g guess) (*search, error) {
	// lead is how long before its first request a round is designed: the
	// design must be done by then. It doubles when it was not.
	lead := 300 * time.Millisecond
	last := 0    // how many models were left to tell apart
	settled := 0 // rounds asked of the models that tie
	for round := 1; round <= rounds+settles; round++ {
		all, settling, ok := p.roundModels(s, round, last, &settled)
		if !ok {
			return s, nil
		}
		last = len(all)
		models := all[:min(len(all), 24)]
		rd, ok := p.designRound(s, models, settling, lead)
		if !ok {
			return s, nil
		}
		at, err := p.pace(rd.plan, rd.d.start)
		if err != nil {
			return s, nil // no experiment fits --max-rate
		}
		if wait := at.Sub(rd.d.start); wait > 0 {
			p.say("round %d: the round would pass --max-rate %d with the requests just sent; again, %v later", round, p.c.MaxRate, wait.Round(time.Millisecond))
			lead, last = lead+wait, 0
			continue
		}
		if late := p.x.now().Sub(rd.d.start); late > 0 {
			// Designing took longer than planned for: the instants that
			// straddle a window's edge have passed. Again, with more time.
			p.say("round %d: designing took %v longer than planned; again", round, late.Round(time.Millisecond))
			lead, last = 2*lead+late, 0
			continue
		}
		p.say("round %d: %d models explain as much; %d experiments to tell them apart (designed in %v), %d requests over %v", round, len(models), len(rd.chosen), rd.designed.Round(time.Millisecond), len(rd.plan), rd.plan[len(rd.plan)-1].At.Round(time.Millisecond))
		if _, err := p.send(ctx, rd.plan, rd.d.start, nil); err != nil {
			return s, err
		}
		rd.asked.Requests = len(rd.plan)
		p.r.Asked = append(p.r.Asked, rd.asked)
		s = p.fit(p.obs, g.around(models))
	}
	return s, nil
}

// roundModels are the models a round asks to tell apart: those within
// the search's floor of the best; or, where nothing is left to tell
// apart, the last round told nothing or the rounds are spent, the models
// that tie with the best, while settles are left (settled counts them);
// false when the asking is done.
func (p *prober) roundModels(s *search, round, last int, settled *int) ([]model, bool, bool) {
	s.tier()
	floor := 0.99
	if most := float64(s.top) / float64(max(s.decisions, 1)); most < floor {
		floor = most - 0.01
	}
	all := contenders(s, floor, 1000)
	if round <= rounds && len(all) >= 2 && (last == 0 || len(all) < last) {
		return all, false, true
	}
	if *settled == settles || !p.ties(s) {
		return nil, false, false
	}
	*settled++
	all = contenders(s, float64(s.top-s.noise())/float64(s.decisions), 1000)
	p.say("round %d: the best ties with another kind of limiter; asking the %d models that tie", round, min(len(all), 24))
	return all, true, true
}

// askRound is a round designed: its designer, the experiments chosen,
// their plan, how long designing took, and what it asks.
type askRound struct {
	d        designer
	chosen   []experiment
	plan     []request
	designed time.Duration
	asked    Round
}

// designRound designs a round to tell models apart, lead before its
// first request, within what is left of --max-time and --max-requests
// and within --max-rate (the experiments that pass it by themselves
// dropped, last first); repeated on several keys when settling a tie.
// False where no round fits.
func (p *prober) designRound(s *search, models []model, settling bool, lead time.Duration) (askRound, bool) {
	// What is left of --max-time, less what the checks will take (a key
	// spent over half a window, then asked after its wait).
	left := p.c.MaxTime - p.x.now().Sub(p.r.Start) - checksTake(models[0])
	if left < models[0].Limit.Window() {
		return askRound{}, false
	}
	rd := askRound{d: designer{u: max(p.lat+p.late, time.Millisecond), most: min(left/2, models[0].Limit.Window()*5/2+time.Second)}}
	// About 40ms of designing per model on this machine's kind, with
	// three probes at once: ask for the time it takes.
	rd.d.start = p.x.now().Add(max(lead, time.Duration(len(models))*40*time.Millisecond))
	budget := min((p.c.MaxRequests-p.requests)/2, 40*models[0].quota()+40)
	began := time.Now()
	chosen := rd.d.choose(len(models), rd.d.candidates(models), budget)
	rd.designed = time.Since(began)
	if len(chosen) == 0 {
		return askRound{}, false
	}
	if settling {
		// An experiment tells two models apart by a decision or so, and
		// the search ranks models within its noise as one: each is asked
		// on noise()+1 keys, as the budget allows.
		chosen = repeated(chosen, s.noise()+1, budget)
	}
	plan := roundPlan(chosen, rd.d.start, func() string { return "" })
	for len(chosen) > 1 && busiest(plan) > p.c.MaxRate {
		chosen = chosen[:len(chosen)-1]
		plan = roundPlan(chosen, rd.d.start, func() string { return "" })
	}
	rd.chosen, rd.plan = chosen, roundPlan(chosen, rd.d.start, func() string { return p.key("ask") })
	for _, e := range chosen {
		rd.asked.Asked = append(rd.asked.Asked, e.about)
	}
	return rd, true
}

// roundPlan is the plan of a round's experiments from start, each on a
// key of its own (key makes it), in the order sent.
func roundPlan(es []experiment, start time.Time, key func() string) []request {
	var plan []request
	for _, e := range es {
		k := key()
		for _, t := range e.at {
			plan = append(plan, request{Key: k, At: t.Sub(start)})
		}
	}
	slices.SortStableFunc(plan, func(a, b request) int { return int(a.At - b.At) })
	return plan
}

// repeated returns es times over (each copy to be asked on keys of its
// own), or as many times as budget requests allow, once at least.
func repeated(es []experiment, times, budget int) []experiment {
	n := 0
	for _, e := range es {
		n += len(e.at)
	}
	var out []experiment
	for range max(min(times, budget/max(n, 1)), 1) {
		out = append(out, es...)
	}
	return out
}

// ties reports whether the best of s ties with another kind of limiter
// that some request would tell from it (tiedOf).
func (p *prober) ties(s *search) bool {
	best := s.best()
	return len(best) > 0 && len(tiedOf(p.rivals(s, best[0].Model))) > 0
}

// checksTake is about how long the checks take after the fit names m.
func checksTake(m model) time.Duration { return m.Limit.Window()*3/2 + 2*time.Second }

// around returns g widened to take in models.
func (g guess) around(models []model) guess {
	for _, m := range models {
		if !slices.Contains(g.quotas, m.quota()) {
			g.quotas = append(g.quotas, m.quota())
		}
		t := m.time()
		s := &g.windows
		if m.Algorithm.IsBucket() {
			s = &g.intervals
		}
		s.lo, s.hi = min(s.lo, t*95/100), max(s.hi, t*105/100)
	}
	return g
}
