package limiters_test

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// Settling, in the models' terms (DESIGN.md's, written out again with no
// code shared with the limiters): mark is what a model remembers of a
// reservation it just admitted at t, and settle gives back refund units of
// it and charges charge more at t.
type settleModel interface {
	model
	mark(key string, t int64) any
	settle(key string, t int64, mark any, refund, charge int)
}

// The buckets: a reservation is due full again at due; a refund gives
// back what of its last units is not yet refilled by t, a charge is debt.

func (m *tokenModel) mark(key string, t int64) any {
	debt := new(big.Rat).Sub(rat(m.c), m.tokens[key]) // in tokens
	return new(big.Rat).Add(rat(t), debt.Mul(debt, rat(m.t)))
}

func (m *tokenModel) settle(key string, t int64, mark any, refund, charge int) {
	m.allow(key, t, 0) // refilled to t
	tok := m.tokens[key]
	if refund > 0 {
		tok = minRat(rat(m.c), new(big.Rat).Add(tok, owed(mark.(*big.Rat), t, m.t, refund)))
	}
	m.tokens[key] = new(big.Rat).Sub(tok, rat(int64(charge)))
}

func (m *leakyModel) mark(key string, t int64) any {
	return new(big.Rat).Add(rat(t), new(big.Rat).Mul(m.level[key], rat(m.t)))
}

func (m *leakyModel) settle(key string, t int64, mark any, refund, charge int) {
	m.allow(key, t, 0) // leaked to t
	lv := m.level[key]
	if refund > 0 {
		lv = new(big.Rat).Sub(lv, owed(mark.(*big.Rat), t, m.t, refund))
		if lv.Sign() < 0 {
			lv = rat(0)
		}
	}
	m.level[key] = new(big.Rat).Add(lv, rat(int64(charge)))
}

// owed is what of a reservation due full at due, refunding r units of T
// nanoseconds, is not yet refilled at t: min(r, (due - t)/T), at least 0.
func owed(due *big.Rat, t, T int64, r int) *big.Rat {
	left := new(big.Rat).Sub(due, rat(t))
	left.Quo(left, rat(T))
	if left.Sign() < 0 {
		return rat(0)
	}
	return minRat(rat(int64(r)), left)
}

func (m *gcraModel) mark(key string, t int64) any { return m.tat[key] }

func (m *gcraModel) settle(key string, t int64, mark any, refund, charge int) {
	tat, ok := m.tat[key]
	if !ok || tat < t {
		tat = t
	}
	if refund > 0 {
		give := min(int64(refund)*m.t, max(0, mark.(int64)-t))
		tat = max(tat-give, t)
	}
	m.tat[key] = tat + int64(charge)*m.t
}

// The windows: a refund takes units off the window the reservation was
// counted in while that window still counts; a charge adds to now's.

func (m *fixedModel) mark(key string, t int64) any { return t / m.w }

func (m *fixedModel) settle(key string, t int64, mark any, refund, charge int) {
	m.allow(key, t, 0) // into t's window
	if mark.(int64) == m.window[key] {
		m.count[key] = max(0, m.count[key]-int64(refund))
	}
	m.count[key] += int64(charge)
}

func (m *counterModel) mark(key string, t int64) any { return t / m.w }

func (m *counterModel) settle(key string, t int64, mark any, refund, charge int) {
	m.allow(key, t, 0)
	if k, r := t/m.w, mark.(int64); r == k || r == k-1 {
		m.spent[key][r] = max(0, m.spent[key][r]-int64(refund))
	}
	m.spent[key][t/m.w] += int64(charge)
}

func (m *logModel) mark(key string, t int64) any { return t }

func (m *logModel) settle(key string, t int64, mark any, refund, charge int) {
	stamp := mark.(int64)
	var kept []int64
	for _, at := range m.log[key] {
		if at == stamp && stamp > t-m.w && refund > 0 {
			refund-- // taken out
			continue
		}
		kept = append(kept, at)
	}
	for range min(int64(charge), m.n) {
		kept = append(kept, t)
	}
	// At most N entries in the window, the newest: a charge past N drops
	// the oldest (slidinglog's package doc).
	var live []int64
	for _, at := range kept {
		if at > t-m.w {
			live = append(live, at)
		}
	}
	m.log[key] = live[max(0, int64(len(live))-m.n):]
}

