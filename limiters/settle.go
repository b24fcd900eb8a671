package limiters

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reservation is a request decided at an estimated cost whose actual cost
// is known only once it is done: an LLM call's tokens, a download's bytes.
// Reserve decides it as AllowN would at Cost; once the actual cost is
// known, Settle charges the difference: a refund when the request cost
// less, a further charge when it cost more. A reservation never settled
// stays charged at its estimate; the limiter keeps no record of it, so it
// costs nothing to abandon.
type Reservation struct {
	// Key is the key it was decided for, At the time it was decided at,
	// and Cost the estimate.
	Key  string
	At   time.Time
	Cost int
	// Decision is what Reserve decided. A denied reservation charged
	// nothing and has nothing to settle.
	Decision
	// Per is, for a reservation under several limits at once (package
	// composite), what each limit decided, in the order of its limits;
	// settling charges every one. Nil under one limit.
	Per []Decision
}

// Settler is a limiter whose admissions can be settled at their actual
// cost after the fact.
//
// Settling is exact in each algorithm's own terms (each package says
// what a refund and a charge mean for it): a refund gives back only what
// the reservation still holds of the key's quota (nothing once the
// window it was counted in has passed, or the bucket has refilled past
// it), and never more than a full quota; a charge is taken whatever the
// quota, so the key may go into debt, which later requests wait out, and
// Remaining is never negative.
//
// In memory, reserving and settling allocate nothing.
type Settler interface {
	Limiter
	// Reserve decides n events for key now, as AllowN does, and returns
	// the reservation to settle.
	Reserve(ctx context.Context, key string, n int) (Reservation, error)
	// Settle charges the admitted reservation r its actual cost now
	// (0 cancels it: a full refund) and returns the key's state after, as
	// Peek reports it.
	Settle(ctx context.Context, r Reservation, actual int) (Decision, error)
}

// AtSettler is a Settler that also reserves and settles at explicit
// times. Every in-memory limiter is one.
type AtSettler interface {
	Settler
	AtLimiter
	// ReserveAt is Reserve at time t.
	ReserveAt(key string, t time.Time, n int) Reservation
	// SettleAt is Settle at time t.
	SettleAt(r Reservation, t time.Time, actual int) (Decision, error)
}

// ErrNotReserved reports the settling of a reservation that was denied:
// it charged nothing, and settles nothing.
var ErrNotReserved = errors.New("limiters: the reservation was denied, so there is nothing to settle")

// Settlement checks that r may be settled at actual and returns what
// settling it takes: a refund of the units r holds beyond actual, or a
// charge of the units actual needs beyond r's. Limiters call it.
func Settlement(r Reservation, actual int) (refund, charge int, err error) {
	switch {
	case actual < 0:
		return 0, 0, fmt.Errorf("%w: an actual cost of %d, want 0 or more", ErrInvalidParameter, actual)
	case !r.Allowed || r.Cost < 1:
		return 0, 0, ErrNotReserved
	}
	if actual < r.Cost {
		return r.Cost - actual, 0, nil
	}
	return 0, actual - r.Cost, nil
}
