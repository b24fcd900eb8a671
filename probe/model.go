// Package probe judges a rate limiter behind HTTP from the outside, by
// what it answers: which of the six algorithms it behaves as, with what
// limit and in which of the variants real implementations use, whether
// its fields and waits tell the truth, and whether it holds under
// concurrency. When none of the six explains what it did, it says so.
//
// The package keeps a fourth copy of the algorithms (after the in-memory
// limiters, the Redis scripts and the tests' rational models), the
// Models. It exists because a fit needs what a limiter does not offer: a
// decision at any instant that leaves the key as it was, a history
// recorded at instants the fit chooses, and the variants real
// implementations use and ratelab's own do not: windows started at a
// key's first request, refusals counted, a window started again by a
// refusal, a weighted count rounded or truncated, and time kept in whole
// seconds. TestModelsAgree checks the exact variants against the
// in-memory limiters on random traces.
//
// A probe goes by steps, a file each: it calibrates (calibrate.go,
// watch.go), fingerprints (plan.go, lean.go), fits (search.go, state.go),
// asks rounds of experiments (ask.go, design.go), names (report.go), looks
// longer (longer.go), checks (checks.go, retryafter.go) and reports
// (file.go). docs/house.md draws the path of a request through them.
package probe

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// model is one way a limiter may decide: an algorithm and its limit, and
// the variants real implementations differ in. The token bucket, the
// leaky bucket and GCRA are one policy (the same decisions for the same
// limit); a model of any of the three decides as GCRA.
type model struct {
	Algorithm limiters.Algorithm
	Limit     limiters.Limit
	// Anchored: a window algorithm's windows start at a key's first
	// request (the first after the last window ended), as stores that
	// keep a key with a time to live do; otherwise they are aligned on
	// the Unix epoch.
	Anchored bool
	// CountsRefused: a refused request is counted too, as by a store that
	// adds and then compares (for a bucket, a refusal runs its debt on).
	CountsRefused bool
	// Restarts: a refused request starts an anchored fixed window again,
	// so that a key that keeps sending stays refused until it has been
	// quiet for a window (@fastify/rate-limit's continueExceeding).
	Restarts bool
	// Seconds: time is kept in whole seconds, rounded down, as by stores
	// that read the clock in seconds.
	Seconds bool
	// Rounding is how a sliding counter compares its weighted count.
	Rounding rounding
	// Phase is where the windows of a fixed window or a sliding counter
	// not anchored start,
	// after the epoch's: the same for every key, at an instant of the
	// limiter's own (a ticker that clears every count, a library that
	// aligns its windows to its start). 0: on the epoch.
	Phase time.Duration
	// Nginx: a bucket on nginx's clock (limit_req): time in whole
	// milliseconds, the refill since a key's last admission in whole
	// thousandths of a request at a rate in thousandths a second rounded
	// down (40r/m refills 666 a second, not 666.67). A key pressed at 47
	// a second beside a zone of 299 a minute refills that zone 104
	// thousandths an admission, not 104.6: 0.6% slower, a request in 170.
	Nginx bool
	// Also is a second limit the target keeps on the same key, of
	// AlsoAlgorithm (empty: the model's), plain: a request is admitted
	// only if both admit it, and a refusal consumes from neither (as
	// composite decides, and nginx's two limit_req lines). Zero: none.
	Also          limiters.Limit
	AlsoAlgorithm limiters.Algorithm
}

// second is m's second limit as a model of its own (plain), and whether
// it has one.
func (m model) second() (model, bool) {
	if m.Also.N == 0 {
		return model{}, false
	}
	o := model{Algorithm: cmp.Or(m.AlsoAlgorithm, m.Algorithm), Limit: m.Also}
	o.Nginx = m.Nginx && o.Algorithm.IsBucket() // one server's clock
	return o, true
}

// first is m without its second limit.
func (m model) first() model {
	m.Also, m.AlsoAlgorithm = limiters.Limit{}, ""
	return m
}

// rounding is how a sliding window counter rounds the previous window's
// weighted count before it compares.
type rounding int8

const (
	// exact compares the weighted count as a real number (as ratelab
	// does; rounding it up is the same).
	exact rounding = iota
	// rounded rounds it to the nearest whole request, halves up.
	rounded
	// truncated rounds it down.
	truncated
)

// String names the model as the probe's tables do: "gcra 10/s burst 6",
// "fixed-window 20/2s, first request, refusals counted".
func (m model) String() string {
	s := []string{string(m.Algorithm) + " " + m.Limit.String()}
	s = append(s, m.variants()...)
	if o, ok := m.second(); ok {
		return strings.Join(s, ", ") + "; and " + o.String()
	}
	return strings.Join(s, ", ")
}

