package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// A Class is keys whose traffic has one shape, so that a person sees why
// the policy's line is where it is and can move it: how many keys, their
// share of the requests, what a typical one sends in about a second, a
// minute and a quarter hour, and what the most demanding one needs at the
// suggested rate. A key the policy refuses is a class of its own, named.
type Class struct {
	// Key is the one key of a refused key's class; empty for a group.
	Key      string
	Keys     int
	Requests int64
	// Typical is the median over its keys of the most each sent in any
	// window of each of Lengths; Rate the median of their requests a
	// second over the log.
	Lengths []time.Duration
	Typical []int64
	Rate    float64
	// Need is the most any of its keys needs at the suggested rate;
	// Bursts, at each of the curves' rates, the least, median and most of
	// its keys' least bursts; Envelope the same at each period.
	Need     int64
	Bursts   [][3]int64
	Envelope [][3]int64
	Refused  bool
	// Every is how often a class of steady pollers polls (0 for another
	// class), Paths how many paths each asks for at most.
	Every time.Duration
	Paths int
	// Period is how often a class of batches sends one, about (0: once,
	// or not batches).
	Period time.Duration
	// more is what tells it from a class whose shape reads the same
	// ("about 20 a minute"), if one does (nameClasses).
	more string
	ids  []int32 // its keys, by number
}

// Shape says the class's traffic in a few words, from its typical
// envelope: steady (its most grows with the window), batches (far more in
// a minute than a second, and not much more in a quarter hour), runs (far
// more in a minute than a second, and more again in a quarter hour, but
// not steadily) or bursts.
func (c Class) Shape() string {
	if c.more != "" {
		return c.shapeWords() + ", " + c.more
	}
	return c.shapeWords()
}

func (c Class) shapeWords() string {
	if c.Every > 0 {
		paths := "one path"
		if c.Paths > 1 {
			paths = fmt.Sprintf("%d paths", c.Paths)
		}
		return fmt.Sprintf("polling %s every %s", paths, everyWords(c.Every))
	}
	a, b := float64(c.Typical[0]), float64(c.Typical[min(1, len(c.Typical)-1)])
	switch c.shape() {
	case steady:
		return fmt.Sprintf("steady, about %s a %s", roundWords(b), lengthWords(c.Lengths[1]))
	case batches:
		every := ""
		switch {
		case c.Period == time.Hour:
			every = ", hourly"
		case c.Period > 0:
			every = ", every " + everyWords(c.Period)
		}
		return fmt.Sprintf("batches of about %s at %s a %s%s", roundWords(b), roundWords(a), lengthWords(c.Lengths[0]), every)
	case runs:
		return fmt.Sprintf("runs of about %s a %s", roundWords(b), lengthWords(c.Lengths[1]))
	}
	return fmt.Sprintf("bursts of about %s", roundWords(a))
}

// The shapes a class's traffic is said in.
const (
	bursts = iota
	steady
	batches
	runs // steady for a while, then not
)

func (c Class) shape() int {
	if len(c.Typical) < 3 {
		return bursts
	}
	a, b, l := float64(c.Typical[0]), float64(c.Typical[1]), float64(c.Typical[2])
	grow := c.Lengths[2].Seconds() / c.Lengths[1].Seconds()
	switch {
	case l/b >= 0.5*grow && b >= 3:
		return steady
	case b >= 10*a && l < 2.5*b:
		return batches
	case b >= 10*a:
		return runs
	}
	return bursts
}

// alike reports whether two classes read as one: the same shape, and
// within twice each other in what the most demanding needs and in what a
// typical key sends in the shorter windows (how much it sends over a
// quarter hour, how long it stays, is a user's more or less, not a
// class's).
func alike(x, y Class) bool {
	near := func(a, b int64) bool { return max(a, 1) <= 2*max(b, 1) && max(b, 1) <= 2*max(a, 1) }
	if x.shape() != y.shape() || !near(x.Need, y.Need) {
		return false
	}
	for i := range x.Typical[:min(2, len(x.Typical))] {
		if !near(x.Typical[i], y.Typical[i]) {
			return false
		}
	}
	return true
}

