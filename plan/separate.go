package plan

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Where keys stand apart at one rate. Sorted by their least bursts there,
// the keys show gaps; which one the policy's burst goes in is what a
// person would choose:
//
//   - a few keys above a gap (Config.Outliers of them at most) are set
//     apart, whatever they are: a scraper, a runaway, a greedy batch;
//   - many keys above it (a botnet of residential addresses, the same
//     software on each, is often several percent of the keys) only where
//     they sustain their excess, their need growing with the log (each
//     needs most over a stretch of sustainedStretch or longer), while the
//     keys below need no more than a burst: at a rate above every
//     customer's long-run rate, not below one, where a steady customer's
//     need grows with the log too;
//   - not under a class of several near-identical keys whose need is a
//     burst's (integrations' batches, bounded whatever the log's length)
//     when a gap above that class sets the rest apart by far more
//     (Config.Margin times as wide, or more): the class is customers.

// maxGroupShare is the share of the keys a policy may set apart at one
// rate when they sustain their excess: a botnet's.
const maxGroupShare = 0.2

// sustainedStretch is how long a stretch a key's need at a rate comes
// from, at least, for it to sustain its excess there: longer than a
// session's burst of pages or a batch, as long as a scraper's run.
const sustainedStretch = 5 * time.Minute

// minClass is how many near-identical keys make a class of customers
// between two gaps.
const minClass = 3

// keyNeed is a key's least burst at one rate.
type keyNeed struct {
	id   int32
	need int64
}

// separation is what separateKeys judges keys by at one rate: whether a
// key sustains its excess there.
type separation struct {
	maxOut, maxGroup int
	margin           float64
	sustained        func(id int32) bool
	// oneClient says a key is one client, not many users (few agents).
	oneClient func(id int32) bool
	// heavy says whether keys above a boundary are a heavy class of
	// customers rather than a group of abusers: at a higher rate, none
	// sustaining its excess there, they still stand margin apart from
	// the keys below (their need is a batch's, bounded and large; an
	// abuser's falls among the rest once the rate passes its own).
	heavy func(above, below []keyNeed) bool
}

// separateKeys finds where, in v (sorted by need, ascending), keys stand
// apart from all the rest, as the rules above say: of the boundaries
// each at least margin wide (and minApart), the lowest that may set its
// keys apart, but for one under a class of customers. When none is, it
// returns the widest boundary with at most maxOut above, and false.
func (s separation) separateKeys(v []keyNeed) (Gap, bool) {
	n := len(v)
	gapAt := func(i int) Gap { // v[:i+1] kept, v[i+1:] out
		return Gap{Kept: i + 1, Out: n - 1 - i, KeptMost: max(v[i].need, 1), OutLeast: v[i+1].need}
	}
	var candidates []int
	for i := max(n-1-max(s.maxOut, s.maxGroup), 0); i < n-1; i++ {
		g := gapAt(i)
		if g.Ratio() >= s.margin && g.OutLeast-g.KeptMost >= minApart && s.mayApart(v, i) {
			candidates = append(candidates, i)
		}
	}
	for j, i := range candidates {
		if j+1 < len(candidates) && s.customersBetween(v, i, candidates[j+1]) {
			continue
		}
		return gapAt(i), true
	}
	var widest Gap
	for i := max(n-1-s.maxOut, 0); i < n-1; i++ {
		if g := gapAt(i); g.Ratio() > widest.Ratio() {
			widest = g
		}
	}
	return widest, false
}

// mayApart says whether the keys above boundary i of v may be set apart:
// a few, whatever they are; more, up to maxGroup, where they are a group
// of alike keys (minClass or more within groupSpread of each other's
// need, each one client: a botnet's addresses each run one software,
// where a key of many agents is many users) and a few others, all but a
// few sustaining their excess, and no heavy class of customers.
func (s separation) mayApart(v []keyNeed, i int) bool {
	out := len(v) - 1 - i
	if out <= s.maxOut {
		return true
	}
	if out > s.maxGroup || s.sustained == nil {
		return false
	}
	// A key of many users is set apart among a few, never with a group.
	if s.oneClient != nil && slices.ContainsFunc(v[i+1:], func(k keyNeed) bool { return !s.oneClient(k.id) }) {
		return false
	}
	if alike := mostAlike(v[i+1:]); alike < minClass || out-alike > s.maxOut {
		return false
	}
	count := func(keys []keyNeed) (n int) {
		for _, k := range keys {
			if s.sustained(k.id) {
				n++
			}
		}
		return n
	}
	return out-count(v[i+1:]) <= min(fewKeys, s.maxOut) && (s.heavy == nil || !s.heavy(v[i+1:], v[:i+1]))
}

