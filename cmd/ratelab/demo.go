package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ratelab/ratelab/internal/demo"
)

const demoUsage = `Usage:

	ratelab demo [--json] [--color auto|always|never]

Demo walks through rate limiting, in simulated time, in a few seconds of
reading: a token bucket's burst and refill and its steady state (the
worked examples the project grew from), two users kept apart, the window
edge under all six algorithms side by side, a free and a premium user,
and a limit of three windows at once that denies on the hour. Every
decision is made by the limiters ratelab ships, at explicit times, so the
answers are the same on every run.

The text is coloured on a terminal (--color auto) unless NO_COLOR is set
or TERM is dumb;
--json writes the scenes and every decision as one JSON document instead.

Flags:
`

func runDemo(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "write JSON: the scenes and every decision")
	color := fs.String("color", "auto", "colour the text: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoUsage)
		printDefaults(fs)
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badUsage(fs, fmt.Errorf("demo: no arguments, got %q", fs.Arg(0)))
	}
	var paint bool
	switch *color {
	case "auto":
		paint = isTerminal(stdout) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	case "always":
		paint = true
	case "never":
	default:
		return badUsage(fs, fmt.Errorf("demo: --color must be auto, always or never, got %q", *color))
	}
	scenes, err := demo.Scenes()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"scenes": scenes})
	}
	return demo.Write(stdout, scenes, paint)
}