// roundWords is v to two significant digits, as a person says it.
func roundWords(v float64) string {
	if v < 10 {
		return fmt.Sprint(math.Round(v))
	}
	scale := math.Pow(10, math.Floor(math.Log10(v))-1)
	return fmt.Sprint(math.Round(v/scale) * scale)
}

// lengthWords is a window's length in words: "second", "minute", "15m0s".
func lengthWords(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	}
	return d.String()
}

// classLengths are the periods of cs the classes are described by: those
// nearest a second, a minute and a quarter hour that span reaches, each
// once, in order.
func (cs *curves) classLengths(span time.Duration) []int {
	var out []int
	for _, want := range []time.Duration{time.Second, time.Minute, 15 * time.Minute} {
		best, dist := -1, math.Inf(1)
		for k, d := range cs.periods {
			if k > 0 && time.Duration(d) > span {
				break
			}
			if x := math.Abs(math.Log(float64(d) / float64(want))); x < dist {
				best, dist = k, x
			}
		}
		if best >= 0 && !slices.Contains(out, best) {
			out = append(out, best)
		}
	}
	return out
}

// classesOf groups the keys ids, but those refused (each a class of its
// own, first), by the shape of their envelope: k-means over the logarithm
// of their most in about a second, a minute and a quarter hour and of
// their rate over the log, a class more while it leaves at most 75% of
// what is left unexplained (at most six: on the B2B API's log 27% for
// two, 54% for three, 70% for four), then the groups that read as one
// (alike) merged.
func classesOf(cl *clients, cs *curves, ids, refused []int32, rate int, span time.Duration, outliers float64) []Class {
	lengths := cs.classLengths(span)
	out := []Class{}
	isRefused := make(map[int32]bool, len(refused))
	group, alone := cs.refusedGroup(refused, rate, maxOutliers(len(ids), outliers))
	if len(group) > 0 {
		c := cs.classOf(cl, group, lengths, rate, span)
		c.Refused = true
		out = append(out, c)
	}
	for _, id := range refused {
		isRefused[id] = true
	}
	for _, id := range alone {
		c := cs.classOf(cl, []int32{id}, lengths, rate, span)
		c.Key, c.Refused = cl.all[id].key, true
		out = append(out, c)
	}
	var kept []int32
	for _, id := range ids {
		if !isRefused[id] {
			kept = append(kept, id)
		}
	}
	if len(kept) == 0 {
		return out
	}
	// By k-means, then each group's keys of a shape of their own that
	// send far more or less apart (a dozen partners' batches among a
	// thousand app users are lost to k-means, which splits the large
	// class first).
	var members [][]int32
	for _, g := range cs.kmeansClasses(kept, lengths, span) {
		members = append(members, cs.byShape(g, lengths)...)
	}
	// Then the groups that read as one class are one: k-means splits a
	// large class of a wide spread before it finds a small one apart.
	for merged := true; merged; {
		merged = false
		for i := 0; i < len(members) && !merged; i++ {
			for j := i + 1; j < len(members) && !merged; j++ {
				if alike(cs.classOf(cl, members[i], lengths, rate, span), cs.classOf(cl, members[j], lengths, rate, span)) {
					members[i] = append(members[i], members[j]...)
					members = slices.Delete(members, j, j+1)
					merged = true
				}
			}
		}
	}
	var classes []Class
	for _, m := range members {
		classes = append(classes, cs.classOf(cl, m, lengths, rate, span))
	}
	slices.SortStableFunc(classes, func(a, b Class) int { return cmp.Or(cmp.Compare(b.Keys, a.Keys), cmp.Compare(a.Need, b.Need)) })
	nameClasses(classes)
	return append(classes, out...)
}

