package harness

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// edgeTitle is the number an edge panel's title states: "go-limiter (real
// time): most in any W 1.45×N".
var edgeTitle = regexp.MustCompile(`^(.+?)( \(real time\))?: most in any W ([0-9.]+)×N$`)

// titlesDisagree returns each edge panel whose title states another most
// in any W than the accuracy table's row of the same limiter on the
// boundary attack, in the same mode: one figure, one number.
func titlesDisagree(figs []report.Figure, tables []report.Table) []string {
	stated := map[string]string{} // "limiter|real" to the table's cell
	for _, tb := range tables {
		if tb.Name != "accuracy" && tb.Name != "accuracy-realtime" && !strings.HasPrefix(tb.Title, "Accuracy against the ideal") {
			continue
		}
		col := -1
		for i, h := range tb.Header {
			if h == "most in any W" {
				col = i
			}
		}
		real := strings.Contains(tb.Title, "in real time")
		for _, row := range tb.Rows {
			if col >= 0 && len(row) > col && row[0] == "boundary-attack" {
				stated[fmt.Sprintf("%s|%v", row[1], real)] = row[col]
			}
		}
	}
	var out []string
	for _, f := range figs {
		if f.Name != "edge" {
			continue
		}
		for _, p := range f.Panels {
			m := edgeTitle.FindStringSubmatch(p.Title)
			if m == nil {
				out = append(out, fmt.Sprintf("edge panel %q states no most in any W", p.Title))
				continue
			}
			key := fmt.Sprintf("%s|%v", m[1], m[2] != "")
			if cell, ok := stated[key]; !ok || cell != m[3] {
				out = append(out, fmt.Sprintf("edge panel %q says %s×N, the accuracy table %q", p.Title, m[3], cell))
			}
		}
	}
	return out
}

// Every number an edge panel's title states is the accuracy table's for
// the same limiter and attack; a table changed under it is caught.
func TestFiguresAgreeWithTables(t *testing.T) {
	f, err := results.ReadFile("../plots/testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	figs, tables := report.Figures(f, Modes()), report.Tables(f, Modes())
	panels := 0
	for _, fig := range figs {
		if fig.Name == "edge" {
			panels += len(fig.Panels)
		}
	}
	if panels == 0 {
		t.Fatal("no edge panels: nothing to check")
	}
	if bad := titlesDisagree(figs, tables); len(bad) > 0 {
		t.Errorf("%d of %d edge panels disagree:\n%s", len(bad), panels, strings.Join(bad, "\n"))
	}
	// Planted: one table cell changed.
	for i, tb := range tables {
		for j, row := range tb.Rows {
			if row[0] == "boundary-attack" && strings.HasPrefix(tb.Title, "Accuracy against the ideal") {
				planted := append([]string(nil), row...)
				for k, h := range tb.Header {
					if h == "most in any W" {
						planted[k] = "9.99"
					}
				}
				tables[i].Rows = append(append([][]string(nil), tb.Rows[:j]...), append([][]string{planted}, tb.Rows[j+1:]...)...)
				if len(titlesDisagree(figs, tables)) == 0 {
					t.Errorf("a table cell changed to 9.99 (%s, %s) went unseen", row[0], row[1])
				}
				return
			}
		}
	}
	t.Error("no boundary-attack row in an accuracy table to plant a mismatch in")
}
