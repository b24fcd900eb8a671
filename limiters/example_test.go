package limiters_test

import (
	"fmt"

	"github.com/ratelab/ratelab/limiters"
)

// A limit as a person writes it, and what each algorithm makes of it.
func ExampleParseLimit() {
	l, err := limiters.ParseLimit("10/s burst 50")
	if err != nil {
		panic(err)
	}
	fmt.Println(l, "is", l.N, "per", l.Per, "with a burst of", l.Burst)
	fmt.Println("quota", l.Quota(), "refilled in", l.Window(), "a unit every", l.Interval())
	fmt.Println("for a bucket:", l.Validate(limiters.GCRA))
	fmt.Println("for a window:", l.Validate(limiters.FixedWindow))
	// Output:
	// 10/s burst 50 is 10 per 1s with a burst of 50
	// quota 50 refilled in 5s a unit every 100ms
	// for a bucket: <nil>
	// for a window: limiters: invalid parameter: fixed-window has no burst: it takes N/W, as in 10/s
}

// A capacity and a fractional rate, as the CLI's --capacity and --rate
// give them.
func ExampleBucket() {
	l, err := limiters.Bucket(10, 2.5)
	if err != nil {
		panic(err)
	}
	fmt.Println(l, "quota", l.Quota(), "a unit every", l.Interval())
	_, err = limiters.Bucket(10, 7.5e8)
	fmt.Println(err)
	// Output:
	// 1/400ms burst 10 quota 10 a unit every 400ms
	// limiters: invalid parameter: rate 7.5e+08 per second cannot be kept exactly: its interval of 1.333ns is rounded to whole nanoseconds, which would make it 1e+09; the nearest rates that are exact are 5e+08 and 1e+09
}
