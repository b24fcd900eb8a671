package harness

import (
	"fmt"
	"io"
	"time"
)

// progress reports what the lab is doing, how far it is and how long it
// has left, one line a step, redrawn in place (for a terminal).
type progress struct {
	w           io.Writer
	begin       time.Time
	done, total int
}

func newProgress(w io.Writer, c Config, ms []mode, subjects []Subject, workloads []string) *progress {
	p := &progress{w: w, begin: time.Now()}
	for _, name := range workloads {
		p.total++ // generating
		g := generator(name)
		for _, m := range ms {
			if !m.once() && (g == nil || !g.AccuracyOnly || m.name() == ModeSimulated) {
				p.total += m.steps(c, subjects)
			}
		}
	}
	for _, m := range ms {
		if m.once() {
			p.total += m.steps(c, subjects)
		}
	}
	return p
}

// step reports that what, of the given weight, starts now.
func (p *progress) step(what string, weight int) {
	if p.w == nil {
		p.done += weight
		return
	}
	elapsed := time.Since(p.begin)
	left := "estimating"
	if p.done > 0 {
		rest := time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done))
		left = "~" + clock(rest) + " left"
	}
	pct := 100 * p.done / max(p.total, 1)
	fmt.Fprintf(p.w, "\r\x1b[K%3d%%  %s elapsed, %s  %s", pct, clock(elapsed), left, what)
	p.done += weight
}

// finish clears the progress line.
func (p *progress) finish() {
	if p.w != nil {
		fmt.Fprintf(p.w, "\r\x1b[K")
	}
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
