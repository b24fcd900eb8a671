package limiters_test

import (
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/ratelab/ratelab/limiters"
)

// A command's --limit, written as a configuration file writes a limit.
func ExampleLimit_Set() {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	limit := limiters.PerSecond(10) // the default
	fs.Var(&limit, "limit", `the limit, N/PERIOD ("5/s burst 10" for a bucket)`)
	if err := fs.Parse([]string{"--limit", "100/min burst 20"}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(limit.N, limit.Per, limit.Burst, limit)
	// Output: 100 1m0s 20 100/min burst 20
}

// Set reads what ParseLimit reads, keeps the limit's name, and leaves
// the limit as it was on an error.
func TestLimitSet(t *testing.T) {
	l := limiters.Limit{Name: "daily", N: 7, Per: 24 * 3600e9}
	if err := l.Set("5/60s"); err != nil || l != (limiters.Limit{Name: "daily", N: 5, Per: 60e9}) {
		t.Errorf("Set(5/60s) = %+v, %v", l, err)
	}
	before := l
	if err := l.Set("five a minute"); !errors.Is(err, limiters.ErrLimitSyntax) || l != before {
		t.Errorf("Set(five a minute) = %+v, %v; want %+v and ErrLimitSyntax", l, err, before)
	}
	var _ flag.Value = &l
}