// refusedGroup is, of the keys refused (the most needed first), a group
// of alike ones where more are refused than a few (maxOut, and a handful
// at least: a group set them apart): the most of them
// within groupSpread of each other's need at rate, minClass at least (a
// botnet's addresses, said as one class); and the others, each a class of
// its own.
func (cs *curves) refusedGroup(refused []int32, rate, maxOut int) (group, alone []int32) {
	if len(refused) <= max(fewKeys, maxOut) {
		return nil, refused
	}
	v := cs.sortedNeeds(refused, rate)
	lo, hi := 0, 0
	for i, j := 0, 0; j < len(v); j++ {
		for float64(v[j].need) > groupSpread*float64(max(v[i].need, 1)) {
			i++
		}
		if j-i > hi-lo {
			lo, hi = i, j
		}
	}
	if hi-lo+1 < minClass {
		return nil, refused
	}
	in := map[int32]bool{}
	for _, k := range v[lo : hi+1] {
		in[k.id] = true
	}
	for _, id := range refused {
		if in[id] {
			group = append(group, id)
		} else {
			alone = append(alone, id)
		}
	}
	return group, alone
}

// byShape parts the keys ids of one group by the shape of each one's own
// envelope at lengths (Class.shape's): a shape of minShapeKeys keys or
// more whose typical key sends shapeApart times more, or less, than the
// rest's in a window of one of the lengths is a class of its own (the
// partners' batches of 150 in a minute among app users' 20); the others
// stay (a user who stayed long reads as steady, and is a user).
func (cs *curves) byShape(ids []int32, lengths []int) [][]int32 {
	shapes := make([][]int32, runs+1)
	for _, id := range ids {
		c := Class{Typical: make([]int64, len(lengths))}
		for i, k := range lengths {
			c.Lengths = append(c.Lengths, time.Duration(cs.periods[k]))
			c.Typical[i] = cs.peak(id, k)
		}
		shapes[c.shape()] = append(shapes[c.shape()], id)
	}
	median := func(ids []int32, k int) float64 {
		v := make([]int64, len(ids))
		for i, id := range ids {
			v[i] = cs.peak(id, k)
		}
		slices.Sort(v)
		return float64(max(v[(len(v)-1)/2], 1))
	}
	var out [][]int32
	rest := ids
	for _, part := range shapes {
		if len(part) < minShapeKeys || len(part) == len(rest) {
			continue
		}
		inPart := make(map[int32]bool, len(part))
		for _, id := range part {
			inPart[id] = true
		}
		others := slices.DeleteFunc(slices.Clone(rest), func(id int32) bool { return inPart[id] })
		if slices.ContainsFunc(lengths, func(k int) bool {
			a, b := median(part, k), median(others, k)
			return a >= shapeApart*b || b >= shapeApart*a
		}) {
			out, rest = append(out, part), others
		}
	}
	return append(out, rest)
}

// shapeApart is how far apart a shape's keys send from the rest of their
// group to be a class of their own.
const shapeApart = 3

// minShapeKeys is how many keys of one shape make a class of their own.
const minShapeKeys = 5

// kmeansClasses groups the keys ids by k-means over the logarithm of
// their most at lengths and at the longest length the log reaches, and
// of their rate over the log: a class more while it leaves at most 75%
// of what is left unexplained, six at most.
func (cs *curves) kmeansClasses(kept []int32, lengths []int, span time.Duration) [][]int32 {
	// The features: the envelope at those lengths and at the longest the
	// log reaches (an hour: a relay's steady 700 against a dashboard's
	// sessions of 200), and the rate over the log.
	features := slices.Clone(lengths)
	for k := len(cs.periods) - 1; k >= 0; k-- {
		if k == 0 || time.Duration(cs.periods[k]) <= span {
			if !slices.Contains(features, k) {
				features = append(features, k)
			}
			break
		}
	}
	points := make([][]float64, len(kept))
	for i, id := range kept {
		p := make([]float64, 0, len(features)+1)
		for _, k := range features {
			p = append(p, math.Log10(float64(max(cs.peak(id, k), 1))))
		}
		points[i] = append(p, math.Log10(max(float64(cs.of[id].total)/max(span.Seconds(), 1), 1e-4)))
	}
	groups := kmeansAll(points, 1)
	for k := 2; k <= 6 && k <= len(kept); k++ {
		next := kmeansAll(points, k)
		if next.sse > 0.75*groups.sse {
			break
		}
		groups = next
	}
	members := make([][]int32, groups.k)
	for i, g := range groups.of {
		members[g] = append(members[g], kept[i])
	}
	return slices.DeleteFunc(members, func(m []int32) bool { return len(m) == 0 })
}

