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

// asTyped is a flag error as the user wrote the flag: the flag package
// names one with a single dash (-quik), whatever was typed (--quik); and
// for a flag it does not know, the nearest it does.
func asTyped(err error, args []string, fs *flag.FlagSet) error {
	msg := err.Error()
	i := strings.LastIndex(msg, " -")
	if i < 0 {
		return err
	}
	name, _, _ := strings.Cut(msg[i+2:], ":")
	name, _, _ = strings.Cut(name, " ")
	for _, a := range args {
		typed, _, _ := strings.Cut(a, "=")
		if strings.TrimLeft(typed, "-") == name && strings.HasPrefix(typed, "-") {
			msg = msg[:i+1] + typed + msg[i+2+len(name):]
			break
		}
	}
	if strings.HasPrefix(msg, "flag provided but not defined: ") {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := nearest(name, names); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	return errors.New(msg)
}

// nearest is the one of names nearest s, if it is within an edit for
// every three letters of s (a letter added, dropped, changed or two
// swapped: --quik is --quick, plna is plan; nope is no flag's); "" if
// none is.
func nearest(s string, names []string) string {
	best, most := "", max(1, len(s)/3)+1
	for _, n := range names {
		if d := edits(s, n); d < most {
			best, most = n, d
		}
	}
	return best
}

// edits is how many letters added, dropped, changed or swapped with the
// next turn a into b (the optimal string alignment distance).
func edits(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
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
