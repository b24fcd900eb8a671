package plan

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
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
	Sources                                          []accesslog.Source
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

// summarizer sums up the keys of one shard as a log's requests come:
// each request of the whole log is seen (the grid, the first and last
// times and the counts are the log's), and those of its keys summed up.
type summarizer struct {
	c         Config
	index, of int
	cs        *clients
	sh        shape
	stretches []*stretch
	order     []int64 // each key's first request's place among the log's
	out       *Shard
	// kept are its keys' requests decided (by their number here), when
	// a plan on several cores keeps them to decide the policy over;
	// stop, once set, says the plan keeps none.
	kept       chunks
	keptInputs inputs
	keepInputs bool
	keep       *keeping
	unkept     int // kept, not yet counted in keep
}

func newSummarizer(c Config, index, of int) *summarizer {
	cv := newCurves(c.Periods, c.Rates)
	return &summarizer{c: c, index: index, of: of, cs: newClients(int64(c.period())),
		sh:  shape{intervals: cv.intervals, lengths: cv.lengths, noHead: true},
		out: &Shard{Index: index, Of: of, Periods: slices.Clone(c.Periods), Rates: slices.Clone(c.Rates), Period: c.period(), DropRefused: c.DropRefused}}
}

// see counts e, the log's next request.
func (s *summarizer) see(e *accesslog.Entry) {
	out := s.out
	n := int64(out.Requests)
	if out.Requests == 0 {
		out.First = e.At
	}
	out.Last = e.At
	out.Fractions = out.Fractions || e.At%int64(time.Second) != 0
	out.Requests++
	if e.Status == 429 {
		out.Logged429++
	}
	decided := !(s.c.DropRefused && e.Status == 429)
	if shardOf(e.Key, s.of) != s.index {
		if decided {
			s.cs.grid.bucket(e.At, s.cs.all) // the grid is the whole log's
		}
		return
	}
	id, _ := s.cs.see(e, decided)
	if int(id) == len(s.stretches) {
		s.stretches, s.order = append(s.stretches, s.sh.newStretch()), append(s.order, n)
	}
	if decided {
		s.sh.add(s.stretches[id], e.At, int64(e.N))
		if s.keep != nil {
			s.keepRequest(logged{id: id, n: int32(e.N), at: e.At}, e.Input)
		}
	}
}

// shard is the summary, once r, which gave every request seen, is read
// to its end.
func (s *summarizer) shard(r *accesslog.Reader) *Shard {
	out := s.out
	out.Lines, out.Free = r.Lines(), r.Free()
	out.Skipped, out.Skips = r.Skipped()
	out.NoKey, out.FirstNoKey = r.NoKey()
	out.Unseen, out.Sources = r.Unseen(), r.Sources()
	g := s.cs.grid
	out.Grid = ShardGrid{Origin: g.origin, Width: g.width, Last: g.last, Begun: g.begun}
	for id, cl := range s.cs.all {
		st := s.stretches[id]
		out.Keys = append(out.Keys, ShardKey{Key: cl.key, Order: s.order[id], Requests: cl.requests, Cost: cl.cost, Logged429: cl.logged429,
			First: cl.first, Peak: cl.peak, Agents: cl.agents.seen, Paths: cl.paths.seen, Series: cl.series, From: cl.from,
			Decided: st.Count > 0, DecidedFirst: st.First, DecidedCost: st.Cost, Lead: st.Lead, Need: st.Need, Peaks: st.Peaks})
	}
	return out
}

// checkShards checks c, filling in its defaults, and a cut into of
// shards for a summary.
func checkShards(c *Config, of int) error {
	if err := c.check(); err != nil {
		return err
	}
	if len(c.Limits) > 0 {
		return errors.New("plan: a shard sums up keys and decides no sweep: --limits is for a plan of the whole log")
	}
	if of < 1 {
		return fmt.Errorf("plan: %d shards: want 1 or more", of)
	}
	return nil
}

