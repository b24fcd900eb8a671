package results

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// withRedis is the fixture with rows kept in Redis: ratelab's gcra and
// redis_rate, each a few thousand decisions a second, and gcra's memory on
// the server. They decided as memory did.
func withRedis() *File {
	f := fixture()
	zero := int64(0)
	for _, r := range slices.Clone(f.Runs) {
		if r.Limiter != "gcra" || r.SkippedBecause != "" {
			continue
		}
		r.Limiter, r.Backend, r.Note = "gcra (redis)", "redis", "Rows kept in Redis: a note."
		switch {
		case r.Accuracy != nil:
			a := *r.Accuracy
			r.Accuracy, r.DiffersFromMemory = &a, &zero
		case r.Mode == "realtime":
			r.ThroughputPerS /= 2000
			if l := r.LatencyNS; l != nil {
				r.LatencyNS = &Latency{P50: l.P50 * 1000, P90: l.P90 * 1000, P99: l.P99 * 1000, P999: l.P999 * 1000, Max: l.Max * 1000}
			}
		case r.Mode == "memory":
			r.BytesPerUser = 190
		case r.Mode == "timing":
			continue
		}
		f.Runs = append(f.Runs, r)
		if r.Mode == "realtime" || r.Mode == "memory" {
			p := r
			p.Limiter, p.Library, p.DiffersFromMemory = "redis_rate", "github.com/go-redis/redis_rate/v10 v10.0.1", nil
			p.ThroughputPerS *= 1.5
			p.BytesPerUser = 200
			f.Runs = append(f.Runs, p)
		}
	}
	return f
}

// The Redis rows answer the need of a limit many processes share; the
// needs of one process are answered from memory alone, and redis_rate is
// set against ratelab's GCRA on Redis.
func TestPicksKeepRedisApart(t *testing.T) {
	f := withRedis()
	picks, versus := Picks(f)
	for _, p := range picks {
		if strings.HasPrefix(p.Need, "One limit shared") {
			continue
		}
		if strings.Contains(p.Limiter, "redis") || strings.Contains(p.Why, "redis") {
			t.Errorf("a pick for one process names a Redis row: %+v", p)
		}
	}
	p := pick(t, f, "One limit shared by many processes (Redis)")
	if p.Limiter != "redis_rate" || !strings.Contains(p.Why, "in memory, gcra made 45.10M/s: one process needs no Redis") ||
		!strings.Contains(p.Why, "each of ratelab's decided as the same algorithm in memory does") {
		t.Errorf("the Redis pick: %+v", p)
	}
	if !slices.ContainsFunc(versus, func(v string) bool { return strings.HasPrefix(v, "gcra (redis) against redis_rate (both gcra)") }) ||
		slices.ContainsFunc(versus, func(v string) bool { return strings.HasPrefix(v, "gcra against redis_rate") }) {
		t.Errorf("redis_rate is not set against gcra on Redis: %q", versus)
	}
	var b bytes.Buffer
	if err := WritePicks(&b, f); err != nil || !strings.Contains(strings.Join(strings.Fields(b.String()), " "), "their bytes per user are the server's memory per key") {
		t.Errorf("the scorecard does not say what the Redis rows' bytes are (%v):\n%s", err, b.String())
	}

	// A Redis row that decided otherwise than memory is a bug, and said.
	for i := range f.Runs {
		if d := f.Runs[i].DiffersFromMemory; d != nil && f.Runs[i].Workload == "boundary-attack" {
			n := int64(3)
			f.Runs[i].DiffersFromMemory = &n
		}
	}
	if p := pick(t, f, "One limit shared by many processes (Redis)"); !strings.Contains(p.Why, "gcra (redis) decided otherwise than the same algorithm in memory on 3 of") {
		t.Errorf("a Redis row that differs from memory: %+v", p)
	}
	if a := accuracyTable(f, "simulated"); !strings.Contains(a.Note, "(a bug): gcra (redis) on boundary-attack, 3 of 590,000.") {
		t.Errorf("the accuracy table's note: %s", a.Note)
	}
}

// Each table says once what its Redis rows ran on, and the accuracy table
// that they decided as memory did.
func TestTablesNoteRedisRows(t *testing.T) {
	for _, tb := range Tables(withRedis()) {
		onRedis := slices.ContainsFunc(tb.Rows, func(row []string) bool { return slices.Contains(row, "gcra (redis)") })
		if n := strings.Count(tb.Note, "Rows kept in Redis: a note."); n != map[bool]int{true: 1, false: 0}[onRedis] {
			t.Errorf("%s: the Redis note is there %d times (Redis rows: %v): %s", tb.Name, n, onRedis, tb.Note)
		}
		if tb.Name == "accuracy" && !strings.Contains(tb.Note, "Each row kept in a server decided as the same algorithm in memory did on the same requests") {
			t.Errorf("accuracy: %s", tb.Note)
		}
	}
}

// The gate leaves the Redis rows out: a baseline without them passes a
// run with them, and one with them a run where Redis was not there.
func TestGateLeavesRedisOut(t *testing.T) {
	redis := func(f *File) *File {
		for _, r := range slices.Clone(f.Runs) {
			if r.Limiter == "gcra" {
				r.Limiter, r.Backend = "gcra (redis)", "redis"
				f.Runs = append(f.Runs, r)
			}
		}
		return f
	}
	skipped := func(f *File) *File {
		for _, w := range []string{"uniform", "bursty"} {
			f.Runs = append(f.Runs, Run{Limiter: "gcra (redis)", Backend: "redis", Workload: w, SkippedBecause: "no Redis at 127.0.0.1:6379: connection refused"})
		}
		return f
	}
	same := func(f *File) *File { return f }
	for name, change := range map[string][2]func(*File) *File{
		"new has Redis rows":   {same, redis},
		"old has Redis rows":   {redis, skipped},
		"Redis skipped in new": {same, skipped},
	} {
		old, new := gateFiles(t)
		c, err := Compare(change[0](old), change[1](new), DefaultTolerance)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if n := c.Regressions(); n > 0 {
			t.Errorf("%s: %d regressions: %v", name, n, regressed(c))
		}
		var b bytes.Buffer
		c.Write(&b, false)
		if runs := strings.Contains(b.String(), "Not compared: NEW's"); runs != (name == "new has Redis rows") {
			t.Errorf("%s: the comparison says of the Redis runs:\n%s", name, b.String())
		}
	}
}

// Skipped says a reason once, with every limiter and workload it kept
// from running.
func TestSkippedGroups(t *testing.T) {
	f := &File{}
	add := func(limiter, workload, why string) {
		f.Runs = append(f.Runs, Run{Limiter: limiter, Workload: workload, SkippedBecause: why})
	}
	for _, w := range []string{"uniform", "bursty"} {
		add("gcra (redis)", w, "no Redis")
		add("redis_rate", w, "no Redis")
		add("config", w, "its limits are its own")
	}
	add("sliding-log (redis)", "uniform", "no Redis")
	want := []string{
		"gcra (redis), redis_rate on uniform, bursty: no Redis",
		"sliding-log (redis) on uniform: no Redis",
		"config on uniform, bursty: its limits are its own",
	}
	if got := Skipped(f); !slices.Equal(got, want) {
		t.Errorf("Skipped =\n%q\nwant\n%q", got, want)
	}
}
