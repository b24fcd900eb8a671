package results_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// withRedis is the fixture with rows kept in Redis: ratelab's gcra and
// redis_rate, each a few thousand decisions a second, and gcra's memory on
// the server. They decided as memory did.
func withRedis() *results.File {
	f := fixture()
	for _, r := range slices.Clone(f.Rows) {
		if r.Limiter != "gcra" || !r.Measured() {
			continue
		}
		r = clone(r)
		r.Limiter, r.Backend, r.Note = "gcra (redis)", results.BackendRedis, "Rows kept in Redis: a note."
		switch {
		case r.Has(results.MostInWindow):
			r.Add(results.DiffersFromMemory, results.UnitCount, 0)
		case r.Mode == "realtime":
			change(&r, results.Throughput, func(v float64) float64 { return v / 2000 })
			if q, ok := r.LatencyOf(results.Latency); ok {
				r.SetLatency(results.Latency, results.Quantiles{P50: q.P50 * 1000, P90: q.P90 * 1000, P99: q.P99 * 1000, P999: q.P999 * 1000, Max: q.Max * 1000})
			}
		case r.Mode == "memory":
			set(&r, results.BytesPerUser, 190)
		case r.Mode == "timing":
			continue
		}
		f.Rows = append(f.Rows, r)
		if r.Mode == "realtime" || r.Mode == "memory" {
			p := clone(r)
			p.Limiter, p.Library = "redis_rate", "github.com/go-redis/redis_rate/v10 v10.0.1"
			change(&p, results.Throughput, func(v float64) float64 { return v * 1.5 })
			set(&p, results.BytesPerUser, 200)
			f.Rows = append(f.Rows, p)
		}
	}
	return f
}

// The Redis rows answer the need of a limit many processes share; the
// needs of one process are answered from memory alone, and redis_rate is
// set against ratelab's GCRA on Redis.
func TestPicksKeepRedisApart(t *testing.T) {
	f := withRedis()
	picks, versus := report.Picks(f, modes)
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
	if err := report.WritePicks(&b, f, modes); err != nil || !strings.Contains(strings.Join(strings.Fields(b.String()), " "), "their bytes per user are the server's memory per key") {
		t.Errorf("the scorecard does not say what the Redis rows' bytes are (%v):\n%s", err, b.String())
	}

	// A Redis row that decided otherwise than memory is a bug, and said.
	for i := range f.Rows {
		if f.Rows[i].Has(results.DiffersFromMemory) && f.Rows[i].Workload == "boundary-attack" {
			set(&f.Rows[i], results.DiffersFromMemory, 3)
		}
	}
	if p := pick(t, f, "One limit shared by many processes (Redis)"); !strings.Contains(p.Why, "gcra (redis) decided otherwise than the same algorithm in memory on 3 of") {
		t.Errorf("a Redis row that differs from memory: %+v", p)
	}
	if a := table(t, f, "accuracy"); !strings.Contains(a.Note, "(a bug): gcra (redis) on boundary-attack, 3 of 590,000.") {
		t.Errorf("the accuracy table's note: %s", a.Note)
	}
}

// Each table says once what its Redis rows ran on, and the accuracy table
// that they decided as memory did.
func TestTablesNoteRedisRows(t *testing.T) {
	for _, tb := range report.Tables(withRedis(), modes) {
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
	redis := func(f *results.File) *results.File {
		for _, r := range slices.Clone(f.Rows) {
			if r.Limiter == "gcra" {
				r = clone(r)
				r.Limiter, r.Backend = "gcra (redis)", results.BackendRedis
				f.Rows = append(f.Rows, r)
			}
		}
		return f
	}
	skipped := func(f *results.File) *results.File {
		for _, w := range []string{"uniform", "bursty"} {
			f.Rows = append(f.Rows, results.Row{Limiter: "gcra (redis)", Backend: results.BackendRedis, Workload: w, Skipped: "no Redis at 127.0.0.1:6379: connection refused"})
		}
		return f
	}
	same := func(f *results.File) *results.File { return f }
	for name, change := range map[string][2]func(*results.File) *results.File{
		"new has Redis rows":   {same, redis},
		"old has Redis rows":   {redis, skipped},
		"Redis skipped in new": {same, skipped},
	} {
		old, new := gateFiles(t)
		c, err := results.Compare(change[0](old), change[1](new), results.DefaultTolerance, gated)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if n := c.Regressions(); n > 0 {
			t.Errorf("%s: %d regressions: %v", name, n, regressed(c))
		}
		var b bytes.Buffer
		if err := c.Write(&b, false); err != nil {
			t.Fatal(err)
		}
		if runs := strings.Contains(b.String(), "Not compared: NEW's"); runs != (name == "new has Redis rows") {
			t.Errorf("%s: the comparison says of the Redis rows:\n%s", name, b.String())
		}
	}
}

// Skipped says a reason once, with every limiter and workload it kept
// from running.
func TestSkippedGroups(t *testing.T) {
	f := &results.File{}
	add := func(limiter, workload, why string) {
		f.Rows = append(f.Rows, results.Row{Limiter: limiter, Workload: workload, Skipped: why})
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
	if got := report.Skipped(f); !slices.Equal(got, want) {
		t.Errorf("Skipped =\n%q\nwant\n%q", got, want)
	}
}
