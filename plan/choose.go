package plan

import (
	"cmp"
	"slices"
)

// The policy chosen from the keys' curves, which it reads and never
// changes: the keys sorted into users, keys of many users and steady
// pollers; the bucket (policy.go's rules over the frontier); the keys it
// refuses; the tiers; the windows; the classes.

// curves fills the plan's envelope, frontier, policy and classes from
// each client's curves, the shared keys and the steady pollers left out
// (what it returns is the rest, which decideCurves decides): the keys
// sorted into those three, then the bucket chosen, then the keys it
// refuses, the tiers, the windows and the classes, each from the curves
// and the choice before it.
func (p *Plan) curves(cs *clients, cv *curves, decided chunks) []int32 {
	ks := keySetsOf(cs, cv, p.Config.NoTiers)
	if len(ks.users) == 0 {
		return nil
	}
	p.cv = cv
	if cv.peaks == nil { // a merged plan's come from its shards
		cv.envelopes(decided)
	}
	// The steady pollers kept apart too, as the shared keys are (where
	// every key polls, none is).
	if !p.Config.NoTiers {
		if pl, rest := cv.pollersOf(cs.all, ks.users, p.Span); len(rest) > 0 {
			ks.pollers, ks.users = pl, rest
		}
	}
	p.Users = len(ks.users)
	k, first := p.chooseBucketOf(cs, cv, ks)
	caught := p.caughtOf(cs, cv, ks.users, k)
	p.tiersOf(cs, cv, ks, k)
	var apart, pairCaught []int32
	if p.Separated {
		apart = caught
	}
	// The windows spare the pollers as they spare the rest.
	p.Windows, pairCaught = cv.windowPair(slices.Concat(ks.users, ks.pollers), apart, p.Span, p.Config)
	for _, id := range pairCaught[:min(len(pairCaught), 100)] {
		p.WindowsCaught = append(p.WindowsCaught, cs.all[id].key)
	}
	p.classesOf(cs, cv, ks, caught, k, first)
	return ks.users
}

// keySets are a log's keys as the plan treats them: the users the policy
// is chosen over, the keys that look like many users (and their
// requests), the steady pollers.
type keySets struct {
	users, many, pollers []int32
	manyRequests         int64
}

// keySetsOf sorts the keys with curves (every request of a key may have
// been dropped: --refused drop) into users and the keys of many users
// (among the users with noTiers).
func keySetsOf(cs *clients, cv *curves, noTiers bool) keySets {
	var ks keySets
	for id, cl := range cs.all {
		if id >= len(cv.of) || cv.of[id] == nil {
			continue
		}
		if cl.agents.n() >= sharedAgents && !noTiers {
			ks.many, ks.manyRequests = append(ks.many, int32(id)), ks.manyRequests+cl.requests
			continue
		}
		ks.users = append(ks.users, int32(id))
	}
	return ks
}

// chooseBucketOf finds the envelope and the frontier of the users, and
// chooses the bucket (chooseBucket); it returns the bucket's rate's index
// in the curves' and the frontier's first rate's.
func (p *Plan) chooseBucketOf(cs *clients, cv *curves, ks keySets) (k, first int) {
	c := p.Config
	maxOut := maxOutliers(len(ks.users), c.Outliers)
	p.Envelope = cv.envelope(ks.users, c.Spare, p.Span, maxOut, c.Margin)
	front := cv.frontier(ks.users, c.Spare, maxOut, c.Margin, p.Span, func(id int32) bool { return cs.all[id].agents.n() < sharedAgents })
	spares := func(k int, burst int64) bool {
		return !slices.ContainsFunc(ks.pollers, func(id int32) bool { return cv.burst(id, k) > burst })
	}
	i, burst, separated := chooseBucket(front, c.Headroom, p.Envelope[len(p.Envelope)-1].Period, spares)
	b := front[i]
	b.Burst, p.Separated = burst, separated
	p.Frontier, first = trim(front, i)
	k = slices.Index(cv.rates, b.Rate)
	b.Clients = 0
	for _, id := range ks.users {
		if cv.burst(id, k) > b.Burst {
			b.Clients++
		}
	}
	p.Bucket = b
	return k, first
}

// caughtOf are the users the bucket refuses, the most burst needed first,
// named in p (a hundred at most) with the first four's curves.
func (p *Plan) caughtOf(cs *clients, cv *curves, users []int32, k int) []int32 {
	var caught []int32
	for _, id := range users {
		if cv.burst(id, k) > p.Bucket.Burst {
			caught = append(caught, id)
		}
	}
	slices.SortFunc(caught, func(x, y int32) int { return cmp.Or(cmp.Compare(cv.burst(y, k), cv.burst(x, k)), cmp.Compare(x, y)) })
	for _, id := range caught[:min(len(caught), 100)] {
		p.Caught = append(p.Caught, cs.all[id].key)
	}
	for _, id := range caught[:min(len(caught), 4)] {
		cc := ClientCurves{Key: cs.all[id].key}
		for _, e := range p.Envelope {
			cc.Envelope = append(cc.Envelope, cv.peak(id, slices.Index(cv.periods, int64(e.Period))))
		}
		for _, f := range p.Frontier {
			cc.Bursts = append(cc.Bursts, cv.burst(id, slices.Index(cv.rates, f.Rate)))
		}
		p.CaughtCurves = append(p.CaughtCurves, cc)
	}
	return caught
}

// tiersOf gives the keys of many users and the pollers their tiers: the
// bucket of rate k scaled to spare them.
func (p *Plan) tiersOf(cs *clients, cv *curves, ks keySets, k int) {
	b := p.Bucket
	if len(ks.many) > 0 {
		p.SharedTier = tierOf(cv, ks.many, k, b.Burst)
		p.SharedTier.Keys, p.SharedTier.Share = len(ks.many), float64(ks.manyRequests)/float64(max(p.Requests, 1))
	}
	if len(ks.pollers) > 0 {
		p.PollerTier = tierOf(cv, ks.pollers, k, b.Burst)
		p.PollerTier.Keys, p.PollerTier.Share = len(ks.pollers), float64(requestsOf(cs, ks.pollers))/float64(max(p.Requests, 1))
		p.Pollers = clientsOf(cs, ks.pollers, maxTierKeys) // each in its tier, not the tables' few
	}
}

// classesOf groups the users (classesOf) and the pollers, each class's
// curves cut to the frontier's and the envelope's, as the tables and
// charts show them.
func (p *Plan) classesOf(cs *clients, cv *curves, ks keySets, caught []int32, k, first int) {
	p.Classes = classesOf(cs, cv, ks.users, caught, k, p.Span, p.Config.Outliers)
	if len(ks.pollers) > 0 {
		pc := cv.classOf(cs, ks.pollers, cv.classLengths(p.Span), k, p.Span)
		pc.Every, pc.Paths = cv.pollEvery(cs.all, ks.pollers, p.Span), maxPaths(cs, ks.pollers)
		p.Classes = append(p.Classes, pc)
	}
	for i := range p.Classes {
		c := &p.Classes[i]
		c.Bursts, c.Envelope = c.Bursts[first:first+len(p.Frontier)], c.Envelope[:len(p.Envelope)]
	}
}
