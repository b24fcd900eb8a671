// Package probe judges a rate limiter behind HTTP from the outside, by
// what it answers: which of the six algorithms it behaves as, with what
// limit and in which of the variants real implementations use, whether
// its fields and waits tell the truth, and whether it holds under
// concurrency. When none of the six explains what it did, it says so.
//
// The package keeps a fourth copy of the algorithms (after the in-memory
// limiters, the Redis scripts and the tests' rational models), the
// Models. It exists because a fit needs what a limiter does not offer: a
// decision at any instant that leaves the key as it was, a history
// recorded at instants the fit chooses, and the variants real
// implementations use and ratelab's own do not: windows started at a
// key's first request, refusals counted, a window started again by a
// refusal, a weighted count rounded or truncated, and time kept in whole
// seconds. TestModelsAgree checks the exact variants against the
// in-memory limiters on random traces.
package probe

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// model is one way a limiter may decide: an algorithm and its limit, and
// the variants real implementations differ in. The token bucket, the
// leaky bucket and GCRA are one policy (the same decisions for the same
// limit); a model of any of the three decides as GCRA.
type model struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// Anchored: a window algorithm's windows start at a key's first
	// request (the first after the last window ended), as stores that
	// keep a key with a time to live do; otherwise they are aligned on
	// the Unix epoch.
	Anchored bool
	// CountsRefused: a refused request is counted too, as by a store that
	// adds and then compares (for a bucket, a refusal runs its debt on).
	CountsRefused bool
	// Restarts: a refused request starts an anchored fixed window again,
	// so that a key that keeps sending stays refused until it has been
	// quiet for a window (@fastify/rate-limit's continueExceeding).
	Restarts bool
	// Seconds: time is kept in whole seconds, rounded down, as by stores
	// that read the clock in seconds.
	Seconds bool
	// Rounding is how a sliding counter compares its weighted count.
	Rounding rounding
	// Phase is where the windows of a fixed window or a sliding counter
	// not anchored start,
	// after the epoch's: the same for every key, at an instant of the
	// limiter's own (a ticker that clears every count, a library that
	// aligns its windows to its start). 0: on the epoch.
	Phase time.Duration
	// Nginx: a bucket on nginx's clock (limit_req): time in whole
	// milliseconds, the refill since a key's last admission in whole
	// thousandths of a request at a rate in thousandths a second rounded
	// down (40r/m refills 666 a second, not 666.67). A key pressed at 47
	// a second beside a zone of 299 a minute refills that zone 104
	// thousandths an admission, not 104.6: 0.6% slower, a request in 170.
	Nginx bool
	// Also is a second limit the target keeps on the same key, of
	// AlsoAlgorithm (empty: the model's), plain: a request is admitted
	// only if both admit it, and a refusal consumes from neither (as
	// composite decides, and nginx's two limit_req lines). Zero: none.
	Also          limiters.Limit
	AlsoAlgorithm limiters.Algorithm
}

// second is m's second limit as a model of its own (plain), and whether
// it has one.
func (m model) second() (model, bool) {
	if m.Also.N == 0 {
		return model{}, false
	}
	o := model{Algorithm: cmp.Or(m.AlsoAlgorithm, m.Algorithm), Limit: m.Also}
	o.Nginx = m.Nginx && o.Algorithm.IsBucket() // one server's clock
	return o, true
}

// first is m without its second limit.
func (m model) first() model {
	m.Also, m.AlsoAlgorithm = limiters.Limit{}, ""
	return m
}

// rounding is how a sliding window counter rounds the previous window's
// weighted count before it compares.
type rounding int8

const (
	// exact compares the weighted count as a real number (as ratelab
	// does; rounding it up is the same).
	exact rounding = iota
	// rounded rounds it to the nearest whole request, halves up.
	rounded
	// truncated rounds it down.
	truncated
)

// String names the model as the probe's tables do: "gcra 10/s burst 6",
// "fixed-window 20/2s, first request, refusals counted".
func (m model) String() string {
	s := []string{string(m.Algorithm) + " " + m.Limit.String()}
	s = append(s, m.variants()...)
	if o, ok := m.second(); ok {
		return strings.Join(s, ", ") + "; and " + o.String()
	}
	return strings.Join(s, ", ")
}