// A pending reservation, in the limiter and in the model.
type pending struct {
	r    limiters.Reservation
	mark any
}

// checkSettleAgainstModel runs one random trace of reservations and
// settles (refunds, charges past the limit, cancels) through each
// algorithm and its model, and checks every decision: what Reserve
// decides, and the state Settle reports after, its times exact; and that
// the three buckets still decide alike.
func checkSettleAgainstModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	all := specs(t, rng)
	steps := trace(rng, 300, all[0].Limit.N, int64(all[0].Limit.Per))
	type op struct {
		settle bool
		which  int // which pending reservation
		actual int
	}
	ops := make([]op, len(steps))
	for i, st := range steps {
		ops[i] = op{settle: rng.IntN(5) < 2, which: rng.IntN(8), actual: rng.IntN(2*st.n + 3)}
	}
	bucket := map[limiters.Algorithm][]limiters.Decision{}
	ctx := t.Context()
	for _, s := range all {
		l, err := newMemory(s, limiters.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(s).(settleModel)
		var open []pending
		for i, st := range steps {
			at := time.Unix(0, st.t)
			var d limiters.Decision
			var call string
			var admit bool
			var remaining *big.Rat
			if o := ops[i]; o.settle && len(open) > 0 {
				p := &open[o.which%len(open)]
				call = fmt.Sprintf("seed %d, %v, step %d: Settle(%q reserved %d at %dns, %dns, %d)", seed, s, i, p.r.Key(), p.r.Cost(), p.r.At().UnixNano(), st.t, o.actual)
				if d, err = l.Settle(ctx, limiters.Settlement{Reservation: p.r, Actual: o.actual, At: at}); err != nil {
					t.Fatalf("%s: %v", call, err)
				}
				refund, charge := max(p.r.Cost()-o.actual, 0), max(o.actual-p.r.Cost(), 0)
				m.settle(p.r.Key(), st.t, p.mark, refund, charge)
				// A look (a cost of 0 changes nothing): a unit request
				// fits when at least one unit remains.
				_, remaining = m.allow(p.r.Key(), st.t, 0)
				admit = remaining.Cmp(rat(1)) >= 0
				st = step{key: p.r.Key(), t: st.t, n: 1}
				open = append(open[:o.which%len(open)], open[o.which%len(open)+1:]...)
			} else {
				call = fmt.Sprintf("seed %d, %v, step %d: Reserve(%q, %dns, %d)", seed, s, i, st.key, st.t, st.n)
				r, err := l.Reserve(ctx, limiters.Request{Key: st.key, N: st.n, At: at})
				if err != nil {
					t.Fatalf("%s: %v", call, err)
				}
				d = r.Decision()
				admit, remaining = m.allow(st.key, st.t, st.n)
				if admit {
					open = append(open, pending{r, m.mark(st.key, st.t)})
				}
			}
			if d.Allowed != admit {
				t.Fatalf("%s.Allowed = %v, the model says %v", call, d.Allowed, admit)
			}
			want := max(new(big.Int).Quo(remaining.Num(), remaining.Denom()).Int64(), 0) // in debt: 0
			if remaining.Sign() < 0 {
				want = 0
			}
			if int64(d.Remaining) != want {
				t.Fatalf("%s.Remaining = %d, the model says %s (so %d)", call, d.Remaining, remaining.FloatString(3), want)
			}
			checkTimes(t, call, l, st, d)
			if s.Algorithm.IsBucket() {
				bucket[s.Algorithm] = append(bucket[s.Algorithm], d)
			}
		}
		l.Close()
	}
	tb := bucket[limiters.TokenBucket]
	for _, a := range []limiters.Algorithm{limiters.LeakyBucket, limiters.GCRA} {
		for i, d := range bucket[a] {
			if !same(d, tb[i]) {
				t.Fatalf("seed %d step %d: %v decided %+v, token bucket %+v", seed, i, a, d, tb[i])
			}
		}
	}
}

