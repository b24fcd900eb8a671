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
// pictures of a window edge (Run.Edge), which it leaves out: nine tenths
// of a quick lab's file, and nothing a baseline compares.
func Merge(files ...*File) (*File, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("results: nothing to merge")
	}
	first := files[0]
	out := *first
	out.Runs = slices.Clone(first.Runs)
	byKey, order, twice, _ := gated(first)
	if len(twice) > 0 {
		return nil, &MismatchError{Twice: []string{"the first file has " + twice[0].String()}}
	}
	pools := make([]map[key]Run, len(files))
	for i, f := range files {
		if err := sameLab(first, f); err != nil {
			return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), err)
		}
		runs, fOrder, twice, _ := gated(f)
		if len(twice) > 0 || len(fOrder) != len(order) {
			return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), &MismatchError{OnlyNew: []string{fmt.Sprintf("%d gated runs, where the first has %d", len(fOrder), len(order))}})
		}
		for _, k := range order {
			r, ok := runs[k]
			if !ok {
				return nil, fmt.Errorf("file %d of %d: %w", i+1, len(files), &MismatchError{OnlyOld: []string{k.String()}})
			}
			if a, b := byKey[k].Accuracy, r.Accuracy; k.mode == "simulated" && a != nil && (b == nil || *a != *b) {
				return nil, fmt.Errorf("results: file %d of %d decided %s otherwise than the first: merge runs of one tree and seed", i+1, len(files), k)
			}
		}
		pools[i] = runs
	}
	for i, r := range out.Runs {
		r.Edge = nil
		out.Runs[i] = r
		k := key{r.Limiter, r.Workload, r.Mode}
		if _, ok := byKey[k]; !ok || r.SkippedBecause != "" {
			continue
		}
		all := func(v func(Run) float64) float64 {
			vals := make([]float64, len(pools))
			for j, p := range pools {
				vals[j] = v(p[k])
			}
			return medianOf(vals)
		}
		switch {
		case r.Mode == "timing":
			r.Rounds, r.Decisions = nil, 0
			for _, p := range pools {
				r.Rounds = append(r.Rounds, p[k].Rounds...)
				r.Decisions += p[k].Decisions
			}
			r.ThroughputPerS = MedianOf(r.Rounds, func(x Round) float64 { return x.ThroughputPerS })
		case r.Mode == "memory":
			r.BytesPerUser = all(func(x Run) float64 { return x.BytesPerUser })
		case r.AllocsPerDecision != nil:
			a := all(func(x Run) float64 {
				if x.AllocsPerDecision == nil {
					return 0
				}
				return *x.AllocsPerDecision
			})
			r.AllocsPerDecision = &a
		}
		out.Runs[i] = r
	}
	out.Meta.Merged = len(files)
	return &out, nil
}