// variants names what m does that the exact, epoch-aligned model of its
// algorithm does not.
func (m model) variants() []string {
	var out []string
	if m.Anchored {
		out = append(out, "windows from a key's first request")
	}
	if m.Restarts {
		out = append(out, "a refusal restarts the window")
	} else if m.CountsRefused {
		out = append(out, "refusals counted")
	}
	switch m.Rounding {
	case rounded:
		out = append(out, "weighted count rounded")
	case truncated:
		out = append(out, "weighted count truncated")
	}
	if m.Seconds {
		out = append(out, "time in whole seconds")
	}
	if m.Nginx {
		out = append(out, "on nginx's clock (whole milliseconds and thousandths of a request)")
	}
	switch {
	case m.Phase < 0:
		out = append(out, "windows at a phase of their own")
	case m.Phase > 0:
		out = append(out, phaseText(m.Limit.Per, m.Phase))
	}
	return out
}

// kind is m's variants as a kind of limiter: a phase of its own is one
// kind, whatever the phase (as a limit is one kind, whatever the rate).
func (m model) kind() []string {
	if m.Phase != 0 {
		m.Phase = -1
	}
	return m.variants()
}

// phaseText says where windows of w at a phase of their own start, as a
// clock reads it: "windows starting at :00.700 past each even second",
// "... past each minute", "... past each multiple of 10s"; or "windows
// starting 700ms into the epoch's" where w is no whole divisor of a
// minute.
func phaseText(w, phase time.Duration) string {
	at := fmt.Sprintf("windows starting at :%06.3f past each ", phase.Seconds())
	switch {
	case w == time.Second:
		return at + "second"
	case w == 2*time.Second:
		return at + "even second"
	case w == time.Minute:
		return at + "minute"
	case w%time.Second == 0 && time.Minute%w == 0:
		return at + "multiple of " + w.String()
	}
	return fmt.Sprintf("windows starting %v into the epoch's", phase)
}

// Family is the policy the model's algorithm belongs to: the three
// buckets are one ("bucket"); each window algorithm is its own.
func (m model) Family() string { return family(m.Algorithm) }

func family(a limiters.Algorithm) string {
	if a.IsBucket() {
		return "bucket"
	}
	return string(a)
}

// Validate reports whether the model can be replayed: a limit its
// algorithm takes, and each variant on an algorithm that has it; a second
// limit longer than the first.
func (m model) Validate() error {
	if o, ok := m.second(); ok {
		if err := o.Validate(); err != nil {
			return err
		}
		if o.Limit.Window() <= m.Limit.Window() {
			return fmt.Errorf("probe: %s: the second limit's window is the longer", m)
		}
	}
	if err := m.Limit.Validate(m.Algorithm); err != nil {
		return fmt.Errorf("probe: %s: %w", m, err)
	}
	a := m.Algorithm
	switch {
	case m.Anchored && (a.IsBucket() || a == limiters.SlidingLog):
		return fmt.Errorf("probe: %s: a %s has no windows to anchor", m, a)
	case m.Restarts && (a != limiters.FixedWindow || !m.Anchored):
		return fmt.Errorf("probe: %s: only an anchored fixed window restarts", m)
	case m.Nginx && (!a.IsBucket() || m.CountsRefused || m.Seconds):
		return fmt.Errorf("probe: %s: only a plain bucket keeps nginx's clock", m)
	case m.Rounding != exact && a != limiters.SlidingCounter:
		return fmt.Errorf("probe: %s: only a sliding counter weighs a count", m)
	case m.Phase != 0 && (a != limiters.FixedWindow && a != limiters.SlidingCounter || m.Anchored || m.Seconds || m.Phase < 0 || m.Phase >= m.Limit.Per):
		return fmt.Errorf("probe: %s: only the windows of a fixed window or a sliding counter on a clock of its own have a phase, within a window", m)
	}
	return nil
}

// allVariants returns every variant of algorithm a the fit tries, the exact
// and simplest first, with no limit set.
func allVariants(a limiters.Algorithm) []model {
	var out []model
	for _, seconds := range []bool{false, true} {
		switch a {
		case limiters.FixedWindow:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, Anchored: true, Seconds: seconds},
				model{Algorithm: a, Anchored: true, CountsRefused: true, Restarts: true, Seconds: seconds})
		case limiters.SlidingLog:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, CountsRefused: true, Seconds: seconds})
		case limiters.SlidingCounter:
			for _, r := range []rounding{exact, rounded, truncated} {
				for _, anchored := range []bool{false, true} {
					for _, counts := range []bool{false, true} {
						out = append(out, model{Algorithm: a, Anchored: anchored, CountsRefused: counts, Seconds: seconds, Rounding: r})
					}
				}
			}
		default:
			out = append(out, model{Algorithm: a, Seconds: seconds}, model{Algorithm: a, CountsRefused: true, Seconds: seconds})
		}
	}
	return out
}

// oddity is how far m is from its algorithm's plain form: the number of
// variants it has. Among models that explain as much, the plainer wins.
func (m model) oddity() int { return len(m.variants()) }
