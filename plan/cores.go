package plan

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

// A plan on several cores: the log read once, its keys summed up in as
// many shards at once (SummarizeAll's), merged into the policy as Merge
// merges them; and, unlike a merge of summaries from other machines, the
// requests the policy refuses decided too, each shard having kept its
// keys' requests while it read them, as a plan of one pass keeps them.

// keeping is the requests the shards of a plan on several cores keep to
// decide: how many, and the most they may (0: no bound). Past it, each
// lets go of what it kept and keeps no more.
type keeping struct {
	most    int64
	inputs  bool // each request's input too
	n       atomic.Int64
	stopped atomic.Bool
}

// keepRequest keeps l, one of the summarizer's keys' requests decided,
// unless the plan keeps no more.
func (s *summarizer) keepRequest(l logged, input int) {
	if s.keep.stopped.Load() {
		s.kept = nil
		return
	}
	s.kept.add(l)
	if s.keepInputs {
		s.keptInputs.add(input)
	}
	// Counted together a block at a time: an atomic add a request, by
	// every shard, kept a cache line moving between the cores.
	if s.unkept++; s.unkept < keepBlock {
		return
	}
	if n := s.keep.n.Add(int64(s.unkept)); s.keep.most > 0 && n > s.keep.most {
		s.keep.stopped.Store(true)
		s.kept, s.keptInputs = nil, nil
	}
	s.unkept = 0
}

// keepBlock is how many requests a shard keeps before it counts them
// with the others'.
const keepBlock = 4096

// RunOnCores plans r on cores cores, as Run plans it in one pass: the
// same policy, classes, tiers and verdict, and what it refuses decided
// over the requests, unless the log holds more than c.Keep requests
// (then, as a merge of summaries, it says whom the policy refuses and not
// how many of their requests, and Undecided says why). A sweep of limits
// (c.Limits) decides every request with every limiter on every core
// already: Run's.
func RunOnCores(ctx context.Context, r *accesslog.Reader, c Config, cores int, progress Progress) (*Plan, error) {
	if err := checkShards(&c, cores); err != nil {
		return nil, err
	}
	began := time.Now()
	keep := &keeping{most: c.Keep}
	if c.Current != nil {
		keep.most = 0 // the limit run today is decided over every request
	}
	keep.inputs = c.Current != nil // a limit run today, decided per node too
	ss, err := summarizeAll(ctx, r, c, cores, keep, progress)
	if err != nil {
		return nil, err
	}
	p, cs, users, ids, err := merge(c, shardsOf(ss, r))
	if err != nil {
		return nil, err
	}
	p.Cores, p.Merged = cores, 0 // one plan of the log, not a merge of summaries
	if users == nil {
		p.Took = time.Since(began)
		return p, nil
	}
	if keep.stopped.Load() {
		p.undecided()
		p.Undecided = fmt.Sprintf("the log's %s requests are more than the %s it keeps to decide them (a quarter of --memory)", results.Count(int64(p.Decided)), results.Count(c.Keep))
		p.Took = time.Since(began)
		return p, nil
	}
	// The shards' requests, their keys numbered as the plan numbers
	// them; each decision merges them in time order (kept.each): a
	// limiter decides requests as they came (given one shard's after
	// another, time going back, the key table's limiters refused other
	// requests than one pass's).
	decided := kept{shards: make([]chunks, len(ss))}
	for i, s := range ss {
		for _, block := range s.kept {
			for j := range block {
				block[j].id = ids[i][block[j].id]
			}
		}
		decided.shards[i], s.kept = s.kept, nil
		if s.keepInputs {
			decided.inputs = append(decided.inputs, s.keptInputs)
		}
	}
	p.decideCurves(cs, decided, users)
	if c.Current != nil {
		if err := p.decideCurrent(cs, decided, users); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.Took = time.Since(began)
	return p, nil
}

// kept are the requests decided as the plan kept them: one chunks in
// time order for a plan of one pass, one a shard for a plan on several
// cores, each in time order and of keys of its own; and, where a limit
// run today is decided per node, each request's input (by shard, block
// by block as the requests; nil where they are not kept).
type kept struct {
	shards []chunks
	inputs []inputs
}

// inputs are requests' inputs (accesslog.Entry.Input), in blocks as the
// requests' chunks are.
type inputs [][]uint16

func (in *inputs) add(i int) {
	if n := len(*in); n == 0 || len((*in)[n-1]) == chunkSize {
		*in = append(*in, make([]uint16, 0, chunkSize))
	}
	last := &(*in)[len(*in)-1]
	*last = append(*last, uint16(min(i, math.MaxUint16)))
}

// maxInputs is how many inputs a plan tells apart per request: a fleet's
// nodes for a limit run today on each (more: it says so).
const maxInputs = math.MaxUint16

// request is a kept request and its input (-1 where inputs are not kept).
type keptRequest struct {
	logged
	input int
}

// only is k with the requests of the keys in (by number) alone, in their
// order, and their inputs where k keeps them.
func (k kept) only(in []bool) kept {
	out := kept{shards: make([]chunks, len(k.shards))}
	if len(k.inputs) == len(k.shards) {
		out.inputs = make([]inputs, len(k.shards))
	}
	for s, c := range k.shards {
		for b, block := range c {
			for i, r := range block {
				if !in[r.id] {
					continue
				}
				out.shards[s].add(r)
				if out.inputs != nil {
					out.inputs[s].add(int(k.inputs[s][b][i]))
				}
			}
		}
	}
	return out
}

// each gives f the requests of the keys in (by number), in time order
// across the shards (at one instant, the first shard's first): a limiter
// decides requests as they came.
func (k kept) each(in []bool, f func(keptRequest)) {
	inputOf := func(shard, block, i int) int {
		if shard >= len(k.inputs) || block >= len(k.inputs[shard]) {
			return -1
		}
		return int(k.inputs[shard][block][i])
	}
	if len(k.shards) == 1 {
		for b, block := range k.shards[0] {
			for i, r := range block {
				if in[r.id] {
					f(keptRequest{r, inputOf(0, b, i)})
				}
			}
		}
		return
	}
	// Each shard's requests of those keys (a policy's are few), then
	// merged.
	of := make([][]keptRequest, len(k.shards))
	for s, c := range k.shards {
		for b, block := range c {
			for i, r := range block {
				if in[r.id] {
					of[s] = append(of[s], keptRequest{r, inputOf(s, b, i)})
				}
			}
		}
	}
	at := make([]int, len(of))
	for {
		best := -1
		for i, rs := range of {
			if at[i] < len(rs) && (best < 0 || rs[at[i]].at < of[best][at[best]].at) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		f(of[best][at[best]])
		at[best]++
	}
}

// decidesNone says why the plan decided no request ("" where it did): a
// merge of summaries, or a plan on several cores of more requests than it
// keeps.
func (p *Plan) decidesNone() string {
	switch {
	case p.Merged > 0:
		return "a plan merged from shards decides no request"
	case p.Undecided != "":
		return p.Undecided
	}
	return ""
}