// variants names what m does that the exact, epoch-aligned model of its
// algorithm does not.
func (m model) variants() []string {
	var out []string
	if m.Anchored {
		out = append(out, "windows from a key's first request")
	}
	if m.Restarts {
		out = append(out, "a refusal restarts the window")
	} else if m.CountsRefused {
		out = append(out, "refusals counted")
	}
	switch m.Rounding {
	case rounded:
		out = append(out, "weighted count rounded")
	case truncated:
		out = append(out, "weighted count truncated")
	}
	if m.Seconds {
		out = append(out, "time in whole seconds")
	}
	if m.Nginx {
		out = append(out, "on nginx's clock (whole milliseconds and thousandths of a request)")
	}
	switch {
	case m.Phase < 0:
		out = append(out, "windows at a phase of their own")
	case m.Phase > 0:
		out = append(out, phaseText(m.Limit.Per, m.Phase))
	}
	return out
}

// kind is m's variants as a kind of limiter: a phase of its own is one
// kind, whatever the phase (as a limit is one kind, whatever the rate).
func (m model) kind() []string {
	if m.Phase != 0 {
		m.Phase = -1
	}
	return m.variants()
}

// phaseText says where windows of w at a phase of their own start, as a
// clock reads it: "windows starting at :00.700 past each even second",
// "... past each minute", "... past each multiple of 10s"; or "windows
// starting 700ms into the epoch's" where w is no whole divisor of a
// minute.
func phaseText(w, phase time.Duration) string {
	at := fmt.Sprintf("windows starting at :%06.3f past each ", phase.Seconds())
	switch {
	case w == time.Second:
		return at + "second"
	case w == 2*time.Second:
		return at + "even second"
	case w == time.Minute:
		return at + "minute"
	case w%time.Second == 0 && time.Minute%w == 0:
		return at + "multiple of " + w.String()
	}
	return fmt.Sprintf("windows starting %v into the epoch's", phase)
}

// Family is the policy the model's algorithm belongs to: the three
// buckets are one ("bucket"); each window algorithm is its own.
func (m model) Family() string { return family(m.Algorithm) }

func family(a limiters.Algorithm) string {
	if a.IsBucket() {
		return "bucket"
	}
	return string(a)
}

// Validate reports whether the model can be replayed: a limit its
// algorithm takes, and each variant on an algorithm that has it; a second
// limit longer than the first.
func (m model) Validate() error {
	if o, ok := m.second(); ok {
		if err := o.Validate(); err != nil {
			return err
		}
		if o.Limit.Window() <= m.Limit.Window() {
			return fmt.Errorf("probe: %s: the second limit's window is the longer", m)
		}
	}
	if err := m.Limit.Validate(m.Algorithm); err != nil {
		return fmt.Errorf("probe: %s: %w", m, err)
	}
	a := m.Algorithm
	switch {
	case m.Anchored && (a.IsBucket() || a == limiters.SlidingLog):
		return fmt.Errorf("probe: %s: a %s has no windows to anchor", m, a)
	case m.Restarts && (a != limiters.FixedWindow || !m.Anchored):
		return fmt.Errorf("probe: %s: only an anchored fixed window restarts", m)
	case m.Nginx && (!a.IsBucket() || m.CountsRefused || m.Seconds):
		return fmt.Errorf("probe: %s: only a plain bucket keeps nginx's clock", m)
	case m.Rounding != exact && a != limiters.SlidingCounter:
		return fmt.Errorf("probe: %s: only a sliding counter weighs a count", m)
	case m.Phase != 0 && (a != limiters.FixedWindow && a != limiters.SlidingCounter || m.Anchored || m.Seconds || m.Phase < 0 || m.Phase >= m.Limit.Per):
		return fmt.Errorf("probe: %s: only the windows of a fixed window or a sliding counter on a clock of its own have a phase, within a window", m)
	}
	return nil
}

