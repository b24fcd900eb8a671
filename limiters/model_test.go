package limiters_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// The models below are DESIGN.md's table written as directly as possible,
// in exact rational arithmetic, sharing no code with the limiters. Times are
// nanoseconds; a bucket of N per Per refills one token per T nanoseconds, T
// being Per/N rounded to the nanosecond, as the limiters round it.

type model interface {
	// allow decides n at t and returns whether it was admitted and the
	// remaining quota, as a real number, after it.
	allow(key string, t int64, n int) (bool, *big.Rat)
}

func rat(x int64) *big.Rat { return new(big.Rat).SetInt64(x) }

func minRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) < 0 {
		return a
	}
	return b
}

type tokenModel struct {
	c, t   int64
	tokens map[string]*big.Rat
	last   map[string]int64
}

func (m *tokenModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	tok, ok := m.tokens[key]
	if !ok {
		tok, m.last[key] = rat(m.c), t
	}
	// tokens = min(C, tokens + R*(t - last))
	refill := new(big.Rat).SetFrac64(t-m.last[key], m.t)
	tok = minRat(rat(m.c), new(big.Rat).Add(tok, refill))
	m.last[key] = t
	admit := tok.Cmp(rat(int64(n))) >= 0
	if admit {
		tok = new(big.Rat).Sub(tok, rat(int64(n)))
	}
	m.tokens[key] = tok
	return admit, tok
}

type leakyModel struct {
	c, t  int64
	level map[string]*big.Rat
	last  map[string]int64
}

func (m *leakyModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	lv, ok := m.level[key]
	if !ok {
		lv, m.last[key] = rat(0), t
	}
	// level = max(0, level - R*(t - last))
	lv = new(big.Rat).Sub(lv, new(big.Rat).SetFrac64(t-m.last[key], m.t))
	if lv.Sign() < 0 {
		lv = rat(0)
	}
	m.last[key] = t
	admit := new(big.Rat).Add(lv, rat(int64(n))).Cmp(rat(m.c)) <= 0
	if admit {
		lv = new(big.Rat).Add(lv, rat(int64(n)))
	}
	m.level[key] = lv
	return admit, new(big.Rat).Sub(rat(m.c), lv)
}

type gcraModel struct {
	c, t int64
	tat  map[string]int64
}

func (m *gcraModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	tat, ok := m.tat[key]
	if !ok || tat < t {
		tat = t
	}
	// admit if max(TAT, t) + n*T - t <= C*T
	admit := tat+int64(n)*m.t-t <= m.c*m.t
	if admit {
		tat += int64(n) * m.t
	}
	m.tat[key] = tat
	// remaining = C - (TAT - t)/T
	return admit, new(big.Rat).Sub(rat(m.c), new(big.Rat).SetFrac64(tat-t, m.t))
}

type fixedModel struct {
	n, w   int64
	window map[string]int64
	count  map[string]int64
}

func (m *fixedModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	k := t / m.w // traces start at 0: no negative times
	if w, ok := m.window[key]; !ok || w != k {
		// A new window starts from what a count past N (debt, from a
		// settle) leaves it: N a window is paid off.
		m.window[key], m.count[key] = k, max(0, m.count[key]-m.n*(k-w))
	}
	admit := m.count[key]+int64(n) <= m.n
	if admit {
		m.count[key] += int64(n)
	}
	return admit, rat(m.n - m.count[key])
}

type logModel struct {
	n, w int64
	log  map[string][]int64 // one entry per unit of cost
}

func (m *logModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	in := int64(0)
	for _, at := range m.log[key] {
		if at > t-m.w && at <= t {
			in++
		}
	}
	admit := in+int64(n) <= m.n
	if admit {
		for range n {
			m.log[key] = append(m.log[key], t)
		}
		in += int64(n)
	}
	return admit, rat(m.n - in)
}

type counterModel struct {
	n, w int64
	// spent[key][k] is what key spent in window k.
	spent map[string]map[int64]int64
}

