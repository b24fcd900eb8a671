package probe

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// phaseOf places a fixed window's grid from refusals and the admissions
// after them: keys turned at 700ms past even seconds share a stretch
// holding 700ms; turned on the epoch's seconds, the zero span; arcs that
// disagree, none. Requests in flight together say nothing.
func TestPhaseOf(t *testing.T) {
	w := 2 * time.Second
	at := func(d time.Duration) time.Time { return time.Unix(1000, 0).Add(d) }
	// A key refused just before a start and admitted just after it.
	turn := func(key string, start time.Duration) []observation {
		return []observation{
			{Key: key, Sent: at(start - 30*time.Millisecond), Received: at(start - 29*time.Millisecond)},
			{Key: key, Sent: at(start + 10*time.Millisecond), Received: at(start + 11*time.Millisecond), Admitted: true},
		}
	}
	for _, tt := range []struct {
		name  string
		keys  [][]observation
		ok    bool
		holds time.Duration // a phase the stretch must hold; -1: the zero span
	}{
		{"700ms", [][]observation{turn("a", 700*time.Millisecond), turn("b", 2700*time.Millisecond), turn("c", 6700*time.Millisecond)}, true, 700 * time.Millisecond},
		{"the epoch's", [][]observation{turn("a", 0), turn("b", 4*time.Second)}, true, -1},
		{"disagreeing", [][]observation{turn("a", 700*time.Millisecond), turn("b", 1500*time.Millisecond)}, false, 0},
		{"in flight together", [][]observation{{
			{Key: "a", Sent: at(0), Received: at(5 * time.Millisecond)},
			{Key: "a", Sent: at(time.Millisecond), Received: at(6 * time.Millisecond), Admitted: true},
		}}, false, 0},
	} {
		st, ok := phaseOf(tt.keys, w)
		switch {
		case ok != tt.ok:
			t.Errorf("%s: ok %v, want %v", tt.name, ok, tt.ok)
		case !ok:
		case tt.holds < 0 && st != (span{}):
			t.Errorf("%s: %v, want the zero span (the epoch's windows)", tt.name, st)
		case tt.holds >= 0 && (st.lo > tt.holds || st.hi < tt.holds || st.hi-st.lo > 45*time.Millisecond):
			t.Errorf("%s: %v, want a stretch of at most 45ms holding %v", tt.name, st, tt.holds)
		}
	}
	for _, tt := range []struct {
		w, phase time.Duration
		want     string
	}{
		{time.Second, 250 * time.Millisecond, "windows starting at :00.250 past each second"},
		{2 * time.Second, 700 * time.Millisecond, "windows starting at :00.700 past each even second"},
		{10 * time.Second, 3700 * time.Millisecond, "windows starting at :03.700 past each multiple of 10s"},
		{time.Minute, 45 * time.Second, "windows starting at :45.000 past each minute"},
		{7 * time.Second, 1200 * time.Millisecond, "windows starting 1.2s into the epoch's"},
	} {
		if got := phaseText(tt.w, tt.phase); got != tt.want {
			t.Errorf("phaseText(%v, %v) = %q, want %q", tt.w, tt.phase, got, tt.want)
		}
	}
}

// Windows at a phase of their own, in simulated time and with no
// --limit: a fixed window and a sliding counter whose windows start 700ms
// past each even second, the same for every key. Each is named with its
// family, its limit and its phase, to 2% of a window (what the probe
// calls one answer).
func TestProbeSimulatedPhase(t *testing.T) {
	const phase = 700 * time.Millisecond
	for _, m := range []model{
		{Algorithm: limiters.FixedWindow, Limit: limiters.Limit{N: 10, Per: 2 * time.Second}, Phase: phase},
		{Algorithm: limiters.SlidingCounter, Limit: limiters.Limit{N: 20, Per: 2 * time.Second}, Phase: phase},
	} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			var log []string
			r, err := run(context.Background(), simConfig(), simulate(m, 1, time.Millisecond), func(s string) { log = append(log, s) })
			for _, l := range log {
				t.Log(l)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %.1fs: %s", r.Requests, r.Elapsed, r.Verdict.Text)
			f := r.Fit[0]
			var got float64
			variant := ""
			if len(f.Variants) == 1 {
				variant = f.Variants[0]
			}
			if _, err := fmt.Sscanf(variant, "windows starting at :%f past each even second", &got); err != nil || !r.Verdict.Named || f.Algorithm != m.Algorithm || f.Limit != m.Limit.String() ||
				math.Abs(got-phase.Seconds()) > 0.04 {
				t.Errorf("named %s %s %v (%s), want %s", f.Algorithm, f.Limit, f.Variants, r.Verdict.Text, m)
			}
		})
	}
}
