package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
)

// A small random log: clients each sending bursts, pauses and steady runs,
// in time order, costs of 1 to 3.
type smallLog struct {
	ids   []int32
	at, n []int64
}

func randomLog(seed uint64) smallLog {
	rng := rand.New(rand.NewPCG(seed, 3))
	var l smallLog
	clients := 1 + rng.IntN(6)
	next := make([]int64, clients)
	for i := range next {
		next[i] = int64(rng.IntN(5_000)) * int64(time.Millisecond)
	}
	for range 50 + rng.IntN(250) {
		id := int32(rng.IntN(clients))
		l.ids, l.at, l.n = append(l.ids, id), append(l.at, next[id]), append(l.n, int64(1+rng.IntN(3)*rng.IntN(2)))
		switch rng.IntN(6) {
		case 0: // at once
		case 1:
			next[id] += int64(rng.IntN(20)) * int64(time.Second)
		default:
			next[id] += int64(rng.IntN(800)) * int64(time.Millisecond)
		}
	}
	// In time order, as a log is read.
	idx := make([]int, len(l.at))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(l.at[a] - l.at[b]) })
	var s smallLog
	for _, i := range idx {
		s.ids, s.at, s.n = append(s.ids, l.ids[i]), append(s.at, l.at[i]), append(s.n, l.n[i])
	}
	return s
}

// For 20 random small logs, each client's envelope at each period and its
// least burst at each rate equal a brute force over every pair of its
// requests.
func TestCurvesAgainstBruteForce(t *testing.T) {
	periods := []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, time.Minute}
	for seed := range uint64(20) {
		l := randomLog(seed)
		cs := newCurves(periods, DefaultRates)
		var decided chunks
		for i := range l.ids {
			cs.see(l.ids[i], l.at[i], l.n[i])
			decided.add(logged{id: l.ids[i], n: int32(l.n[i]), at: l.at[i]})
		}
		cs.envelopes(decided)
		for id := range int32(len(cs.of)) {
			var at, n []int64
			for i := range l.ids {
				if l.ids[i] == id {
					at, n = append(at, l.at[i]), append(n, l.n[i])
				}
			}
			if len(at) == 0 {
				continue
			}
			for k, d := range periods {
				var want int64
				for j := range at {
					var sum int64
					for i := 0; i <= j; i++ {
						if at[i] > at[j]-int64(d) {
							sum += n[i]
						}
					}
					want = max(want, sum)
				}
				if got := cs.peak(id, k); got != want {
					t.Errorf("seed %d client %d: most in any %v: %d, want %d", seed, id, d, got, want)
				}
			}
			for k, r := range DefaultRates {
				T := int64(r.Interval())
				var want int64 = 1
				for j := range at {
					var sum int64
					for i := j; i >= 0; i-- {
						sum += n[i]
						need := T*sum - (at[j] - at[i])
						want = max(want, (need+T-1)/T)
					}
				}
				if got := cs.burst(id, k); got != want {
					t.Errorf("seed %d client %d: least burst at %s: %d, want %d", seed, id, r, got, want)
				}
			}
		}
	}
}

// A bucket at a rate with the least burst a client needs there never
// refuses it, and with one less it does: the clients the library's bucket
// refuses at each burst are those the curves predict, exactly.
func TestCurvesPredictTheBucket(t *testing.T) {
	for seed := range uint64(20) {
		l := randomLog(seed)
		cs := newCurves(nil, DefaultRates)
		for i := range l.ids {
			cs.see(l.ids[i], l.at[i], l.n[i])
		}
		for k, r := range DefaultRates {
			var bursts []int64
			for id := range int32(len(cs.of)) {
				if cs.of[id] != nil {
					bursts = append(bursts, cs.burst(id, k))
				}
			}
			for _, b := range bursts {
				for _, burst := range []int64{b - 1, b} {
					if burst < 1 {
						continue
					}
					limit := limiters.Limit{N: r.N, Per: r.Per, Burst: int(burst)}
					bucket, err := composite.NewAlgorithm(limiters.GCRA, limit, limiters.WithSweepInterval(-1))
					if err != nil {
						t.Fatal(err)
					}
					refused := map[int32]bool{}
					for i := range l.ids {
						d, err := bucket.Decide(context.Background(), limiters.Request{Key: fmt.Sprint(l.ids[i]), N: int(l.n[i]), At: time.Unix(0, 1_800_000_000_000_000_000+l.at[i])})
						if err != nil || !d.Allowed {
							refused[l.ids[i]] = true
						}
					}
					bucket.Close()
					for id := range int32(len(cs.of)) {
						if cs.of[id] == nil {
							continue
						}
						if want := cs.burst(id, k) > burst; refused[id] != want {
							t.Errorf("seed %d, %s: client %d refused %v; its least burst is %d", seed, limit, id, refused[id], cs.burst(id, k))
						}
					}
				}
			}
		}
	}
}