func (m *counterModel) allow(key string, t int64, n int) (bool, *big.Rat) {
	if m.spent[key] == nil {
		m.spent[key] = map[int64]int64{}
	}
	k := t / m.w
	prev, curr := m.spent[key][k-1], m.spent[key][k]
	// prev * (1 - (t - start)/W) + curr + n <= N
	weight := new(big.Rat).Sub(rat(1), new(big.Rat).SetFrac64(t-k*m.w, m.w))
	estimate := new(big.Rat).Add(new(big.Rat).Mul(rat(prev), weight), rat(curr))
	admit := new(big.Rat).Add(estimate, rat(int64(n))).Cmp(rat(m.n)) <= 0
	if admit {
		m.spent[key][k] += int64(n)
		estimate.Add(estimate, rat(int64(n)))
	}
	rem := new(big.Rat).Sub(rat(m.n), estimate)
	if rem.Sign() < 0 {
		rem = rat(0)
	}
	return admit, rem
}

func newModel(s spec) model {
	// A bucket holds C, its burst or else N, and refills every T.
	n, w := int64(s.Limit.N), int64(s.Limit.Per)
	c, t := int64(s.Limit.Burst), (w+n/2)/n
	if c == 0 {
		c = n
	}
	switch s.Algorithm {
	case limiters.TokenBucket:
		return &tokenModel{c: c, t: t, tokens: map[string]*big.Rat{}, last: map[string]int64{}}
	case limiters.LeakyBucket:
		return &leakyModel{c: c, t: t, level: map[string]*big.Rat{}, last: map[string]int64{}}
	case limiters.GCRA:
		return &gcraModel{c: c, t: t, tat: map[string]int64{}}
	case limiters.FixedWindow:
		return &fixedModel{n: n, w: w, window: map[string]int64{}, count: map[string]int64{}}
	case limiters.SlidingLog:
		return &logModel{n: n, w: w, log: map[string][]int64{}}
	}
	return &counterModel{n: n, w: w, spent: map[string]map[int64]int64{}}
}

type step struct {
	key string
	t   int64
	n   int
}

// trace returns a random trace for a limit of n per w: non-decreasing
// times with gaps from nothing to several windows, three keys, and costs
// mostly 1, sometimes up to above the limit.
func trace(rng *rand.Rand, steps, n int, w int64) []step {
	out := make([]step, steps)
	t := rng.Int64N(w)
	for i := range out {
		switch r := rng.IntN(10); {
		case r < 3: // same instant
		case r < 5:
			t += rng.Int64N(3) + 1 // a nanosecond or two
		case r < 9:
			t += rng.Int64N(w/int64(n) + 1)
		default:
			t += rng.Int64N(3 * w)
		}
		cost := 1
		if rng.IntN(5) == 0 {
			cost = 1 + rng.IntN(n+1)
		}
		out[i] = step{key: string(rune('a' + rng.IntN(3))), t: t, n: cost}
	}
	return out
}

// specs returns the six algorithms at a limit drawn from rng: N per W for
// the windows (first, so specs(rng)[0].Limit is the N per W drawn), and
// for the buckets a capacity of N refilled at a rate of N/W, or now and
// then faster.
func specs(t testing.TB, rng *rand.Rand) []spec {
	t.Helper()
	quota := []int{1, 2, 3, 5, 10, 64}[rng.IntN(6)]
	length := []time.Duration{7 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, time.Hour}[rng.IntN(5)]
	// A rate that does not divide a second evenly now and then.
	rate := float64(quota) / length.Seconds()
	if rng.IntN(3) == 0 {
		rate *= 1 + rng.Float64()
	}
	bucket, err := limiters.Bucket(quota, rate)
	if err != nil {
		t.Fatalf("a bucket of %d at %v a second: %v", quota, rate, err)
	}
	var out []spec
	for _, a := range limiters.Algorithms() {
		lim := limiters.Limit{N: quota, Per: length}
		if a.IsBucket() {
			lim = bucket
		}
		out = append(out, spec{Algorithm: a, Limit: lim})
	}
	return out
}

