package plan

import (
	"fmt"
	"slices"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// keySummary is what a plan needs of one key over a stretch of a log,
// all of it merging exactly with the key's next stretch: its counts, its
// distinct agents and paths (to maxDistinct, which is all that is asked
// of them: four make a key look like many users), and its least bursts
// and envelope (stretch).
type keySummary struct {
	// counts are the key's requests, cost, 429s, agents and paths, as a
	// client counts them (count).
	counts client
	// Decided is the stretch of the requests decided (all of them, unless
	// the log's 429s are dropped).
	Decided *stretch
}

// see counts e into k; decided says whether it is decided (a 429 dropped
// is counted, not decided).
func (s shape) see(k *keySummary, e *accesslog.Entry, decided bool) {
	k.counts.count(e)
	if decided {
		s.add(k.Decided, e.At, int64(e.N))
	}
}

// mergeKey returns the summary of a's stretch of the key then b's (b's
// first request no earlier than a's last).
func (s shape) mergeKey(a, b *keySummary) (*keySummary, error) {
	ca, cb := &a.counts, &b.counts
	if ca.key != cb.key {
		return nil, fmt.Errorf("plan: the summaries of %q and %q merged as one key's", ca.key, cb.key)
	}
	st, err := s.merge(a.Decided, b.Decided)
	if err != nil {
		return nil, fmt.Errorf("plan: key %q: %w", ca.key, err)
	}
	m := &keySummary{Decided: st, counts: client{key: ca.key, requests: ca.requests + cb.requests, cost: ca.cost + cb.cost, logged429: ca.logged429 + cb.logged429,
		agents: distinct{seen: slices.Clone(ca.agents.seen)}, paths: distinct{seen: slices.Clone(ca.paths.seen)}}}
	for _, h := range cb.agents.seen {
		m.counts.agents.add(h)
	}
	for _, h := range cb.paths.seen {
		m.counts.paths.add(h)
	}
	return m, nil
}

// summaries are a stretch of a log summed up by key, in order of each
// key's first request.
type summaries struct {
	keys []*keySummary
	ids  map[string]int
}

// then returns the summaries of a's stretch of the log then b's: each key
// in both merged, each in one kept, in order of first request.
func (s shape) then(a, b *summaries) (*summaries, error) {
	out := &summaries{ids: map[string]int{}}
	put := func(k *keySummary) {
		out.ids[k.counts.key] = len(out.keys)
		out.keys = append(out.keys, k)
	}
	for _, k := range a.keys {
		if j, ok := b.ids[k.counts.key]; ok {
			m, err := s.mergeKey(k, b.keys[j])
			if err != nil {
				return nil, err
			}
			put(m)
			continue
		}
		put(k)
	}
	for _, k := range b.keys {
		if _, ok := a.ids[k.counts.key]; !ok {
			put(k)
		}
	}
	return out, nil
}