// customersBetween says whether the keys between boundaries i and next
// of v are a class of customers: minClass or more, near-identical (the
// most within twice the least), none sustaining its excess, under a gap
// margin times as wide as the one below them.
func (s separation) customersBetween(v []keyNeed, i, next int) bool {
	between := v[i+1 : next+1]
	if len(between) < minClass || between[len(between)-1].need > 2*between[0].need {
		return false
	}
	if s.sustained != nil && slices.ContainsFunc(between, func(k keyNeed) bool { return s.sustained(k.id) }) {
		return false
	}
	ratio := func(j int) float64 { return float64(v[j+1].need) / float64(max(v[j].need, 1)) }
	return ratio(next) >= s.margin*ratio(i)
}

// groupSpread is how far apart, at most, the needs of a group of alike
// keys are: one software on many addresses, each running for its own
// stretch of the log.
const groupSpread = 3

// mostAlike is how many of v (sorted by need) are alike at most: within
// groupSpread of each other.
func mostAlike(v []keyNeed) int {
	most := 0
	for i, j := 0, 0; j < len(v); j++ {
		for float64(v[j].need) > groupSpread*float64(max(v[i].need, 1)) {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// separate finds where, in v (sorted ascending), a few values stand apart
// from all the rest: of the boundaries with at most maxOut values above,
// those that are at least margin apart (and minApart), the lowest: an
// abuser far above another is still one of those the rest stand apart
// from. When none is, it returns the widest boundary with at most maxOut
// above, and false. (The envelope's gaps at each window length.)
func separate(v []int64, maxOut int, margin float64) (Gap, bool) {
	var widest Gap
	n := len(v)
	for i := max(n-1-maxOut, 0); i < n-1; i++ { // v[:i+1] kept, v[i+1:] out
		g := Gap{Kept: i + 1, Out: n - 1 - i, KeptMost: max(v[i], 1), OutLeast: v[i+1]}
		if g.Ratio() >= margin && g.OutLeast-g.KeptMost >= minApart {
			return g, true
		}
		if g.Ratio() > widest.Ratio() {
			widest = g
		}
	}
	return widest, false
}

// maxOutliers is how many of n keys a separation may set apart whatever
// they are: the share outliers of them, and always a handful (a few
// abusers of a few hundred keys are more than 1% of them), but never
// more than a tenth.
func maxOutliers(n int, outliers float64) int {
	return max(min(fewKeys, n/10), 1, int(math.Floor(outliers*float64(n))))
}

// fewKeys is how many keys are a few, whatever the share.
const fewKeys = 5

// sustains says whether key id sustains its excess at rate k: the stretch
// its need there comes from is sustainedStretch or longer, as its
// envelope tells (the length, of those the log reaches, at which its most
// in a window less the rate times the window is the greatest).
func (cs *curves) sustains(id int32, k int, span time.Duration) bool {
	T := float64(cs.intervals[k])
	best, at := math.Inf(-1), int64(0)
	for j, d := range cs.lengths {
		if time.Duration(d) > span && j > 0 {
			break
		}
		if x := float64(cs.peaks[int(id)*len(cs.lengths)+j]) - float64(d)/T; x > best {
			best, at = x, d
		}
	}
	return time.Duration(at) >= sustainedStretch
}

// sortedNeeds is the keys ids' least bursts at rate k, ascending (then by
// number).
func (cs *curves) sortedNeeds(ids []int32, k int) []keyNeed {
	v := make([]keyNeed, len(ids))
	for i, id := range ids {
		v[i] = keyNeed{id, cs.burst(id, k)}
	}
	slices.SortFunc(v, func(a, b keyNeed) int { return cmp.Or(cmp.Compare(a.need, b.need), cmp.Compare(a.id, b.id)) })
	return v
}

// heavyAbove is separation.heavy at rate k: at some rate above it, more
// than a handful of the keys above no longer sustain their excess (nor
// more than maxOut), and the least
// any of those needs is margin times the most any key of below does (and
// minApart more).
func (cs *curves) heavyAbove(k, maxOut int, margin float64, span time.Duration) func(above, below []keyNeed) bool {
	return func(above, below []keyNeed) bool {
		for j := k + 1; j < len(cs.intervals); j++ {
			least, bounded := int64(math.MaxInt64), 0
			for _, a := range above {
				if !cs.sustains(a.id, j, span) {
					least, bounded = min(least, cs.burst(a.id, j)), bounded+1
				}
			}
			if bounded <= min(fewKeys, maxOut) {
				continue
			}
			var most int64 = 1
			for _, b := range below {
				most = max(most, cs.burst(b.id, j))
			}
			if float64(least) >= margin*float64(most) && least-most >= minApart {
				return true
			}
		}
		return false
	}
}
