package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// limitUsage is what --limit's help says, for the commands that take an
// algorithm beside it.
const limitUsage = `the limit, N/PERIOD: "100/min", "5/60s"; a bucket's burst after it: "10/s burst 50"`

// goneFlags are the flags a limit was once written with, and what says
// the same now.
var goneFlags = map[string]string{
	"window":   `--limit N/PERIOD (--limit 100 --window 1m is --limit 100/min)`,
	"capacity": `--limit "R/s burst C" (--capacity 10 --rate 5 is --limit "5/s burst 10")`,
	"rate":     `--limit "R/s burst C" (--capacity 10 --rate 5 is --limit "5/s burst 10")`,
	"policy":   `--limit, as in every command (--limit "10/s burst 6")`,
}

// goneFlag returns, for err of a flag set's parse, the error that says what
// replaced the flag err names, if it is one of goneFlags; else err.
func goneFlag(err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	if now, gone := goneFlags[name]; gone {
		return fmt.Errorf("--%s is gone: the limit is one flag, %s", name, now)
	}
	return err
}

// algoLimit is how serve and replay are told what to decide with: --algo
// and --limit, or a configuration file of tiers (--config).
type algoLimit struct {
	algo   string
	limit  limiters.Limit // a flag.Value: --limit "5/s burst 10"
	config string
}

func (a *algoLimit) define(fs *flag.FlagSet, configUsage string) {
	fs.StringVar(&a.algo, "algo", "", "the algorithm: fixed-window, sliding-log, sliding-counter, token-bucket, leaky-bucket or gcra")
	fs.Var(&a.limit, "limit", limitUsage)
	fs.StringVar(&a.config, "config", "", configUsage)
}

// check returns the algorithm and the limit the flags give, checked, or
// with --config, none: then neither --algo nor --limit may be given.
func (a *algoLimit) check(set map[string]bool) (limiters.Algorithm, limiters.Limit, error) {
	if a.config != "" {
		for _, f := range []string{"algo", "limit"} {
			if set[f] {
				return "", limiters.Limit{}, fmt.Errorf("--config gives the algorithm and the limits; --%s is not for it", f)
			}
		}
		return "", limiters.Limit{}, nil
	}
	if a.algo == "" {
		return "", limiters.Limit{}, errors.New("--algo or --config is required")
	}
	algo, err := limiters.ParseAlgorithm(a.algo)
	if err != nil {
		return "", limiters.Limit{}, fmt.Errorf("--algo: %w", err)
	}
	if !set["limit"] {
		return "", limiters.Limit{}, fmt.Errorf(`%s needs --limit, as in --limit 100/min ("5/s burst 10" for a bucket)`, algo)
	}
	if err := a.limit.Validate(algo); err != nil {
		return "", limiters.Limit{}, fmt.Errorf("--limit: %w", err)
	}
	return algo, a.limit, nil
}