// Summarize reads r to its end and sums up the keys of shard index of of,
// on c's grid. c must ask for no sweep (a sweep decides every request,
// which a shard cannot do for the keys of others).
func Summarize(ctx context.Context, r *accesslog.Reader, c Config, index, of int, progress Progress) (*Shard, error) {
	if err := checkShards(&c, of); err != nil {
		return nil, err
	}
	if index < 0 || index >= of {
		return nil, fmt.Errorf("plan: shard %d of %d: want 0 to %d", index, of, of-1)
	}
	s := newSummarizer(c, index, of)
	var lastProgress time.Time
	for n := 0; ; n++ {
		if n%batchSize == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if progress != nil && time.Since(lastProgress) > time.Second {
				progress(r.Lines(), s.out.Requests, time.Duration(s.out.Last-s.out.First))
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
		s.see(&e)
	}
	return s.shard(r), nil
}

// SummarizeAll reads r once, to its end, and sums up all of shards 0 to
// of−1 at once, one goroutine each: the log is parsed once and each
// request handed to every shard (which sums up its own keys and counts
// the rest), so that one process plans on several cores a log it can read
// only once, standard input too. The shards are Summarize's, exactly.
func SummarizeAll(ctx context.Context, r *accesslog.Reader, c Config, of int, progress Progress) ([]*Shard, error) {
	if err := checkShards(&c, of); err != nil {
		return nil, err
	}
	ss, err := summarizeAll(ctx, r, c, of, nil, progress)
	if err != nil {
		return nil, err
	}
	return shardsOf(ss, r), nil
}

// shardsOf are the summarizers' shards, once r is read to its end.
func shardsOf(ss []*summarizer, r *accesslog.Reader) []*Shard {
	shards := make([]*Shard, len(ss))
	for i, s := range ss {
		shards[i] = s.shard(r)
	}
	return shards
}

// summarizeAll is SummarizeAll's summarizers, each keeping its keys'
// requests as keep says (nil: none).
func summarizeAll(ctx context.Context, r *accesslog.Reader, c Config, of int, keep *keeping, progress Progress) ([]*summarizer, error) {
	// The reader's batches (readBatches, as a plan of one pass reads)
	// go to every shard, and back to be filled again once the last is
	// done with one.
	type shared struct {
		entries []accesslog.Entry
		left    atomic.Int32
	}
	batches, free := make(chan read, 4), make(chan []accesslog.Entry, 4*of+2)
	readErr := make(chan error, 1)
	go func() { readErr <- readBatches(ctx, r, batches, free) }()
	ss := make([]*summarizer, of)
	in := make([]chan *shared, of)
	var wg sync.WaitGroup
	for i := range of {
		ss[i], in[i] = newSummarizer(c, i, of), make(chan *shared, 4)
		ss[i].keep = keep
		ss[i].keepInputs = keep != nil && keep.inputs
		wg.Go(func() {
			for b := range in[i] {
				for j := range b.entries {
					ss[i].see(&b.entries[j])
				}
				if b.left.Add(-1) == 0 {
					select {
					case free <- b.entries:
					default: // the collector's
					}
				}
			}
		})
	}
	requests, first, last := 0, int64(0), int64(0)
	var lastProgress time.Time
	for rb := range batches {
		if requests == 0 {
			first = rb.entries[0].At
		}
		requests, last = requests+len(rb.entries), rb.entries[len(rb.entries)-1].At
		b := &shared{entries: rb.entries}
		b.left.Store(int32(of))
		for _, ch := range in {
			ch <- b
		}
		if progress != nil && time.Since(lastProgress) > time.Second {
			progress(rb.lines, requests, time.Duration(last-first))
			lastProgress = time.Now()
		}
	}
	for _, ch := range in {
		close(ch)
	}
	wg.Wait()
	if err := <-readErr; err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return ss, nil
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
	p, _, users, _, err := merge(c, shards)
	if err != nil {
		return nil, err
	}
	if users != nil {
		p.undecided()
	}
	return p, nil
}

// merge is Merge's plan before it says what it cannot decide, with its
// clients, the keys the policy was chosen over (nil: none), and each
// shard's keys' numbers in the plan (by their number in the shard).
func merge(c Config, shards []*Shard) (p *Plan, cs *clients, users []int32, ids [][]int32, err error) {
	if err := c.check(); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := checkMerge(c, shards); err != nil {
		return nil, nil, nil, nil, err
	}
	began := time.Now()
	first := shards[0]
	// Every key, in order of its first request in the log, as one pass
	// numbers them.
	type ref struct{ shard, key int }
	var refs []ref
	ids = make([][]int32, len(shards))
	for si, s := range shards {
		ids[si] = make([]int32, len(s.Keys))
		for i := range s.Keys {
			refs = append(refs, ref{si, i})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int {
		return cmp.Compare(shards[a.shard].Keys[a.key].Order, shards[b.shard].Keys[b.key].Order)
	})

	cs = newClients(int64(c.period()))
	g := first.Grid
	cs.grid = grid{origin: g.Origin, width: g.Width, last: g.Last, begun: g.Begun}
	cv := newCurves(c.Periods, c.Rates)
	cv.of = make([]*curve, len(refs))
	cv.peaks = make([]int64, len(refs)*len(cv.lengths))
	for id, r := range refs {
		k := &shards[r.shard].Keys[r.key]
		ids[r.shard][r.key] = int32(id)
		cl := &client{key: k.Key, requests: k.Requests, cost: k.Cost, logged429: k.Logged429, first: k.First, peak: k.Peak,
			agents: distinct{seen: k.Agents}, paths: distinct{seen: k.Paths}, series: k.Series, from: k.From}
		cs.ids[k.Key] = int32(id)
		cs.all = append(cs.all, cl)
		if !k.Decided {
			continue
		}
		if len(k.Lead) != len(cv.intervals) || len(k.Peaks) != len(cv.lengths) {
			return nil, nil, nil, nil, fmt.Errorf("plan: key %q: a summary of %d rates and %d lengths, where the merge has %d and %d", k.Key, len(k.Lead), len(k.Peaks), len(cv.intervals), len(cv.lengths))
		}
		cv.of[id] = &curve{first: k.DecidedFirst, total: k.DecidedCost, lead: k.Lead, need: k.Need}
		copy(cv.peaks[id*len(cv.lengths):], k.Peaks)
	}
	p = &Plan{Config: c, Lines: first.Lines, Requests: first.Requests, Free: first.Free, Skipped: first.Skipped, Skips: first.Skips,
		NoKey: first.NoKey, FirstNoKey: first.FirstNoKey, Unseen: first.Unseen, Sources: first.Sources, Logged429: first.Logged429,
		Span: time.Duration(first.Last - first.First), WholeSeconds: !first.Fractions, Merged: len(shards)}
	if p.Requests == 0 {
		return nil, nil, nil, nil, ErrNoRequest
	}
	p.finish(cs, &deciders{c: c})
	users = p.curves(cs, cv, nil)
	p.Took = time.Since(began)
	return p, cs, users, ids, nil
}

// checkMerge says what makes shards no cut of one log that c can merge.
func checkMerge(c Config, shards []*Shard) error {
	if len(c.Limits) > 0 {
		return errors.New("plan: a merge of shards decides no sweep: --limits is for a plan of the whole log")
	}
	if len(shards) == 0 {
		return errors.New("plan: no shard to merge")
	}
	first := shards[0]
	seen := make([]bool, first.Of)
	for _, s := range shards {
		switch {
		case s.Of != first.Of:
			return fmt.Errorf("plan: shards of %d and of %d: merge the shards of one cut", first.Of, s.Of)
		case s.Index < 0 || s.Index >= s.Of || seen[s.Index]:
			return fmt.Errorf("plan: shard %d of %d twice, or out of range", s.Index, s.Of)
		case !slices.Equal(s.Periods, c.Periods) || !slices.Equal(s.Rates, c.Rates) || s.Period != c.period() || s.DropRefused != c.DropRefused:
			return fmt.Errorf("plan: shard %d of %d was summed up on other periods, rates or --refused than the merge asks", s.Index, s.Of)
		case s.Lines != first.Lines || s.Requests != first.Requests || s.First != first.First || s.Last != first.Last:
			return fmt.Errorf("plan: shard %d of %d read %d lines, shard %d %d: shards of one log read all of it", s.Index, s.Of, s.Lines, first.Index, first.Lines)
		}
		seen[s.Index] = true
	}
	if i := slices.Index(seen, false); i >= 0 {
		return fmt.Errorf("plan: shard %d of %d is missing: a plan needs every key", i, first.Of)
	}
	return nil
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
	p.nginxPolicy(func(...products.NginxRule) (int64, int64) { return -1, -1 })
	p.decideProducts(nil, nil)
}