// checkAgainstModel runs one random trace through each algorithm and its
// model and through a twin limiter swept before every step, and checks
// every decision.
func checkAgainstModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	all := specs(t, rng)
	steps := trace(rng, 300, all[0].Limit.N, int64(all[0].Limit.Per))
	bucketDecisions := map[limiters.Algorithm][]limiters.Decision{}
	ctx := t.Context()
	for _, s := range all {
		l, err := newMemory(s, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		swept, err := newMemory(s, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(s)
		for i, st := range steps {
			at := time.Unix(0, st.t)
			swept.Sweep(at)
			r := limiters.Request{Key: st.key, N: st.n, At: at}
			call := fmt.Sprintf("seed %d, %v, step %d: Decide(%q, %dns, %d)", seed, s, i, st.key, st.t, st.n)
			d, err := l.Decide(ctx, r)
			if err != nil {
				t.Fatalf("%s: %v", call, err)
			}
			if d2, err := swept.Decide(ctx, r); err != nil || !same(d2, d) {
				t.Fatalf("%s = %+v, but %+v, %v when swept before every step", call, d, d2, err)
			}
			admit, remaining := m.allow(st.key, st.t, st.n)
			if d.Allowed != admit {
				t.Fatalf("%s.Allowed = %v, the model says %v", call, d.Allowed, admit)
			}
			// Remaining is the real remaining quota, rounded down.
			want := new(big.Int).Quo(remaining.Num(), remaining.Denom()).Int64()
			if int64(d.Remaining) != want {
				t.Fatalf("%s.Remaining = %d, the model says %s (so %d)", call, d.Remaining, remaining.FloatString(3), want)
			}
			checkTimes(t, call, l, st, d)
			if s.Algorithm.IsBucket() {
				bucketDecisions[s.Algorithm] = append(bucketDecisions[s.Algorithm], d)
			}
		}
		if s.Algorithm == limiters.SlidingLog {
			checkNeverOverN(t, s, steps)
		}
		l.Close()
		swept.Close()
	}
	// Token bucket, leaky bucket and GCRA are one policy: not only the
	// same admissions, the same decisions.
	tb := bucketDecisions[limiters.TokenBucket]
	for _, a := range []limiters.Algorithm{limiters.LeakyBucket, limiters.GCRA} {
		for i, d := range bucketDecisions[a] {
			if !same(d, tb[i]) {
				t.Fatalf("seed %d step %d: %v decided %+v, token bucket %+v", seed, i, a, d, tb[i])
			}
		}
	}
}

// checkTimes checks that RetryAfter and ResetAfter are exact: waiting them
// out is enough, and a nanosecond less is not.
func checkTimes(t *testing.T, call string, l limiters.Peeker, st step, d limiters.Decision) {
	t.Helper()
	peek := func(after time.Duration) limiters.Decision {
		p, err := l.Peek(t.Context(), limiters.Request{Key: st.key, N: 1, At: time.Unix(0, st.t).Add(after)})
		if err != nil {
			t.Fatalf("%s: Peek %v later: %v", call, after, err)
		}
		return p
	}
	if !d.Allowed && st.n == 1 {
		if p := peek(d.RetryAfter); !p.Allowed {
			t.Fatalf("%s: RetryAfter %v, but Peek then = %+v", call, d.RetryAfter, p)
		}
		if p := peek(d.RetryAfter - 1); p.Allowed {
			t.Fatalf("%s: RetryAfter %v, but Peek a nanosecond before = %+v", call, d.RetryAfter, p)
		}
	}
	if p := peek(d.ResetAfter); p.Remaining != p.Limit || p.ResetAfter != 0 {
		t.Fatalf("%s: ResetAfter %v, but Peek then = %+v", call, d.ResetAfter, p)
	}
	if d.ResetAfter > 0 {
		if p := peek(d.ResetAfter - 1); p.Remaining == p.Limit && p.ResetAfter == 0 {
			t.Fatalf("%s: ResetAfter %v, but Peek a nanosecond before = %+v", call, d.ResetAfter, p)
		}
	}
}

// checkNeverOverN replays steps and checks that no interval of length W
// saw more than N admitted.
func checkNeverOverN(t *testing.T, s spec, steps []step) {
	t.Helper()
	again, err := newMemory(s)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	admitted := map[string][]step{}
	for _, st := range steps {
		d, err := again.Decide(t.Context(), limiters.Request{Key: st.key, N: st.n, At: time.Unix(0, st.t)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted[st.key] = append(admitted[st.key], st)
		}
	}
	w := int64(s.Limit.Per)
	for key, a := range admitted {
		for i := range a {
			sum := 0
			for j := i; j < len(a) && a[j].t < a[i].t+w; j++ {
				sum += a[j].n
			}
			if sum > s.Limit.N {
				t.Fatalf("%v admitted %d for %q in [%d, %d+W)", s, sum, key, a[i].t, a[i].t)
			}
		}
	}
}

func TestAgainstModel(t *testing.T) {
	seeds := 300
	if testing.Short() || raceEnabled {
		seeds = 40
	}
	for seed := range uint64(seeds) {
		checkAgainstModel(t, seed)
	}
}

func FuzzAgainstModel(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		checkAgainstModel(t, seed)
	})
}
