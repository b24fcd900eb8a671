// Package reservation lets the limiters of this module make and read a
// limiters.Reservation, whose fields no one else can: package limiters
// registers how (Register), and the limiters call Make and Get.
//
// It imports nothing of the module, so that package limiters can import
// it; the types come in as type parameters.
package reservation

import "time"

// Fields are what a reservation holds.
type Fields[D any] struct {
	// Owner is the limiter that made it: only it settles it.
	Owner any
	// Key, At (Unix nanoseconds) and Cost are the request reserved.
	Key  string
	At   int64
	Cost int
	// Decision is what the limiter decided.
	Decision D
	// Resets are, under several limits, each limit's ResetAfter after the
	// decision, in the limiter's order; nil under one.
	Resets []time.Duration
}

var mk, get any

// Register says how reservations of type R, deciding with D, are made and
// read. Package limiters calls it once, when it starts.
func Register[R, D any](m func(Fields[D]) R, g func(R) Fields[D]) { mk, get = m, g }

// Make returns the reservation of f.
func Make[R, D any](f Fields[D]) R { return mk.(func(Fields[D]) R)(f) }

// Get returns what r holds.
func Get[R, D any](r R) Fields[D] { return get.(func(R) Fields[D])(r) }
