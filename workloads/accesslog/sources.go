package accesslog

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A Source is where part of a log came from: one file, or the files of
// one node of a load balancer or one host of a fleet, which their names
// tell (the part of each name that has a value per node, the rest
// varying by file).
type Source struct {
	// Name is the file's, or what names the node's files (10.0.1.10 in
	// ALB's, web1 in web1/access.log), or "N files" when the files tell
	// no node.
	Name  string
	Files int
	// Lines read, requests taken and lines skipped, of its files.
	Lines, Requests, Skipped int
	// First and Last are its first and last request's times, in
	// nanoseconds since 1970 (0 for none).
	First, Last int64
	// AtOnce is how many of its files were read at once at most: 1 for a
	// node's (one after another), more for a log shipper's batches that
	// overlap.
	AtOnce int
	// Inputs are its files' indexes among the Reader's inputs (an
	// Entry's Input).
	Inputs []int
}

// maxSourceRows is how many sources a log is said in at most: more files
// than that, telling no nodes, are said as one.
const maxSourceRows = 8

// Sources are the log's sources as read so far: a file each when there
// are few, the files of each node where their names tell nodes apart
// (and each node's files follow one another in time), else one source of
// all the files.
func (r *Reader) Sources() []Source {
	files := make([]Source, len(r.inputs))
	for i, in := range r.inputs {
		f := Source{Name: in.Name, Files: 1, Requests: r.of[i].requests, First: r.of[i].first, Last: r.of[i].last, Inputs: []int{i}}
		if s := r.streams[i]; s != nil {
			f.Lines, f.Skipped = s.lines, s.skips
		}
		files[i] = f
	}
	return groupSources(files, max(r.slack(), int64(5*time.Second)))
}

// groupSources groups files (each a Source of one file) into the log's
// sources; files of one node may overlap by slack.
func groupSources(files []Source, slack int64) []Source {
	if len(files) == 1 {
		files[0].AtOnce = 1
		return files
	}
	if g := byNode(files, slack); g != nil {
		return g
	}
	if len(files) <= maxSourceRows {
		for i := range files {
			files[i].AtOnce = 1
		}
		return files
	}
	all := sum(fmt.Sprintf("%d files", len(files)), files)
	all.AtOnce = atOnce(files, slack)
	return []Source{all}
}

// byNode groups files by the part of their names that names a node: of
// the parts (split at / and _) that every name has and that differ, the
// one whose values split the files into the fewest groups, 2 to
// maxSourceRows, fewer than the files, each group's files one after
// another in time. Nil where no part does.
func byNode(files []Source, slack int64) []Source {
	parts := make([][]string, len(files))
	n := -1
	for i, f := range files {
		parts[i] = strings.FieldsFunc(f.Name, func(r rune) bool { return r == '/' || r == '_' })
		if n < 0 || len(parts[i]) < n {
			n = len(parts[i])
		}
	}
	var best map[string][]int
	var order []string
	for p := range n {
		groups := map[string][]int{}
		var values []string
		for i := range files {
			v := parts[i][p]
			if groups[v] == nil {
				values = append(values, v)
			}
			groups[v] = append(groups[v], i)
		}
		if len(groups) < 2 || len(groups) > maxSourceRows || len(groups) >= len(files) || best != nil && len(groups) >= len(best) {
			continue
		}
		apart := true
		for _, g := range groups {
			var of []Source
			for _, i := range g {
				of = append(of, files[i])
			}
			apart = apart && atOnce(of, slack) <= 1
		}
		if apart {
			best, order = groups, values
		}
	}
	if best == nil {
		return nil
	}
	slices.Sort(order)
	var out []Source
	for _, v := range order {
		var of []Source
		for _, i := range best[v] {
			of = append(of, files[i])
		}
		s := sum(trimExt(v), of)
		s.AtOnce = 1
		out = append(out, s)
	}
	return out
}

// sum is the files as one source, named name.
func sum(name string, files []Source) Source {
	s := Source{Name: name}
	for _, f := range files {
		s.Inputs = append(s.Inputs, f.Inputs...)
		s.Files += f.Files
		s.Lines += f.Lines
		s.Requests += f.Requests
		s.Skipped += f.Skipped
		if f.Requests == 0 {
			continue
		}
		if s.First == 0 || f.First < s.First {
			s.First = f.First
		}
		s.Last = max(s.Last, f.Last)
	}
	return s
}

// atOnce is how many of files' spans overlap at most, each span's end
// taken slack early (a node's next file may start a moment before its
// last one's end).
func atOnce(files []Source, slack int64) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, f := range files {
		if f.Requests == 0 {
			continue
		}
		edges = append(edges, edge{f.First, 1}, edge{max(f.Last-slack, f.First), -1})
	}
	// An end before a start at one instant: files that touch do not
	// overlap.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return max(most, 1)
}

// trimExt is a part of a name without the extensions a log's files end
// in (10.0.1.10.log.gz: 10.0.1.10).
func trimExt(v string) string {
	for {
		t := v
		for _, ext := range []string{".gz", ".log", ".json", ".txt"} {
			t = strings.TrimSuffix(t, ext)
		}
		if t == v || t == "" {
			return v
		}
		v = t
	}
}
