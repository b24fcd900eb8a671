package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/internal/reservation"
	"github.com/ratelab/ratelab/limiters/redislimit"
)

// resets are a reservation's ResetAfter under each of several limits: what
// its settle needs.
func resets(r limiters.Reservation) []time.Duration {
	return reservation.Get[limiters.Reservation, limiters.Decision](r).Resets
}

// settleTrace replays trace through want and got as reservations (and now
// and then a plain decision), settling an open reservation in place of
// some steps at an actual cost from 0 to three times its estimate (a
// refund, a cancel, a charge past the limit); every decision, each
// limit's part of every reservation, and every state a settle reports,
// must be the same, field for field.
func settleTrace(t *testing.T, r *rand.Rand, what string, want, got limiters.Settler, trace []step) int {
	t.Helper()
	ctx := context.Background()
	type open struct{ want, got limiters.Reservation }
	var held []open
	settled := 0
	for i, st := range trace {
		if len(held) > 0 && r.IntN(3) == 0 {
			j := r.IntN(len(held))
			h := held[j]
			held = slices.Delete(held, j, j+1)
			actual := r.IntN(3*h.want.Cost() + 1)
			w, werr := want.Settle(ctx, limiters.Settlement{Reservation: h.want, Actual: actual, At: st.at})
			g, gerr := got.Settle(ctx, limiters.Settlement{Reservation: h.got, Actual: actual, At: st.at})
			if werr != nil || gerr != nil || !same(g, w) {
				t.Fatalf("%s, step %d: Settle(%s reserved %d at %v, %v, %d):\n  got  %s %v\n  want %s %v", what, i, h.want.Key(), h.want.Cost(),
					h.want.At().Format(time.RFC3339Nano), st.at.Format(time.RFC3339Nano), actual, show(g), gerr, show(w), werr)
			}
			settled++
			continue
		}
		w, werr := want.Reserve(ctx, at(st.key, st.at, st.n))
		g, gerr := got.Reserve(ctx, at(st.key, st.at, st.n))
		if werr != nil || gerr != nil || !same(g.Decision(), w.Decision()) || g.Cost() != w.Cost() || fmt.Sprint(resets(g)) != fmt.Sprint(resets(w)) {
			t.Fatalf("%s, step %d: Reserve(%s, %v, %d):\n  got  %s, cost %d, resets %v (%v)\n  want %s, cost %d, resets %v (%v)", what, i, st.key, st.at.Format(time.RFC3339Nano), st.n,
				show(g.Decision()), g.Cost(), resets(g), gerr, show(w.Decision()), w.Cost(), resets(w), werr)
		}
		if w.Allowed() {
			held = append(held, open{w, g})
		}
	}
	return settled
}

// Reserving and settling on Redis decides as in memory, every algorithm,
// one limit (GCRA's with its own one-limit script) and several, times
// stepping back now and then as decisions' do (a settle that changes
// nothing must leave the key as it was, or a later call at an earlier
// time is decided differently).
func TestSettleSameAsMemory(t *testing.T) {
	c := server(t)
	r := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			settled := 0
			for trial := range 10 {
				lim := []limiters.Limit{randomLimit(r, a, trial%5 == 4)}
				settled += settleTrace(t, r, lim[0].String(), inMemory(t, a, lim), onRedis(t, c, a, lim), randomTrace(r, lim[0].Window(), lim[0].Quota(), 150))
			}
			for range 4 {
				limits := randomLimits(r, 2+r.IntN(2))
				settled += settleTrace(t, r, fmt.Sprint(limits), inMemory(t, a, limits), onRedis(t, c, a, limits), randomTrace(r, limits[0].Per, 10, 150))
			}
			if settled < 200 {
				t.Errorf("fixture: %d settles", settled)
			}
		})
	}
}

