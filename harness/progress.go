package harness

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress reports what the lab is doing, how far it is and how long it
// has left, one line a step, redrawn in place (for a terminal), or to a
// ProgressLog, which says it now and then.
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
			if !m.once && (g == nil || !g.AccuracyOnly || m.attacks) {
				p.total += m.steps(c, subjects)
			}
		}
	}
	for _, m := range ms {
		if m.once {
			p.total += m.steps(c, subjects)
		}
	}
	return p
}

// step reports that what, of the given weight, starts now.
func (p *progress) step(what string, weight int) {
	switch w := p.w.(type) {
	case nil:
	case *ProgressLog:
		w.step(100*p.done/max(p.total, 1), what)
	default:
		p.redraw(what)
	}
	p.done += weight
}

func (p *progress) redraw(what string) {
	elapsed := time.Since(p.begin)
	left := "estimating"
	if p.done > 0 {
		rest := time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done))
		left = "~" + clock(rest) + " left"
	}
	pct := 100 * p.done / max(p.total, 1)
	fmt.Fprintf(p.w, "\r\x1b[K%3d%%  %s elapsed, %s  %s", pct, clock(elapsed), left, what)
}

// finish clears the progress line.
func (p *progress) finish() {
	switch p.w.(type) {
	case nil, *ProgressLog:
	default:
		fmt.Fprintf(p.w, "\r\x1b[K")
	}
}

// ProgressLog is the lab's progress for a log rather than a terminal (a
// file, a pipe, CI): every interval, one line saying how far the lab is
// and what it is doing,
//
//	lab: 37% — accuracy of gcra on bursty (2m10s elapsed)
//
// and nothing before the lab's first step. A line redrawn at every step
// would fill a log with hundreds of them; a line at a step's start alone
// could leave the log silent for a step that takes half a minute. Its
// owner passes it to Lab and closes it when Lab returns, whether with
// results or an error.
type ProgressLog struct {
	w      io.Writer
	begin  time.Time
	ticker *time.Ticker
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	percent int
	what    string // the step under way; "" before the first
}

// NewProgressLog returns a ProgressLog writing a line to w every
// interval, counted from now, until it is closed.
func NewProgressLog(w io.Writer, interval time.Duration) *ProgressLog {
	l := &ProgressLog{w: w, begin: time.Now(), ticker: time.NewTicker(interval),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *ProgressLog) run() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case now := <-l.ticker.C:
			l.mu.Lock()
			if l.what != "" {
				fmt.Fprintf(l.w, "lab: %d%% — %s (%v elapsed)\n", l.percent, l.what, now.Sub(l.begin).Round(time.Second))
			}
			l.mu.Unlock()
		}
	}
}

// step reports that what starts now, with percent of the lab done.
func (l *ProgressLog) step(percent int, what string) {
	l.mu.Lock()
	l.percent, l.what = percent, what
	l.mu.Unlock()
}

// Write writes p to the log between its lines (a ProgressLog is Lab's
// progress io.Writer).
func (l *ProgressLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close stops the lines, once the one being written, if any, is done.
// It is not safe to call more than once.
func (l *ProgressLog) Close() error {
	l.ticker.Stop()
	close(l.stop)
	<-l.done
	return nil
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
