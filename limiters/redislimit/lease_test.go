package redislimit_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// leaseFleet is p Limiters of lim under algorithm a with leases of time
// tau (none for tau 0), one prefix: the processes of a fleet.
func leaseFleet(t *testing.T, a limiters.Algorithm, lim limiters.Limit, p int, tau time.Duration) []*redislimit.Limiter {
	t.Helper()
	c := server(t)
	pre := prefix(t, c)
	var out []*redislimit.Limiter
	for range p {
		opts := []redislimit.Option{patient, redislimit.WithPrefix(pre)}
		if tau > 0 {
			opts = append(opts, redislimit.WithLeases(tau, 0))
		}
		l, err := redislimit.New(c, a, []limiters.Limit{lim}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// arrival is a request of a trace: its time and the process it is routed to.
type arrival struct {
	at   time.Duration
	proc int
}

// leaseTraces are the traces the bound is checked on, over 8 periods of
// a limit of c a period, routed at random to p processes: ten times the
// rate, evenly at random; bursts of three times the capacity at random
// moments; and the boundary attack, the capacity just before and just
// after each period's edge.
func leaseTraces(r *rand.Rand, c int, period time.Duration, p int) map[string][]arrival {
	span := 8 * period
	var overload, bursts, boundary []arrival
	for range 10 * c * 8 {
		overload = append(overload, arrival{time.Duration(r.Int64N(int64(span))), r.IntN(p)})
	}
	for range 12 {
		at := time.Duration(r.Int64N(int64(span)))
		for range 3 * c {
			bursts = append(bursts, arrival{at + time.Duration(r.Int64N(int64(period/50))), r.IntN(p)})
		}
	}
	for k := 1; k <= 8; k++ {
		edge := time.Duration(k) * period
		for range c {
			boundary = append(boundary, arrival{edge - time.Duration(r.Int64N(int64(period/20))) - 1, r.IntN(p)})
			boundary = append(boundary, arrival{edge + time.Duration(r.Int64N(int64(period/20))), r.IntN(p)})
		}
	}
	out := map[string][]arrival{"overload": overload, "bursts": bursts, "boundary": boundary}
	for _, tr := range out {
		slices.SortStableFunc(tr, func(a, b arrival) int { return int(a.at - b.at) })
	}
	return out
}

// replay runs tr through the fleet at explicit times from t0, one key, and
// returns the times admitted and the round trips made.
func replay(t *testing.T, fleet []*redislimit.Limiter, key string, t0 time.Time, tr []arrival) ([]time.Duration, int64) {
	t.Helper()
	var admitted []time.Duration
	for _, a := range tr {
		d, err := fleet[a.proc].Decide(context.Background(), at(key, t0.Add(a.at), 1))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted = append(admitted, a.at)
		}
	}
	var trips int64
	for _, l := range fleet {
		trips += l.Counts().RoundTrips
	}
	return admitted, trips
}

// mostIn returns the most times of sorted ts in any interval [a, a+d).
func mostIn(ts []time.Duration, d time.Duration) int {
	most, i := 0, 0
	for j := range ts {
		for ts[j]-ts[i] >= d {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// The bound WithLeases states: in any interval of length D a fleet with
// leases of time τ admits at most C + (D+τ)·R, where the exact limiter
// admits at most C + D·R. Checked on three traces, two lease times, one
// and four processes, two seeds, for GCRA and the token bucket, and for D
// from a tenth of a period to three periods. The exact fleet is checked
// against its own bound on the same traces (so the form of the bound is
// right), and the fleet with leases must admit at least four fifths of
// what the exact one does (so the bound is not met by denying).
func TestLeaseBound(t *testing.T) {
	const c, period = 20, time.Second
	rate := float64(c) / period.Seconds()
	bound := func(d time.Duration) int { return c + int(math.Ceil(d.Seconds()*rate)) }
	spans := []time.Duration{period / 10, period / 4, period / 2, period, 3 * period}
	t0 := time.Unix(1_800_000_000, 0)
	for _, a := range []limiters.Algorithm{limiters.GCRA, limiters.TokenBucket} {
		s := limiters.Limit{N: c, Per: period}
		for seed := range uint64(2) {
			for _, p := range []int{1, 4} {
				r := rand.New(rand.NewPCG(seed, uint64(p)))
				for name, tr := range leaseTraces(r, c, period, p) {
					exact, exactTrips := replay(t, leaseFleet(t, a, s, p, 0), "k", t0, tr)
					for _, d := range spans {
						if got := mostIn(exact, d); got > bound(d) {
							t.Fatalf("%s %s: the exact fleet admitted %d in %v, over its bound %d", a, name, got, d, bound(d))
						}
					}
					for _, tau := range []time.Duration{period / 10, period / 2} {
						leased, trips := replay(t, leaseFleet(t, a, s, p, tau), "k", t0, tr)
						over := 0
						for _, d := range spans {
							got := mostIn(leased, d)
							if got > bound(d+tau) {
								t.Errorf("%s %s, seed %d, %d processes, τ %v: admitted %d in %v, over the bound %d", a, name, seed, p, tau, got, d, bound(d+tau))
							}
							over = max(over, got-bound(d))
						}
						if 5*len(leased) < 4*len(exact) {
							t.Errorf("%s %s, seed %d, %d processes, τ %v: admitted %d, the exact fleet %d", a, name, seed, p, tau, len(leased), len(exact))
						}
						t.Logf("%-12s %-8s seed %d, %d proc, τ %-5v: admitted %4d (exact %4d), most over the exact bound %2d (allowed %2d), round trips %4d (exact %4d), %.3f an admission",
							a, name, seed, p, tau, len(leased), len(exact), over, bound(tau)-c, trips, exactTrips, float64(trips)/float64(max(len(leased), 1)))
					}
				}
			}
		}
	}
}

// A quiet key, one request at a time more than τ apart, takes leases of
// one unit: one round trip a request, decided as the exact limiter does.
func TestLeaseQuietKeyExact(t *testing.T) {
	s := limiters.Limit{N: 3, Per: time.Second}
	leased := leaseFleet(t, limiters.GCRA, s, 1, 100*time.Millisecond)[0]
	exact := leaseFleet(t, limiters.GCRA, s, 1, 0)[0]
	r := rand.New(rand.NewPCG(3, 4))
	at := time.Unix(1_800_000_000, 0)
	denied := 0
	for i := range 200 {
		at = at.Add(101*time.Millisecond + time.Duration(r.Int64N(int64(100*time.Millisecond))))
		got, err1 := leased.Decide(context.Background(), limiters.Request{Key: "q", N: 1, At: at})
		want, err2 := exact.Decide(context.Background(), limiters.Request{Key: "q", N: 1, At: at})
		if err1 != nil || err2 != nil || got.Allowed != want.Allowed || got.Allowed && got.Remaining != want.Remaining {
			t.Fatalf("request %d: leased %+v (%v), exact %+v (%v)", i, got, err1, want, err2)
		}
		if !got.Allowed {
			denied++
		}
	}
	if denied == 0 {
		t.Fatal("the trace denied nothing: it does not test denials")
	}
	// Every admission took a round trip of its own: leases of one unit.
	if c := leased.Counts(); c.Sent < 200-int64(denied) || c.Sent > 200 {
		t.Errorf("%+v sent for 200 requests, %d denied", c, denied)
	}
}

// A key hammered at ten times its rate through one process: one round
// trip brings most units, and the process denies locally while it waits
// for room for the next lease.
func TestLeaseRoundTrips(t *testing.T) {
	const c = 100
	s := limiters.Limit{N: c, Per: time.Second}
	tau := 250 * time.Millisecond
	l := leaseFleet(t, limiters.GCRA, s, 1, tau)[0]
	t0 := time.Unix(1_800_000_000, 0)
	var tr []arrival
	const n = 10 * c * 5 // five periods
	for i := range n {
		tr = append(tr, arrival{at: time.Duration(i) * time.Second / (10 * c)})
	}
	leased, trips := replay(t, []*redislimit.Limiter{l}, "hot", t0, tr)
	exact, _ := replay(t, leaseFleet(t, limiters.GCRA, s, 1, 0), "hot", t0, tr)
	admitted := len(leased)
	if admitted < len(exact)*9/10 || admitted > len(exact)+int(tau.Seconds()*c) {
		t.Errorf("admitted %d of %d, the exact limiter %d: want within τ·R = %d above it, and not a tenth below", admitted, n, len(exact), int(tau.Seconds()*c))
	}
	if perAdmitted := float64(trips) / float64(admitted); perAdmitted > 0.05 {
		t.Errorf("%d round trips for %d admissions: %.3f each, want at most 0.05", trips, admitted, perAdmitted)
	}
	t.Logf("%d round trips for %d admissions of %d requests (exact: %d admissions)", trips, admitted, n, len(exact))
}

// On the server's clock, goroutines of two processes hammering one key
// admit no more than the bound over the whole run.
func TestLeaseConcurrent(t *testing.T) {
	const c = 50
	s := limiters.Limit{N: 500, Per: time.Second, Burst: c}
	tau := 20 * time.Millisecond
	fleet := leaseFleet(t, limiters.TokenBucket, s, 2, tau)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	start := time.Now()
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for time.Since(start) < 300*time.Millisecond {
				d, err := fleet[g%2].AllowN(context.Background(), "busy", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if most := c + int(math.Ceil((elapsed+tau).Seconds()*500)); admitted > most {
		t.Errorf("admitted %d in %v: over the bound %d", admitted, elapsed, most)
	}
	if admitted < c {
		t.Errorf("admitted %d in %v: fewer than the capacity", admitted, elapsed)
	}
}

// Reset drops the process's units: the next request asks Redis, which has
// forgotten the key. Decisions from a lease carry the limiter's policy,
// and a denial names its limit, as Redis's do.
func TestLeaseReset(t *testing.T) {
	s := limiters.Limit{N: 1, Per: time.Second, Burst: 8}
	l := leaseFleet(t, limiters.GCRA, s, 1, time.Minute)[0]
	ctx := context.Background()
	policy := []limiters.Limit{s.Named()}
	for range 8 {
		if d, err := l.AllowN(ctx, "r", 1); err != nil || !d.Allowed || d.Policy == nil || !slices.Equal(d.Policy.Limits, policy) || d.Denied != 0 {
			t.Fatalf("%s, %v", show(d), err)
		}
	}
	for range 3 { // Redis's denial, then the lease's
		d, err := l.AllowN(ctx, "r", 1)
		if by, ok := d.DeniedBy(); err != nil || d.Allowed || !ok || by != policy[0] {
			t.Fatalf("the ninth: %s, %v; want denied by %v", show(d), err, policy[0])
		}
	}
	if err := l.Reset(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	before := l.Counts().RoundTrips
	if d, err := l.AllowN(ctx, "r", 1); err != nil || !d.Allowed {
		t.Fatalf("after Reset: %+v, %v", d, err)
	}
	if l.Counts().RoundTrips == before {
		t.Error("after Reset the request was decided without asking Redis")
	}
}

func TestLeaseOptions(t *testing.T) {
	c := server(t)
	gcra := []limiters.Limit{{N: 1, Per: time.Second, Burst: 10}}
	fixed := []limiters.Limit{{N: 10, Per: time.Second}}
	two := []limiters.Limit{{N: 10, Per: time.Second}, {N: 100, Per: time.Minute}}
	for _, tc := range []struct {
		name   string
		a      limiters.Algorithm
		limits []limiters.Limit
		opt    redislimit.Option
	}{
		{"negative time", limiters.GCRA, gcra, redislimit.WithLeases(-time.Second, 0)},
		{"negative size", limiters.GCRA, gcra, redislimit.WithLeases(time.Second, -1)},
		{"size over capacity", limiters.GCRA, gcra, redislimit.WithLeases(time.Second, 11)},
		{"fixed window", limiters.FixedWindow, fixed, redislimit.WithLeases(time.Second, 0)},
		{"two limits", limiters.GCRA, two, redislimit.WithLeases(time.Second, 0)},
	} {
		if _, err := redislimit.New(c, tc.a, tc.limits, tc.opt); !errors.Is(err, limiters.ErrInvalidParameter) {
			t.Errorf("%s: %v, want ErrInvalidParameter", tc.name, err)
		} else {
			t.Log(err)
		}
	}
	if _, err := redislimit.New(c, limiters.GCRA, gcra, redislimit.WithLeases(time.Second, 10)); err != nil {
		t.Errorf("a lease of the whole capacity: %v", err)
	}
}

// With leases, a reservation is decided by Redis exactly, as by a limiter
// without them, and settled on Redis (it used to be refused): on the same
// trace of reservations and settles, the two decide the same, field for
// field. Plain decisions still lease.
func TestLeaseSettle(t *testing.T) {
	for _, a := range []limiters.Algorithm{limiters.GCRA, limiters.TokenBucket} {
		r := rand.New(rand.NewPCG(5, 6))
		lim := limiters.Limit{N: 5, Per: time.Second, Burst: 10}
		leased := leaseFleet(t, a, lim, 1, time.Second)[0]
		exact := leaseFleet(t, a, lim, 1, 0)[0]
		if n := settleTrace(t, r, string(a)+" leased", exact, leased, randomTrace(r, lim.Window(), lim.Quota(), 200)); n < 30 {
			t.Errorf("fixture: %d settles", n)
		}
		before := leased.Counts().Sent
		for range 5 {
			if d, err := leased.AllowN(context.Background(), "plain", 1); err != nil || !d.Allowed {
				t.Fatalf("a plain decision: %s, %v", show(d), err)
			}
		}
		if sent := leased.Counts().Sent - before; sent >= 5 {
			t.Errorf("5 plain decisions took %d scripts: want leases", sent)
		}
	}
}
