package plan

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A plan cut by key: each shard reads the whole log and sums up the keys
// whose hash falls in it (their counts, agents, least bursts and
// envelope, each exact); Merge turns shards 0 to N−1 into the plan of the
// whole log, its policy the same as one pass's, on as many machines as
// there are shards. What a shard cannot do is decide requests with a
// policy no shard knows yet: a merged plan says whom the policy refuses,
// exactly (the curves), and leaves what it refuses in requests
// undecided.

// Shard is one shard's summary of a log.
type Shard struct {
	// Index of Of: the keys whose hash is Index modulo Of.
	Index, Of int
	// The grid the keys were summed up on: Config's periods, rates and
	// the clients' period.
	Periods []time.Duration
	Rates   []limiters.Limit
	Period  time.Duration
	// The whole log, as every shard reads it.
	Lines, Requests, Free, Skipped, NoKey, Logged429 int
	Skips                                            []accesslog.Skip
	FirstNoKey                                       accesslog.Skip
	Unseen                                           []string
	First, Last                                      int64
	Fractions, DropRefused                           bool
	Grid                                             ShardGrid
	// Keys are the shard's, in order of their first request.
	Keys []ShardKey
}

// ShardGrid is the grid of the clients' series, the whole log's.
type ShardGrid struct {
	Origin, Width int64
	Last          int
	Begun         bool
}

// ShardKey is one key's summary: what the plan keeps of a client, and
// its curves (a stretch's, without the requests at its edges: a shard
// holds all of a key's requests).
type ShardKey struct {
	Key                       string
	Order                     int64 // its first request's place among the log's
	Requests, Cost, Logged429 int64
	First, Peak               int64
	Agents, Paths             []uint64
	Series                    []uint32
	From                      int
	Decided                   bool // it has requests decided
	DecidedFirst, DecidedCost int64
	Lead, Need, Peaks         []int64
}

// shardOf is the shard of key among n.
func shardOf(key string, n int) int {
	// FNV-1a, inline: hash/fnv's allocated a hasher and a copy of the
	// key for every line of every shard.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int(h % uint64(n))
}

// Summarize reads r to its end and sums up the keys of shard index of of,
// on c's grid. c must ask for no sweep (a sweep decides every request,
// which a shard cannot do for the keys of others).
func Summarize(ctx context.Context, r *accesslog.Reader, c Config, index, of int, progress Progress) (*Shard, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(c.Limits) > 0 {
		return nil, errors.New("plan: a shard sums up keys and decides no sweep: --limits is for a plan of the whole log")
	}
	if of < 1 || index < 0 || index >= of {
		return nil, fmt.Errorf("plan: shard %d of %d: want 0 to %d", index, of, of-1)
	}
	cs := newClients(int64(c.period()))
	cv := newCurves(c.Periods, c.Rates)
	sh := shape{intervals: cv.intervals, lengths: cv.lengths, noHead: true}
	var stretches []*stretch
	var order []int64
	out := &Shard{Index: index, Of: of, Periods: slices.Clone(c.Periods), Rates: slices.Clone(c.Rates), Period: c.period(), DropRefused: c.DropRefused}
	var lastProgress time.Time
	for n := int64(0); ; n++ {
		if n%batchSize == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if progress != nil && time.Since(lastProgress) > time.Second {
				progress(r.Lines(), out.Requests, time.Duration(out.Last-out.First))
				lastProgress = time.Now()
			}
		}
		e, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		if out.Requests == 0 {
			out.First = e.At
		}
		out.Last = e.At
		out.Fractions = out.Fractions || e.At%int64(time.Second) != 0
		out.Requests++
		if e.Status == 429 {
			out.Logged429++
		}
		decided := !(c.DropRefused && e.Status == 429)
		if shardOf(e.Key, of) != index {
			if decided {
				cs.grid.bucket(e.At, cs.all) // the grid is the whole log's
			}
			continue
		}
		id, _ := cs.see(&e, decided)
		if int(id) == len(stretches) {
			stretches, order = append(stretches, sh.newStretch()), append(order, n)
		}
		if decided {
			sh.add(stretches[id], e.At, int64(e.N))
		}
	}
	out.Lines, out.Free = r.Lines(), r.Free()
	out.Skipped, out.Skips = r.Skipped()
	out.NoKey, out.FirstNoKey = r.NoKey()
	out.Unseen = r.Unseen()
	g := cs.grid
	out.Grid = ShardGrid{Origin: g.origin, Width: g.width, Last: g.last, Begun: g.begun}
	for id, cl := range cs.all {
		st := stretches[id]
		out.Keys = append(out.Keys, ShardKey{Key: cl.key, Order: order[id], Requests: cl.requests, Cost: cl.cost, Logged429: cl.logged429,
			First: cl.first, Peak: cl.peak, Agents: cl.agents.seen, Paths: cl.paths.seen, Series: cl.series, From: cl.from,
			Decided: st.Count > 0, DecidedFirst: st.First, DecidedCost: st.Cost, Lead: st.Lead, Need: st.Need, Peaks: st.Peaks})
	}
	return out, nil
}

// shardVersion is the shard file's format: a file of another is refused.
const shardVersion = 1

// Write writes s to w (gob, after a header that names the format).
func (s *Shard) Write(w io.Writer) error {
	enc := gob.NewEncoder(w)
	if err := enc.Encode(shardHeader{Format: "ratelab plan shard", Version: shardVersion}); err != nil {
		return err
	}
	return enc.Encode(s)
}