// inMemory is composite's limiter of limits, closed when the test ends.
func inMemory(t *testing.T, a limiters.Algorithm, limits []limiters.Limit) *composite.Limiter {
	l, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// onRedis is a Redis limiter of limits under a prefix of its own.
func onRedis(t *testing.T, c *redis.Client, a limiters.Algorithm, limits []limiters.Limit, opts ...redislimit.Option) *redislimit.Limiter {
	l, err := redislimit.New(c, a, limits, append([]redislimit.Option{patient, redislimit.WithPrefix(prefix(t, c))}, opts...)...)
	if err != nil {
		t.Fatalf("%v: %v", limits, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// What cannot be settled says so: a reservation another limiter made (of
// another shape; with an opaque reservation, the shape itself can no
// longer be forged), one denied, one Redis did not make, and a negative
// actual cost.
func TestSettleRefused(t *testing.T) {
	c := server(t)
	ctx := t.Context()
	limits := []limiters.Limit{{Name: "a", N: 5, Per: time.Second}, {Name: "b", N: 50, Per: time.Minute}}
	l := onRedis(t, c, limiters.SlidingLog, limits)
	other := onRedis(t, c, limiters.SlidingLog, limits[:1])
	r, err := l.Reserve(ctx, limiters.Request{Key: "k", N: 2})
	if err != nil || !r.Allowed() || len(resets(r)) != 2 {
		t.Fatalf("reserved %s, %v", show(r.Decision()), err)
	}
	if _, err := other.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 1}); !errors.Is(err, limiters.ErrNotReserved) {
		t.Errorf("a reservation of two limits, settled by a limiter of one: %v, want ErrNotReserved", err)
	}
	if _, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: -1}); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("an actual cost of -1: %v, want ErrInvalidParameter", err)
	}
	denied, err := l.Reserve(ctx, limiters.Request{Key: "k", N: 9})
	if err != nil || denied.Allowed() {
		t.Fatalf("reserved %s, %v; want a denial", show(denied.Decision()), err)
	}
	if _, err := l.Settle(ctx, limiters.Settlement{Reservation: denied, Actual: 0}); !errors.Is(err, limiters.ErrNotReserved) {
		t.Errorf("settling a denial: %v, want ErrNotReserved", err)
	}
	// A port nothing listens on: dialled, refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gone := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer gone.Close()
	down, err := redislimit.New(gone, limiters.GCRA, []limiters.Limit{{N: 10, Per: time.Second}}, redislimit.WithTimeout(50*time.Millisecond), redislimit.WithFailureMode(redislimit.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	r, err = down.Reserve(ctx, limiters.Request{Key: "k", N: 1})
	if !errors.Is(err, redislimit.ErrUnavailable) || r.Cost() != 0 || r.Allowed() || !r.Decision().Allowed {
		t.Errorf("Redis down: %s, cost %d, %v; want the failure mode's admission, and nothing reserved", show(r.Decision()), r.Cost(), err)
	}
	if _, err := down.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 0}); !errors.Is(err, limiters.ErrNotReserved) {
		t.Errorf("settling what Redis did not reserve: %v", err)
	}
}

// A settle forgets the key's cached denial: a refund may admit what the
// cache would deny.
func TestSettleClearsDenialCache(t *testing.T) {
	c := server(t)
	ctx := t.Context()
	l := onRedis(t, c, limiters.GCRA, []limiters.Limit{{N: 1, Per: time.Hour, Burst: 4}})
	t0 := time.Unix(1_800_000_000, 0)
	r, err := l.Reserve(ctx, at("k", t0, 4))
	if err != nil || !r.Allowed() {
		t.Fatalf("reserved %s, %v", show(r.Decision()), err)
	}
	for range 3 { // denied, then denied from the cache
		if d, _ := l.Decide(ctx, at("k", t0, 1)); d.Allowed {
			t.Fatalf("a spent key admitted: %s", show(d))
		}
	}
	sent := l.Counts().Sent
	if d, err := l.Settle(ctx, limiters.Settlement{Reservation: r, Actual: 1, At: t0}); err != nil || d.Remaining != 3 {
		t.Fatalf("Settle at 1 of 4: %s, %v; want 3 back", show(d), err)
	}
	if d, _ := l.Decide(ctx, at("k", t0, 1)); !d.Allowed || l.Counts().Sent != sent+2 {
		t.Errorf("after the refund: %s, %d scripts sent since; want admitted by Redis", show(d), l.Counts().Sent-sent)
	}
}
