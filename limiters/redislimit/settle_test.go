package redislimit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/limiters/memory"
)

// settleTrace replays trace through mem and red as reservations (and now
// and then a plain decision), settling an open reservation in place of
// some steps at an actual cost from 0 to three times its estimate (a
// refund, a cancel, a charge past the limit); every decision, and every
// state a settle reports, must be the same, field for field.
func settleTrace(t *testing.T, r *rand.Rand, what string, mem limiters.AtSettler, red *Limiter, trace []step) int {
	t.Helper()
	type open struct{ mem, red limiters.Reservation }
	var held []open
	settled := 0
	for i, st := range trace {
		if len(held) > 0 && r.IntN(3) == 0 {
			j := r.IntN(len(held))
			h := held[j]
			held = append(held[:j], held[j+1:]...)
			actual := r.IntN(3*h.mem.Cost + 1)
			want, werr := mem.SettleAt(h.mem, st.at, actual)
			got, gerr := red.SettleAt(h.red, st.at, actual)
			if werr != nil || gerr != nil || got != want {
				t.Fatalf("%s, step %d: SettleAt(%s reserved %d at %v, %v, %d):\n  redis  %+v %v\n  memory %+v %v", what, i, h.mem.Key, h.mem.Cost,
					h.mem.At.Format(time.RFC3339Nano), st.at.Format(time.RFC3339Nano), actual, got, gerr, want, werr)
			}
			settled++
			continue
		}
		want, got := mem.ReserveAt(st.key, st.at, st.n), red.ReserveAt(st.key, st.at, st.n)
		if got.Decision != want.Decision || len(got.Per) != len(want.Per) {
			t.Fatalf("%s, step %d: ReserveAt(%s, %v, %d):\n  redis  %+v\n  memory %+v", what, i, st.key, st.at.Format(time.RFC3339Nano), st.n, got, want)
		}
		for k := range want.Per {
			if got.Per[k] != want.Per[k] {
				t.Fatalf("%s, step %d: limit %d decided %+v on Redis, %+v in memory", what, i, k, got.Per[k], want.Per[k])
			}
		}
		if want.Allowed {
			held = append(held, open{want, got})
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
				s := randomSpec(r, a, trial%5 == 4)
				mem, err := memory.New(s, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := New(c, s, WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatalf("%v: %v", s, err)
				}
				settled += settleTrace(t, r, s.String(), mem, red, randomTrace(r, s.Judged().Length, s.Judged().Limit, 150))
			}
			for range 4 {
				limits := randomLimits(r, 2+r.IntN(2))
				mem, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				red, err := NewComposite(c, a, limits, WithPrefix(prefix(t, c)))
				if err != nil {
					t.Fatal(err)
				}
				settled += settleTrace(t, r, fmt.Sprint(limits), mem, red, randomTrace(r, limits[0].Rate.Per, 10, 150))
			}
			if settled < 200 {
				t.Errorf("fixture: %d settles", settled)
			}
		})
	}
}

// What cannot be settled says so: a leasing limiter, packed keys, a
// reservation of another shape, and one Redis did not make.
func TestSettleRefused(t *testing.T) {
	c := server(t)
	spec := limiters.Spec{Algorithm: limiters.GCRA, Bucket: limiters.Bucket{Capacity: 10, Rate: 10}}
	for _, opt := range []Option{WithLeases(100*time.Millisecond, 5), WithPacking(4)} {
		l, err := New(c, spec, WithPrefix(prefix(t, c)), opt)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := l.Reserve(t.Context(), "k", 1); !errors.Is(err, limiters.ErrInvalidParameter) || r.Cost != 0 {
			t.Errorf("reserved %+v, %v", r, err)
		}
		l.Close()
	}
	limits := []composite.Limit{{Name: "a", Rate: limiters.Rate{N: 5, Per: time.Second}}, {Name: "b", Rate: limiters.Rate{N: 50, Per: time.Minute}}}
	l, err := NewComposite(c, limiters.SlidingLog, limits, WithPrefix(prefix(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Reserve(t.Context(), "k", 2)
	if err != nil || !r.Allowed || len(r.Per) != 2 {
		t.Fatalf("reserved %+v, %v", r, err)
	}
	r.Per = r.Per[:1]
	if _, err := l.Settle(t.Context(), r, 1); !errors.Is(err, limiters.ErrInvalidParameter) {
		t.Errorf("a reservation of one limit, for two: %v", err)
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
	down, err := New(gone, spec, WithTimeout(50*time.Millisecond), WithFailureMode(FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	r, err = down.Reserve(t.Context(), "k", 1)
	if !errors.Is(err, ErrUnavailable) || r.Cost != 0 {
		t.Errorf("Redis down: %+v, %v; want nothing reserved", r, err)
	}
	if _, err := down.Settle(t.Context(), r, 0); !errors.Is(err, limiters.ErrNotReserved) {
		t.Errorf("settling what Redis did not reserve: %v", err)
	}
}
