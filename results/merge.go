package results

import (
	"fmt"
	"slices"
)

// Merge pools runs of one lab (the same tree, parameters and seed, run
// one after the other) into one file, for a committed baseline that sits
// in the middle of the noise rather than wherever one run landed: memory
// per user and allocations per decision, their medians (when a table
// grows depends on each process's hash seed); the simulated accuracy,
// which must be the same in every file; each timing run's rounds from
// every file, in order. Everything else is the first file's, but for the
// curves (a picture of a window edge), which it leaves out: nine tenths of
// a quick lab's file, and nothing a baseline compares. What it pools is
// what the modes' gates say.
func Merge(ms Modes, files ...*File) (*File, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("results: nothing to merge")
	}
	first := files[0]
	byKey, order, twice, _ := gated(first, ms)
	if len(twice) > 0 {
		return nil, &MismatchError{Twice: []string{"the first file has " + twice[0].String()}}
	}
	pools := make([]map[key]Row, len(files))
	for i, f := range files {
		if err := sameLab(first, f); err != nil {
			return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), err)
		}
		rows, fOrder, twice, _ := gated(f, ms)
		if len(twice) > 0 || len(fOrder) != len(order) {
			return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), &MismatchError{OnlyNew: []string{fmt.Sprintf("%d gated rows, where the first has %d", len(fOrder), len(order))}})
		}
		for _, k := range order {
			r, ok := rows[k]
			if !ok {
				return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), &MismatchError{OnlyOld: []string{k.String()}})
			}
			for _, g := range ms.gates(k.mode) {
				if g.Check == CheckExact && byKey[k].Get(g.Metric) != r.Get(g.Metric) {
					return nil, fmt.Errorf("results: file %d of %d decided %s otherwise than the first: merge runs of one tree and seed", i+1, len(files), k)
				}
			}
		}
		pools[i] = rows
	}
	out := *first
	out.Rows = nil
	for _, r := range first.Rows {
		r.Series = slices.DeleteFunc(slices.Clone(r.Series), func(s Series) bool { return len(s.X) > 0 })
		if _, ok := byKey[keyOf(r)]; ok {
			r = pool(r, pools, ms)
		}
		out.Rows = append(out.Rows, r)
	}
	out.Meta.Merged = len(files)
	return &out, nil
}

// pool is r, a gated row, pooled with its twins in pools: the median of
// each metric with a tolerance, and the samples of every file, each metric
// they sample their median, the decisions those of every file.
func pool(r Row, pools []map[key]Row, ms Modes) Row {
	k := keyOf(r)
	r.Metrics = slices.Clone(r.Metrics)
	for _, g := range ms.gates(r.Mode) {
		if g.Check != CheckAllocs && g.Check != CheckMemory || !r.Has(g.Metric) {
			continue
		}
		vals := make([]float64, len(pools))
		for j, p := range pools {
			vals[j] = p[k].Get(g.Metric)
		}
		r.Add(g.Metric, unitOf(r, g.Metric), medianOf(vals))
	}
	if len(r.Series) == 0 {
		return r
	}
	var decisions float64
	for i, s := range r.Series {
		s.Y = nil
		for _, p := range pools {
			if o := p[k].Curve(s.Name); o != nil {
				s.Y = append(s.Y, o.Y...)
			}
		}
		r.Series[i] = s
		if r.Has(s.Name) {
			r.Add(s.Name, unitOf(r, s.Name), medianOf(slices.Clone(s.Y)))
		}
	}
	for _, p := range pools {
		decisions += p[k].Get(Decisions)
	}
	r.Add(Decisions, UnitCount, decisions)
	return r
}

// unitOf is the unit of r's metric.
func unitOf(r Row, name string) string {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Unit
		}
	}
	return ""
}