// allVariants returns every variant of algorithm a the fit tries, the exact
// and simplest first, with no limit set.
func allVariants(a limiters.Algorithm) []model {
	var out []model
	for _, seconds := range []bool{false, true} {
		switch a {
		case limiters.FixedWindow:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, Anchored: true, Seconds: seconds},
				model{Algorithm: a, Anchored: true, CountsRefused: true, Restarts: true, Seconds: seconds})
		case limiters.SlidingLog:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, CountsRefused: true, Seconds: seconds})
		case limiters.SlidingCounter:
			for _, r := range []rounding{exact, rounded, truncated} {
				for _, anchored := range []bool{false, true} {
					for _, counts := range []bool{false, true} {
						out = append(out, model{Algorithm: a, Anchored: anchored, CountsRefused: counts, Seconds: seconds, Rounding: r})
					}
				}
			}
		default:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, CountsRefused: true, Seconds: seconds})
		}
	}
	return out
}

// oddity is how far m is from its algorithm's plain form: the number of
// variants it has. Among models that explain as much, the plainer wins.
func (m model) oddity() int { return len(m.variants()) }

// state is one key's state under a model, at times in Unix nanoseconds
// (the epoch is where the aligned windows start). admits reports whether
// n units would be admitted at t; for every model it is monotone in t for
// a given state (waiting never turns an admission into a refusal), which
// is what lets the fit look for an instant in an interval by bisection.
// admit records n admitted at t whatever the model would decide, and
// refuse a refusal.
type state interface {
	admits(t int64, n int) bool
	admit(t int64, n int)
	refuse(t int64, n int)
	clone() state
}

// newState returns a fresh key's state under m.
func (m model) newState() state {
	if o, ok := m.second(); ok {
		return &both{m.first().newState(), o.newState()}
	}
	n, per := int64(m.Limit.N), int64(m.Limit.Per)
	var st state
	switch {
	case m.Algorithm.IsBucket() && m.Nginx:
		st = &nginxBucket{rate: n * 1000 * int64(time.Second) / per, most: int64(m.Limit.Quota()-1) * 1000, fresh: true}
	case m.Algorithm.IsBucket():
		t := int64(m.Limit.Interval())
		st = &bucket{t: t, ct: int64(m.Limit.Quota()) * t, c: m.Limit.Quota(), tat: math.MinInt64, counts: m.CountsRefused}
	case m.Algorithm == limiters.FixedWindow:
		st = &fixed{n: n, per: per, phase: int64(m.Phase), anchored: m.Anchored, restarts: m.Restarts}
	case m.Algorithm == limiters.SlidingLog:
		st = &slidingLog{n: int(n), per: per, counts: m.CountsRefused}
	case m.Algorithm == limiters.SlidingCounter:
		st = &counter{n: n, per: per, phase: int64(m.Phase), anchored: m.Anchored, counts: m.CountsRefused, rounding: m.Rounding}
	default:
		panic("probe: no model of " + string(m.Algorithm))
	}
	if m.Seconds {
		return inSeconds{st}
	}
	return st
}

// both is a key's state under two limits at once: admitted only if both
// admit, recorded in both; a refusal is each one's to count.
type both struct{ a, b state }

func (s *both) admits(t int64, n int) bool { return s.a.admits(t, n) && s.b.admits(t, n) }
func (s *both) admit(t int64, n int)       { s.a.admit(t, n); s.b.admit(t, n) }
func (s *both) refuse(t int64, n int)      { s.a.refuse(t, n); s.b.refuse(t, n) }
func (s *both) clone() state               { return &both{s.a.clone(), s.b.clone()} }

// inSeconds is a state that reads the clock in whole seconds.
type inSeconds struct{ state }

func whole(t int64) int64 { return floorDiv(t, int64(time.Second)) * int64(time.Second) }

func (s inSeconds) admits(t int64, n int) bool { return s.state.admits(whole(t), n) }
func (s inSeconds) admit(t int64, n int)       { s.state.admit(whole(t), n) }
func (s inSeconds) refuse(t int64, n int)      { s.state.refuse(whole(t), n) }
func (s inSeconds) clone() state               { return inSeconds{s.state.clone()} }

// bucket is GCRA: a theoretical arrival time, admitting n at t while
// max(tat, t) + n·T − t ≤ C·T.
type bucket struct {
	t, ct  int64
	c      int
	tat    int64
	counts bool
}

