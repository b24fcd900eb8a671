package plan

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
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
	ids   []int32 // its keys, by number
}

// Shape says the class's traffic in a few words, from its typical
// envelope: steady (its most grows with the window), batches (far more in
// a minute than a second, and not much more in a quarter hour), runs (far
// more in a minute than a second, and more again in a quarter hour, but
// not steadily) or bursts.
func (c Class) Shape() string {
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
		return fmt.Sprintf("batches of about %s at %s a %s", roundWords(b), roundWords(a), lengthWords(c.Lengths[0]))
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
func classesOf(cl *clients, cs *curves, ids, refused []int32, rate int, span time.Duration) []Class {
	lengths := cs.classLengths(span)
	out := []Class{}
	isRefused := make(map[int32]bool, len(refused))
	for _, id := range refused {
		isRefused[id] = true
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
	groups := kmeans(points, 1)
	for k := 2; k <= 6 && k <= len(kept); k++ {
		next := kmeans(points, k)
		if next.sse > 0.75*groups.sse {
			break
		}
		groups = next
	}
	members := make([][]int32, groups.k)
	for i, g := range groups.of {
		members[g] = append(members[g], kept[i])
	}
	members = slices.DeleteFunc(members, func(m []int32) bool { return len(m) == 0 })
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
	return append(classes, out...)
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
	return c
}

// clustering is k-means' answer: each point's group, and the sum of the
// squared distances to the groups' centres.
type clustering struct {
	k   int
	of  []int
	sse float64
}

// kmeans groups points into k: of five tries, each its first centres
// spread by k-means++ from a seed of its own (fixed: the same log gives
// the same classes), the one that leaves the least unexplained (the
// first of those). The tries run at once, each on a core (the shop's
// 22,373 keys: 1.4 s of a plan on one).
func kmeans(points [][]float64, k int) clustering {
	var tries [5]clustering
	var wg sync.WaitGroup
	for try := range uint64(len(tries)) {
		wg.Go(func() { tries[try] = kmeansFrom(points, k, rand.New(rand.NewPCG(try+1, uint64(k)))) })
	}
	wg.Wait()
	best := tries[0]
	for _, c := range tries[1:] {
		if c.sse < best.sse {
			best = c
		}
	}
	return best
}

// kmeansFrom is one try of kmeans, its first centres drawn with rng.
func kmeansFrom(points [][]float64, k int, rng *rand.Rand) clustering {
	dist := func(a, b []float64) float64 {
		var d float64
		for i := range a {
			d += (a[i] - b[i]) * (a[i] - b[i])
		}
		return d
	}
	centres := [][]float64{slices.Clone(points[rng.IntN(len(points))])}
	near := make([]float64, len(points))
	for len(centres) < k {
		var sum float64
		for i, p := range points {
			near[i] = math.Inf(1)
			for _, c := range centres {
				near[i] = min(near[i], dist(p, c))
			}
			sum += near[i]
		}
		if sum == 0 {
			break // fewer distinct points than k
		}
		x := rng.Float64() * sum
		i := 0
		for ; i < len(points)-1 && x >= near[i]; i++ {
			x -= near[i]
		}
		centres = append(centres, slices.Clone(points[i]))
	}
	c := clustering{k: len(centres), of: make([]int, len(points))}
	for range 50 {
		moved := false
		for i, p := range points {
			best := 0
			for j := range centres {
				if dist(p, centres[j]) < dist(p, centres[best]) {
					best = j
				}
			}
			moved = moved || best != c.of[i]
			c.of[i] = best
		}
		counts := make([]int, len(centres))
		for j := range centres {
			clear(centres[j])
		}
		for i, p := range points {
			counts[c.of[i]]++
			for d := range p {
				centres[c.of[i]][d] += p[d]
			}
		}
		for j := range centres {
			for d := range centres[j] {
				centres[j][d] /= float64(max(counts[j], 1))
			}
		}
		if !moved {
			break
		}
	}
	for i, p := range points {
		c.sse += dist(p, centres[c.of[i]])
	}
	return c
}
