package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/ratelab/ratelab/internal/liveheap"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
	"github.com/ratelab/ratelab/workloads"
)

// memoryMode measures, once, what each subject holds per user at scale:
// the live heap of the process after one decision for each of the many
// users' keys, or what a subject kept in a server weighs itself.
const memoryModeName = "memory"

var memoryMode = mode{
	Mode: report.Mode{
		Mode: results.Mode{
			Name:   memoryModeName,
			About:  "the live heap per user, after one request from each of many users",
			Order:  30,
			Scored: true,
			Gates:  []results.Gate{{Metric: results.BytesPerUser, Label: "bytes/user", Check: results.CheckMemory, Digits: 1, Relative: true}},
		},
		Heading: "Memory per user",
		Tables: []report.TableSpec{{
			Name:  "memory",
			Title: "Memory per user: live heap per key held, after garbage collection",
			Note: "One request from each of the users, each key a fresh 16-byte string: a limiter that keeps its keys pays for them, " +
				"one that keeps a hash does not.",
			Header: []string{"limiter", "users", "bytes per user"},
			Left:   1,
			Cells: func(r results.Row) []string {
				return []string{r.Limiter, results.Count(r.Count(users)), report.Fixed(r.Get(results.BytesPerUser), 1)}
			},
		}},
		Charts: func(_ *results.File, rows []results.Row) []report.Figure {
			return []report.Figure{memoryFigure(rows)}
		},
	},
	once:    true,
	steps:   func(c Config, subjects []Subject) int { return 4 * len(subjects) },
	measure: measureMemory,
}

// users is how many keys a memory row gave the limiter.
const users = "users"

// memoryFigure is the bytes per user of each limiter of rows, a bar each,
// coloured by whose it is: ratelab's, a peer's, or kept in Redis (the
// server's memory, not the process's).
func memoryFigure(rows []results.Row) report.Figure {
	n := 0
	for _, r := range rows {
		n = max(n, int(r.Get(users)))
	}
	fig := report.Figure{Name: "memory", Title: "Memory per user: live heap per key held",
		Caption: fmt.Sprintf("Each bar is the live heap a limiter held per key after %s users made one request each, keys of 16 bytes included when the limiter keeps them. ", results.Count(int64(n))) +
			"Shorter is better; ratelab keeps a hash of each key, not the key.",
		Cols: 1, Width: 8}
	if len(rows) == 0 {
		return fig
	}
	// A series each for ratelab's, the peers' and those kept in Redis,
	// drawn over each other: one bar a row, coloured by whose it is.
	b := report.Bars{Series: []string{"ratelab", "peers"}, Overlay: true, Digits: 1}
	if slices.ContainsFunc(rows, results.Row.Outside) {
		b.Series = append(b.Series, "on Redis (its memory)")
		fig.Title += ", and Redis's memory per key"
		fig.Caption += " The rows on Redis are the server's memory per key (INFO used_memory), its key's name included, after one decision each for " +
			"fewer keys (the memory table says how many): not the process's heap."
	}
	for _, r := range rows {
		v := make([]float64, len(b.Series))
		switch {
		case r.Outside():
			v[2] = r.Get(results.BytesPerUser)
		case r.Library != results.LibraryRatelab:
			v[1] = r.Get(results.BytesPerUser)
		default:
			v[0] = r.Get(results.BytesPerUser)
		}
		b.Groups, b.Values = append(b.Groups, r.Limiter), append(b.Values, v)
	}
	x := report.Axis{Label: "bytes per user", Ticks: report.TicksPlain, Min: 0, Max: 1.15 * maxOf(b.Values)}
	fig.Panels = []report.Panel{{X: x, Bars: &b}}
	return fig
}

func measureMemory(ctx context.Context, l *lab, _ *workloads.Workload, subjects []Subject) ([]results.Row, error) {
	var out []results.Row
	for _, s := range subjects {
		weigh := func() (memoryResult, error) {
			return weighInProcess(ctx, s, l.c.memoryLimit(), l.c.ManyUsers)
		}
		switch {
		case s.failed() != "":
			out = append(out, skipped(s, "many-users", "", s.failed()))
			continue
		case s.Weigh != nil:
			weigh = func() (memoryResult, error) { return s.Weigh(ctx, l.c.memoryLimit()) }
		case !s.inProcess():
			continue
		}
		l.p.step(fmt.Sprintf("memory of %s", s.Name), 4)
		m, err := weigh()
		if err != nil {
			return nil, fmt.Errorf("harness: memory of %s: %w", s.Name, err)
		}
		r := row(s, "many-users", memoryModeName)
		r.Add(users, results.UnitCount, float64(m.Users))
		r.Add(results.Decisions, results.UnitCount, float64(m.Users))
		r.Add(results.BytesPerUser, results.UnitBytes, m.BytesPerUser)
		r.Note = m.Note
		out = append(out, r)
	}
	return out, nil
}

// memoryResult is what a memory run measured.
type memoryResult struct {
	// Users is how many keys the limiter was given; Note, if set, says
	// how it was weighed, where not as the others were.
	Users int
	Note  string
	// BytesPerUser is the live heap the limiter holds per key it tracks,
	// after garbage collection, the key's own bytes included when the
	// limiter keeps the key.
	BytesPerUser float64
	// Tracked is how many keys the limiter holds: what it reports, or the
	// number of users when it cannot tell (the peers keep every key).
	Tracked int
}

// weighInProcess gives a new limiter one request from each of users users,
// keys of 16 bytes allocated afresh for it (so that a limiter that keeps a
// key pays for it, and one that hashes it does not), and measures the live
// heap it then holds. The limit should keep every key from being full again
// while this runs (a window of an hour, say), or a limiter that forgets idle
// keys may be caught forgetting.
func weighInProcess(ctx context.Context, s Subject, limit limiters.Limit, users int) (memoryResult, error) {
	before := liveheap.Bytes()
	l, stop, err := s.New(limit)
	if err != nil {
		return memoryResult{}, err
	}
	for i := range users {
		if i%4096 == 0 && ctx.Err() != nil {
			stop()
			return memoryResult{}, ctx.Err()
		}
		if _, err := l.AllowN(ctx, workloads.UserKey(i), 1); err != nil {
			stop()
			return memoryResult{}, err
		}
	}
	after := liveheap.Bytes()
	r := memoryResult{Users: users, Tracked: users}
	if m, ok := l.(interface{ Stats() limiters.Stats }); ok {
		r.Tracked = m.Stats().Keys
	}
	runtime.KeepAlive(l)
	stop()
	if r.Tracked > 0 {
		r.BytesPerUser = float64(int64(after)-int64(before)) / float64(r.Tracked)
	}
	return r, nil
}
