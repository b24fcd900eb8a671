package harness

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Flags declares every setting of the lab on fs, each bound to its field
// of c, so that a command's flags fill c: the lab's own (config.go), the
// Redis rows' (redis.go) and each mode's, in the mode's file. A setting
// left zero takes its default (Defaults), the full lab's or the quick
// one's, as its usage says.
func (c *Config) Flags(fs *flag.FlagSet) {
	c.flags(fs)
	c.Redis.flags(fs)
	for _, m := range modes {
		if m.flags != nil {
			m.flags(c, fs)
		}
	}
}

// settings are the settings c ran with, as the flags that set them say
// them: the lab's and those of the modes c ran (c defaulted), and the
// subjects that ran, by name. They are what a results file records.
func (c Config) settings(ran []Subject) map[string]string {
	fs := flag.NewFlagSet("settings", flag.ContinueOnError)
	c.flags(fs)
	for _, m := range modes {
		if m.flags != nil && slices.Contains(c.Modes, m.Name) {
			m.flags(&c, fs)
		}
	}
	out := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f.Value.String() })
	names := make([]string, len(ran))
	for i, s := range ran {
		names[i] = s.Name
	}
	out["limiters"] = strings.Join(names, ",")
	return out
}

// names is a flag.Value of comma-separated names ("gcra,go-limiter").
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(s string) error {
	*n = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*n = append(*n, x)
		}
	}
	return nil
}

// counts is a flag.Value of comma-separated whole numbers ("1,2,8,64").
type counts []int

func (n *counts) String() string {
	s := make([]string, len(*n))
	for i, v := range *n {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (n *counts) Set(s string) error {
	*n = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		v, err := strconv.Atoi(x)
		if err != nil {
			return fmt.Errorf("%q is not a number", x)
		}
		*n = append(*n, v)
	}
	return nil
}
