package limiters

import (
	"context"
	"errors"
	"time"

	"github.com/ratelab/ratelab/limiters/internal/reservation"
)

// Settler is a limiter whose admissions can be settled at their actual
// cost after the fact: an LLM call's tokens, a download's bytes. Reserve
// decides a request at an estimate, as Decide would; once the actual cost
// is known, Settle charges the difference: a refund when the request cost
// less, a further charge when it cost more. A reservation never settled
// stays charged at its estimate; the limiter keeps no record of it, so it
// costs nothing to abandon.
//
// Settling is exact in each algorithm's own terms (each package says what
// a refund and a charge mean for it): a refund gives back only what the
// reservation still holds of the key's quota (nothing once the window it
// was counted in has passed, or the bucket has refilled past it), and
// never more than a full quota; a charge is taken whatever the quota, so
// the key may go into debt, which later requests wait out, and Remaining
// is never negative.
//
// Every limiter of this module is a Settler. In memory, reserving and
// settling under one limit allocate nothing.
type Settler interface {
	Limiter
	// Reserve decides r as Decide does and returns the reservation to
	// settle. A reservation the limiter did not make (the error is
	// non-nil) or denied settles nothing.
	Reserve(ctx context.Context, r Request) (Reservation, error)
	// Settle charges the reservation its actual cost and returns the
	// key's state after, as a Peek of one unit reports it.
	Settle(ctx context.Context, s Settlement) (Decision, error)
}

// Reservation is a request decided at an estimated cost, to be settled at
// its actual cost by the limiter that made it (Settler). Its fields are
// the limiter's: what a caller needs, its methods tell.
type Reservation struct {
	f reservation.Fields[Decision]
}

func init() {
	reservation.Register(
		func(f reservation.Fields[Decision]) Reservation { return Reservation{f} },
		func(r Reservation) reservation.Fields[Decision] { return r.f },
	)
}

// Key returns the key the reservation was made for.
func (r Reservation) Key() string { return r.f.Key }

// Cost returns the estimate it was decided at; zero when the limiter did
// not decide it.
func (r Reservation) Cost() int { return r.f.Cost }

// At returns the time it was decided at.
func (r Reservation) At() time.Time { return time.Unix(0, r.f.At) }

// Decision returns what the limiter decided.
func (r Reservation) Decision() Decision { return r.f.Decision }

// Allowed reports whether the request was admitted, and so has something
// to settle.
func (r Reservation) Allowed() bool { return r.f.Decision.Allowed && r.f.Cost > 0 }

// Settlement is a reservation's actual cost, to settle.
type Settlement struct {
	// Reservation is what Reserve returned.
	Reservation Reservation
	// Actual is the actual cost, 0 or more; 0 cancels the request (a full
	// refund).
	Actual int
	// At is when it is settled; zero means now, by the limiter's clock.
	At time.Time
}

// ErrNotReserved reports the settling of a reservation that was denied (it
// charged nothing, and settles nothing), or that another limiter made.
var ErrNotReserved = errors.New("limiters: nothing reserved to settle")