func (b *bucket) admits(t int64, n int) bool {
	return n <= b.c && max(b.tat, t)+int64(n)*b.t-t <= b.ct
}

func (b *bucket) admit(t int64, n int) { b.tat = max(b.tat, t) + int64(n)*b.t }

func (b *bucket) clone() state { c := *b; return &c }

func (b *bucket) refuse(t int64, n int) {
	if b.counts {
		b.admit(t, n)
	}
}

// nginxBucket is limit_req's bucket: excess, the requests queued beyond
// the one admitted, in thousandths; last, the millisecond of the last
// admission. A request at millisecond ms makes it max(excess −
// rate·(ms−last)/1000 + 1000, 0), rounded down, and is admitted while
// that is at most most (burst=, a thousand each); a key's first request
// leaves it 0, so a fresh key gets burst+1 at once. A refusal changes
// nothing.
type nginxBucket struct {
	rate, most   int64
	excess, last int64
	fresh        bool
}

// next is the excess a request at t (ns) would leave, with n−1 more.
func (b *nginxBucket) next(t int64, n int) (excess, ms int64) {
	ms = floorDiv(t, int64(time.Millisecond))
	if b.fresh {
		return int64(n-1) * 1000, ms
	}
	d := max(ms-b.last, 0)
	return max(b.excess-b.rate*d/1000+1000, 0) + int64(n-1)*1000, ms
}

func (b *nginxBucket) admits(t int64, n int) bool {
	e, _ := b.next(t, n)
	return e <= b.most
}

func (b *nginxBucket) admit(t int64, n int) {
	b.excess, b.last = b.next(t, n)
	b.fresh = false
}

func (b *nginxBucket) refuse(int64, int) {}

func (b *nginxBucket) clone() state { c := *b; return &c }

// fixed is the fixed window: N per window, the windows aligned on the
// epoch or starting at the key's first request after the last ended. It
// keeps every window's count, not only the newest's: the fit records a
// decision at an instant it chooses, and a later one may land in an
// earlier window.
type fixed struct {
	n, per, phase      int64
	anchored, restarts bool
	windows            []window // in order of start
}

// window is a window's start and count.
type window struct{ start, count int64 }

// lookup returns the index of the window starting at start in ws (in
// order of start), and whether there is one; if not, the index one would
// take. It looks from the newest: a key's decisions come mostly in order.
func lookup(ws []window, start int64) (int, bool) {
	for i := len(ws) - 1; i >= 0; i-- {
		switch {
		case ws[i].start == start:
			return i, true
		case ws[i].start < start:
			return i + 1, false
		}
	}
	return 0, false
}

// find returns the index of the window t falls in, and whether there is
// one; if not, the index a window starting at t would take.
func (f *fixed) find(t int64) (int, bool) {
	if !f.anchored {
		return lookup(f.windows, onGrid(t, f.per, f.phase))
	}
	// The last window starting at or before t, if t is inside it.
	i := len(f.windows)
	for i > 0 && f.windows[i-1].start > t {
		i--
	}
	if i > 0 && t < f.windows[i-1].start+f.per {
		return i - 1, true
	}
	return i, false
}

func (f *fixed) admits(t int64, n int) bool {
	if i, ok := f.find(t); ok {
		return f.windows[i].count+int64(n) <= f.n
	}
	return int64(n) <= f.n
}

func (f *fixed) admit(t int64, n int) {
	i, ok := f.find(t)
	switch {
	case ok:
	case f.anchored && i < len(f.windows) && f.windows[i].start < t+f.per:
		// Recorded before the window that follows began, and within a
		// window of it: that window began here.
		f.windows[i].start = t
	case f.anchored:
		f.windows = slices.Insert(f.windows, i, window{start: t})
	default:
		f.windows = slices.Insert(f.windows, i, window{start: onGrid(t, f.per, f.phase)})
	}
	f.windows[i].count += int64(n)
}

func (f *fixed) clone() state { c := *f; c.windows = slices.Clone(f.windows); return &c }