// classOf describes the keys ids as one class.
func (cs *curves) classOf(cl *clients, ids []int32, lengths []int, rate int, span time.Duration) Class {
	c := Class{Keys: len(ids), ids: ids}
	v := make([]int64, len(ids))
	spread := func(of func(int32) int64) [3]int64 {
		for i, id := range ids {
			v[i] = of(id)
		}
		slices.Sort(v)
		return [3]int64{v[0], v[(len(v)-1)/2], v[len(v)-1]}
	}
	for _, id := range ids {
		c.Requests += cl.all[id].requests
	}
	for _, k := range lengths {
		c.Lengths = append(c.Lengths, time.Duration(cs.periods[k]))
		c.Typical = append(c.Typical, spread(func(id int32) int64 { return cs.peak(id, k) })[1])
	}
	rates := make([]float64, len(ids))
	for i, id := range ids {
		rates[i] = float64(cs.of[id].total) / max(span.Seconds(), 1)
	}
	slices.Sort(rates)
	c.Rate = rates[(len(rates)-1)/2]
	for k := range cs.intervals {
		c.Bursts = append(c.Bursts, spread(func(id int32) int64 { return cs.burst(id, k) }))
	}
	for k := range cs.periods {
		c.Envelope = append(c.Envelope, spread(func(id int32) int64 { return cs.peak(id, k) }))
	}
	c.Need = c.Bursts[rate][2]
	if c.shape() == batches {
		// The first window that holds two of a typical key's batches.
		for k, d := range cs.periods {
			if time.Duration(d) > c.Lengths[1] && time.Duration(d) <= span && float64(c.Envelope[k][1]) >= 1.8*float64(c.Typical[1]) {
				c.Period = time.Duration(d)
				break
			}
		}
	}
	return c
}

// nameClasses tells apart the classes whose shapes read the same: each of
// them is said with the first of these that differs among them, as a
// person rounds it: its most in a minute, in a quarter hour, its rate
// over the log, its keys.
func nameClasses(classes []Class) {
	same := map[string][]int{}
	for i, c := range classes {
		if !c.Refused {
			same[c.Shape()] = append(same[c.Shape()], i)
		}
	}
	for _, idx := range same {
		if len(idx) < 2 {
			continue
		}
		for _, more := range []func(c Class) string{
			func(c Class) string {
				return fmt.Sprintf("about %s a %s", roundWords(float64(c.Typical[min(1, len(c.Typical)-1)])), lengthWords(c.Lengths[min(1, len(c.Lengths)-1)]))
			},
			func(c Class) string {
				return fmt.Sprintf("%s in %s", roundWords(float64(c.Typical[len(c.Typical)-1])), lengthWords(c.Lengths[len(c.Lengths)-1]))
			},
			func(c Class) string { return fmt.Sprintf("%.2g a second over the log", c.Rate) },
			func(c Class) string { return fmt.Sprintf("%d keys", c.Keys) },
		} {
			seen := map[string]bool{}
			for _, i := range idx {
				seen[more(classes[i])] = true
			}
			if len(seen) == len(idx) {
				for _, i := range idx {
					classes[i].more = more(classes[i])
				}
				break
			}
		}
	}
}