func TestSettleAgainstModel(t *testing.T) {
	seeds := 300
	if testing.Short() || raceEnabled {
		seeds = 40
	}
	for seed := range uint64(seeds) {
		checkSettleAgainstModel(t, seed)
	}
}

func FuzzSettleAgainstModel(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkSettleAgainstModel(t, seed) })
}

// A denied reservation settles nothing, and an actual cost below zero is
// refused: neither changes the key.
func TestSettleRefused(t *testing.T) {
	ctx := t.Context()
	for _, a := range limiters.Algorithms() {
		s := spec{Algorithm: a, Limit: limiters.PerSecond(3)}
		l, err := newMemory(s)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(100, 0)
		r, err := l.Reserve(ctx, limiters.Request{Key: "k", N: 2, At: at})
		if err != nil || !r.Allowed() || r.Key() != "k" || r.Cost() != 2 || !r.At().Equal(at) || r.Decision().Remaining != 1 {
			t.Fatalf("%s: reserved %+v, %v", a, r, err)
		}
		denied, err := l.Reserve(ctx, limiters.Request{Key: "k", N: 2, At: at})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Settle(ctx, limiters.Settlement{Reservation: denied, Actual: 0, At: at}); !errors.Is(err, limiters.ErrNotReserved) {
			t.Errorf("%s: settling a denied reservation: %v", a, err)
		}
		if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: -1, At: at}); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%s: an actual cost of -1: %v", a, err)
		}
		// Only the limiter that made a reservation settles it.
		other, err := newMemory(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0, At: at}); !errors.Is(err, limiters.ErrNotReserved) {
			t.Errorf("%s: another limiter settling the reservation: %v, want ErrNotReserved", a, err)
		}
		other.Close()
		if p, err := l.Peek(ctx, limiters.Request{Key: "k", N: 1, At: at}); err != nil || p.Remaining != 1 {
			t.Errorf("%s: after the refused settles, %+v, %v", a, p, err)
		}
		if d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0, At: at}); err != nil || d.Remaining != 3 { // cancelled: all of it back
			t.Errorf("%s: cancelled: %+v, %v", a, d, err)
		}
		l.Close()
	}
}

// Many goroutines reserving and settling on one key at one instant: with
// every reservation settled at its estimate, exactly the limit is
// admitted; with every one cancelled, the key ends with its full quota.
// Under -race, the settles race the decisions.
func TestSettleConcurrent(t *testing.T) {
	const goroutines, each = 8, 100
	at := time.Unix(1e9, 0)
	ctx := t.Context()
	for _, a := range limiters.Algorithms() {
		for _, cancel := range []bool{false, true} {
			s := spec{Algorithm: a, Limit: limiters.PerHour(50)}
			l, err := newMemory(s)
			if err != nil {
				t.Fatal(err)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range each {
						r, err := l.Reserve(ctx, limiters.Request{Key: "hot", N: 1, At: at})
						if err != nil {
							t.Error(err)
							return
						}
						if !r.Allowed() {
							continue
						}
						admitted.Add(1)
						actual := 1
						if cancel {
							actual = 0
						}
						if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: actual, At: at}); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			p, err := l.Peek(ctx, limiters.Request{Key: "hot", N: 1, At: at})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !cancel && (admitted.Load() != 50 || p.Remaining != 0):
				t.Errorf("%s, settled at the estimate: %d admitted, %d remaining; want 50 and 0", a, admitted.Load(), p.Remaining)
			case cancel && (admitted.Load() < 50 || p.Remaining != 50):
				t.Errorf("%s, cancelled: %d admitted, %d remaining; want 50 or more, and 50", a, admitted.Load(), p.Remaining)
			}
			l.Close()
		}
	}
}