// refuse restarts the window t falls in, if the model restarts: from t,
// with the refusal counted, so that the key stays refused until it has
// been quiet for a window. (A refusal counted in a fixed window that does
// not restart changes nothing the probe can see.)
func (f *fixed) refuse(t int64, n int) {
	if !f.restarts {
		return
	}
	i, ok := f.find(t)
	if !ok {
		f.windows = slices.Insert(f.windows, i, window{start: t})
	}
	f.windows[i].count += int64(n)
	f.windows[i].start = max(f.windows[i].start, t)
	if i+1 < len(f.windows) && f.windows[i+1].start < t+f.per {
		f.windows = slices.Delete(f.windows, i+1, i+2) // overlapped by the restarted one
	}
}

// slidingLog admits n at t while fewer than N−n+1 of the units it
// recorded are younger than Per.
type slidingLog struct {
	n      int
	per    int64
	counts bool
	at     []int64 // one entry a unit, in time order
}

func (l *slidingLog) live(t int64) int {
	i, _ := slices.BinarySearch(l.at, t-l.per+1)
	return len(l.at) - i
}

func (l *slidingLog) admits(t int64, n int) bool { return l.live(t)+n <= l.n }

func (l *slidingLog) admit(t int64, n int) {
	if len(l.at) == 0 || l.at[len(l.at)-1] <= t {
		for range n {
			l.at = append(l.at, t)
		}
		return
	}
	i, _ := slices.BinarySearch(l.at, t+1)
	for range n {
		l.at = slices.Insert(l.at, i, t)
	}
}

func (l *slidingLog) clone() state { c := *l; c.at = slices.Clone(l.at); return &c }

func (l *slidingLog) refuse(t int64, n int) {
	if l.counts {
		l.admit(t, n)
	}
}

// counter is the sliding window counter: the current window's count and
// the previous one's, weighted by how much of it the sliding window still
// covers. Like fixed, it keeps every window's count. Anchored, the
// windows are a grid starting at the key's first request.
type counter struct {
	n, per   int64
	phase    int64 // where its windows start after the epoch's, when not anchored
	anchored bool
	counts   bool
	rounding rounding
	origin   int64 // the grid's origin: 0, or the key's first request
	started  bool
	windows  []window
}

func (c *counter) countOf(start int64) int64 {
	if i, ok := lookup(c.windows, start); ok {
		return c.windows[i].count
	}
	return 0
}

// grid returns the start of the window t falls in.
func (c *counter) grid(t int64) int64 {
	switch {
	case c.anchored && c.started:
		return c.origin + floorDiv(t-c.origin, c.per)*c.per
	case c.anchored:
		return t
	}
	return onGrid(t, c.per, c.phase)
}

// onGrid returns the start of the window of per, phase after the epoch's,
// that t falls in.
func onGrid(t, per, phase int64) int64 { return floorDiv(t-phase, per)*per + phase }

func (c *counter) admits(t int64, n int) bool {
	start := c.grid(t)
	prev, count := c.countOf(start-c.per), c.countOf(start)
	if prev == 0 {
		return count+int64(n) <= c.n
	}
	// The previous window weighs prev·(W−e)/W, e the time into this one.
	left := c.per - (t - start)
	if float64(prev)*float64(c.per) > 1<<62 {
		return float64(prev)*float64(left)/float64(c.per)+float64(count+int64(n)) <= float64(c.n)
	}
	w := prev * left
	switch c.rounding {
	case rounded:
		return (2*w+c.per)/(2*c.per)+count+int64(n) <= c.n
	case truncated:
		return w/c.per+count+int64(n) <= c.n
	}
	return w+(count+int64(n))*c.per <= c.n*c.per
}

func (c *counter) admit(t int64, n int) {
	if c.anchored && !c.started {
		c.origin, c.started = t, true
	}
	start := c.grid(t)
	i, ok := lookup(c.windows, start)
	if !ok {
		c.windows = slices.Insert(c.windows, i, window{start: start})
	}
	c.windows[i].count += int64(n)
}

func (c *counter) clone() state { d := *c; d.windows = slices.Clone(c.windows); return &d }

func (c *counter) refuse(t int64, n int) {
	if c.counts {
		c.admit(t, n)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
