package harness

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A ProgressLog says where the lab is every interval, exactly: at no
// other time, whether steps are short or long, and not before the first
// step or after it is closed.
func TestProgressLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		log := NewProgressLog(&b, 10*time.Second)
		p := &progress{w: log, begin: time.Now(), total: 8}
		for _, s := range []struct {
			at     time.Duration // since the log began
			what   string
			weight int
		}{
			{12 * time.Second, "generating uniform", 1}, // nothing said at 10s: no step yet
			{13 * time.Second, "accuracy of gcra on uniform", 1},
			{14 * time.Second, "accuracy of sliding-log on uniform", 1}, // three steps, one line
			{45 * time.Second, "memory of gcra", 4},                     // a long step: a line every 10s
			{51 * time.Second, "timing on uniform, 20 rounds", 1},
		} {
			time.Sleep(s.at - time.Since(p.begin))
			p.step(s.what, s.weight)
		}
		time.Sleep(time.Second)
		p.finish()
		log.Close()
		time.Sleep(time.Minute) // closed: nothing more
		want := `lab: 25% — accuracy of sliding-log on uniform (20s elapsed)
lab: 25% — accuracy of sliding-log on uniform (30s elapsed)
lab: 25% — accuracy of sliding-log on uniform (40s elapsed)
lab: 37% — memory of gcra (50s elapsed)
`
		if got := b.String(); got != want {
			t.Errorf("the log:\n%s\nwant:\n%s", got, want)
		}
	})
}