type shardHeader struct {
	Format  string
	Version int
}

// ReadShard reads a shard Write wrote; name is for messages.
func ReadShard(r io.Reader, name string) (*Shard, error) {
	dec := gob.NewDecoder(r)
	var h shardHeader
	if err := dec.Decode(&h); err != nil || h.Format != "ratelab plan shard" {
		return nil, fmt.Errorf("plan: %s is not a shard ratelab plan --shard wrote", name)
	}
	if h.Version != shardVersion {
		return nil, fmt.Errorf("plan: %s is a shard of format %d; this ratelab reads format %d", name, h.Version, shardVersion)
	}
	var s Shard
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("plan: %s: %w", name, err)
	}
	return &s, nil
}

// Merge turns shards 0 to N−1 of one log into its plan, under c (which
// asks for no sweep, and is the configuration the shards were summed up
// on): the policy, the envelope, the frontier, the classes and the tiers
// of one pass; the requests the policy refuses undecided (-1).
func Merge(c Config, shards []*Shard) (*Plan, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(c.Limits) > 0 {
		return nil, errors.New("plan: a merge of shards decides no sweep: --limits is for a plan of the whole log")
	}
	if len(shards) == 0 {
		return nil, errors.New("plan: no shard to merge")
	}
	began := time.Now()
	first := shards[0]
	seen := make([]bool, first.Of)
	for _, s := range shards {
		switch {
		case s.Of != first.Of:
			return nil, fmt.Errorf("plan: shards of %d and of %d: merge the shards of one cut", first.Of, s.Of)
		case s.Index < 0 || s.Index >= s.Of || seen[s.Index]:
			return nil, fmt.Errorf("plan: shard %d of %d twice, or out of range", s.Index, s.Of)
		case !slices.Equal(s.Periods, c.Periods) || !slices.Equal(s.Rates, c.Rates) || s.Period != c.period() || s.DropRefused != c.DropRefused:
			return nil, fmt.Errorf("plan: shard %d of %d was summed up on other periods, rates or --refused than the merge asks", s.Index, s.Of)
		case s.Lines != first.Lines || s.Requests != first.Requests || s.First != first.First || s.Last != first.Last:
			return nil, fmt.Errorf("plan: shard %d of %d read %d lines, shard %d %d: shards of one log read all of it", s.Index, s.Of, s.Lines, first.Index, first.Lines)
		}
		seen[s.Index] = true
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, fmt.Errorf("plan: shard %d of %d is missing: a plan needs every key", i, first.Of)
	}
	var keys []ShardKey
	for _, s := range shards {
		keys = append(keys, s.Keys...)
	}
	slices.SortFunc(keys, func(a, b ShardKey) int { return cmp.Compare(a.Order, b.Order) })

	cs := newClients(int64(c.period()))
	g := first.Grid
	cs.grid = grid{origin: g.Origin, width: g.Width, last: g.Last, begun: g.Begun}
	cv := newCurves(c.Periods, c.Rates)
	cv.of = make([]*curve, len(keys))
	cv.peaks = make([]int64, len(keys)*len(cv.lengths))
	for id, k := range keys {
		cl := &client{key: k.Key, requests: k.Requests, cost: k.Cost, logged429: k.Logged429, first: k.First, peak: k.Peak,
			agents: distinct{seen: k.Agents}, paths: distinct{seen: k.Paths}, series: k.Series, from: k.From}
		cs.ids[k.Key] = int32(id)
		cs.all = append(cs.all, cl)
		if !k.Decided {
			continue
		}
		if len(k.Lead) != len(cv.intervals) || len(k.Peaks) != len(cv.lengths) {
			return nil, fmt.Errorf("plan: key %q: a summary of %d rates and %d lengths, where the merge has %d and %d", k.Key, len(k.Lead), len(k.Peaks), len(cv.intervals), len(cv.lengths))
		}
		cv.of[id] = &curve{first: k.DecidedFirst, total: k.DecidedCost, lead: k.Lead, need: k.Need}
		copy(cv.peaks[id*len(cv.lengths):], k.Peaks)
	}
	p := &Plan{Config: c, Lines: first.Lines, Requests: first.Requests, Free: first.Free, Skipped: first.Skipped, Skips: first.Skips,
		NoKey: first.NoKey, FirstNoKey: first.FirstNoKey, Unseen: first.Unseen, Logged429: first.Logged429,
		Span: time.Duration(first.Last - first.First), WholeSeconds: !first.Fractions, Merged: len(shards)}
	if p.Requests == 0 {
		return nil, ErrNoRequest
	}
	p.finish(cs, &deciders{c: c})
	if users := p.curves(cs, cv, nil); users != nil {
		p.undecided()
	}
	p.Took = time.Since(began)
	return p, nil
}

// undecided marks what a merged plan cannot decide: the requests each
// point of the frontier, the bucket, the windows and nginx's forms of them
// refuse (the keys they refuse are the curves', exact).
func (p *Plan) undecided() {
	p.Bucket.Refused, p.Bucket.decidedClients = -1, -1
	for i := range p.Frontier {
		p.Frontier[i].Refused, p.Frontier[i].decidedClients = -1, -1
	}
	if w := &p.Windows; w.Short.N > 0 {
		w.Refused, w.decidedClients = -1, -1
	}
	p.nginxPolicy(func(...limiters.Limit) (int64, int64) { return -1, -1 })
}
